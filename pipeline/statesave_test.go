package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestStopThatDropsBatchesKeepsTheLastSave: a run that ends dropping batches the detect stage
// passed on (a write the broker refuses for good here; the shutdown timeout alike) left the
// stage's close to save its alarm state (and keys' state) with those batches' effects in it,
// though they are read again after a restart, where they count again (the alarm cap, the
// series, the keys' windows). OPERATIONS ("Alarms across a restart") says such a stop saves
// nothing, the last save standing, as after a crash; only batches dropped inside the stage
// (overlap's keys' pass) did so. The fakes' source and sink around a real detect stage with
// state_dir: after the failure the alarm state files are the model's install's alone.
func TestStopThatDropsBatchesKeepsTheLastSave(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var plan []step
	for i := range 16 {
		plan = append(plan, step{part: 0, first: int64(50 * i), n: 50})
	}
	src := newFakeSource(t, mem, plan)
	snk := newFakeSink(t)
	snk.fail = func(_ int, b *batch.Batch) error {
		if b != nil && b.Offsets()[0] >= 600 {
			return errors.New("refused for good")
		}
		return nil
	}
	dir := t.TempDir()
	p := loopPipeline(t, src, snk, func(c *Config) {
		c.Run.SinkWriters = 1
		d := &c.Detect
		d.StateDir, d.Window, d.MinRecords = dir, 400, 200
		d.Density.Clusters, d.Density.Samples = 10, 50
		d.Distance.K, d.Distance.N, d.Distance.M = 5, 5, 20
		d.Score.Sample, d.Score.K = 100, 10
	})
	det, err := detect.NewStage(p.cfg.Detect, []string{"x"}, false, detect.Deps{Log: zerolog.New(zerolog.NewTestWriter(t)), Role: detect.RoleAll, OnModel: p.modelChanged})
	if err != nil {
		t.Fatal(err)
	}
	p.det, p.stage = det, det
	if err := runUntilDrained(t, p, src); err == nil || !strings.Contains(err.Error(), "refused for good") {
		t.Fatalf("Run: %v, want the sink's failure", err)
	}
	if p.Stats().ModelVersion.Load() == 0 {
		t.Fatal("no model: the stage saved nothing to compare with")
	}
	files, err := filepath.Glob(filepath.Join(dir, "alarms-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		names := make([]string, len(files))
		for i, f := range files {
			names[i] = filepath.Base(f)
		}
		t.Fatalf("alarm state files %v after a stop that dropped batches: want the install's alone (the last save stands)", names)
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatal(err)
	}
}
