package detect

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestScorerWithoutSnapshotSaysTheBuilderBuilds (newuser31): a scorer started on an empty
// detect.state_dir logged "no usable model snapshot: the first model is built from the window
// once it holds min_records", though a scorer keeps no window and builds nothing: its first
// model is the builder's. Role all keeps its line.
func TestScorerWithoutSnapshotSaysTheBuilderBuilds(t *testing.T) {
	for _, c := range []struct {
		role Role
		want string
	}{
		{RoleScorer, "no usable model snapshot: the first model is the builder's, read from run.model_topic"},
		{RoleAll, "no usable model snapshot: the first model is built from the window once it holds min_records"},
	} {
		cfg := Default()
		cfg.StateDir = t.TempDir()
		var logs testsupport.LogBuffer
		s, err := NewStage(cfg, []string{"a", "b"}, false, Deps{Log: zerolog.New(&logs), Role: c.role})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got := logs.Lines(c.want); len(got) != 1 {
			t.Errorf("role %v: lines with %q: %d, want 1; log:\n%s", c.role, c.want, len(got), logs.String())
		}
	}
}
