package pipeline

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestStateDirCreatedAtStart: detect.state_dir need not exist: lint accepts a directory that
// can be created (checkStateDir) and the detect stage creates it (OpenSnapshotDir). The
// columns' record (columns.txt) was written before the stage ran, into the directory not yet
// created, and the start failed: "pipeline: detect.state_dir: .../columns.txt: no such file
// or directory" (failed before the fix). Now the directory is created first, as the stage
// would, and the start goes on with columns.txt written.
func TestStateDirCreatedAtStart(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Detect.StateDir = filepath.Join(t.TempDir(), "var", "state")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a state_dir that can be created refused by Validate: %v", err)
	}
	r, _ := startLogged(t, cfg)
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Detect.StateDir, columnsFileName)); err != nil {
		t.Errorf("no %s in the state_dir created at the start: %v", columnsFileName, err)
	}
}
