package detect

import (
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
)

// TestReloadAfterSnapshotStartSaysWhatTheRebuildWaitsFor: a stage started from a snapshot
// without a saved window serves the snapshot's model until its window holds min_records again, so a reload of a key
// that shapes the model starts no build then. The reload must say so (operator29: the log
// said "rebuild_started": false and nothing else, which OPERATIONS explains as a build
// already running; none ran, and the snapshot's model scored under the old values for the
// min_records records the window still lacked).
func TestReloadAfterSnapshotStartSaysWhatTheRebuildWaitsFor(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	d := testData(3000, 6)
	cfg := testConfig()
	cfg.StateDir = t.TempDir()
	stopAfter(t, cfg, mem, d, 1500, 250) // the first model at 1000 records, snapshotted
	// A state_dir without a window file (of a release before it; with one the reload rebuilds at
	// once: TestReloadAfterRestartRebuildsAtOnce).
	removeWindowFiles(t, cfg.StateDir)

	b := newTestStage(t, cfg)
	if b.Model() == nil {
		t.Fatal("stage b did not resume from the snapshot")
	}
	feed(t, b, mem, d, 1500, 1800, 100) // 300 records: below min_records (1000)
	next := cfg
	next.Distance.K = 12
	r, err := b.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if r.RebuildStarted || b.builds.running {
		t.Fatalf("a build started with 300 of min_records=1000 in the window: %+v", r)
	}
	for _, want := range []string{"300 of detect.min_records=1000", "snapshot"} {
		if !strings.Contains(r.RebuildWaits, want) {
			t.Errorf("RebuildWaits = %q, want it to contain %q", r.RebuildWaits, want)
		}
	}
	// Once the window holds min_records the rebuild comes, with the new k.
	feed(t, b, mem, d, 1800, 2600, 100)
	b.collect(true)
	if m := b.Model(); m.Version < 2 || m.Params.K != 12 {
		t.Errorf("model version %d with k %d after the window filled, want a rebuild with k 12", m.Version, m.Params.K)
	}

	// A reload that starts a build waits for nothing; one made while that build runs says
	// the rebuild follows it.
	next2 := next
	next2.Distance.K = 14
	if r, err = b.Reconfigure(next2); err != nil {
		t.Fatal(err)
	}
	if !r.RebuildStarted || r.RebuildWaits != "" {
		t.Fatalf("window full, no build running: %+v, want a rebuild started, waiting for nothing", r)
	}
	next3 := next2
	next3.Distance.K = 16
	if r, err = b.Reconfigure(next3); err != nil {
		t.Fatal(err)
	}
	if r.RebuildStarted || !strings.Contains(r.RebuildWaits, "build runs") {
		t.Errorf("reload during a build: %+v, want RebuildWaits to say a build runs", r)
	}
	b.collect(true)
	b.Close()
}

// TestScorerReloadSaysTheRebuildIsTheBuilders: a scorer builds no model, so a reload of a key
// that shapes the model waits for the builder's next model; its log says so rather than
// nothing (a scorer's window is always empty: "min_records" would mislead).
func TestScorerReloadSaysTheRebuildIsTheBuilders(t *testing.T) {
	d := testData(1500, 6)
	cfg := testConfig()
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.Nop(), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, _, err := s.InstallModel(buildTestModel(t, d, cfg), nil); err != nil {
		t.Fatal(err)
	}
	next := cfg
	next.Distance.K = 12
	r, err := s.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if r.RebuildStarted || !strings.Contains(r.RebuildWaits, "the builder") {
		t.Errorf("scorer's reload: %+v, want it waiting for the builder", r)
	}
}
