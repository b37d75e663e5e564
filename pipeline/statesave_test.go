package pipeline

import (
	"context"
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
	keepsTheLastSave(t, func(snk *fakeSink, src *fakeSource) Source {
		snk.fail = func(_ int, b *batch.Batch) error {
			if b != nil && b.Offsets()[0] >= 600 {
				return errors.New("refused for good")
			}
			return nil
		}
		return src
	}, "refused for good")
}

// TestFailedFinalCommitKeepsTheLastSave: a graceful stop whose final commit fails (the group's
// coordinator refuses it; the hard stop cutting it alike) leaves every batch written since the
// last successful commit to be read again after a restart, where it counts again: the stage's
// close saves nothing then either, the last save standing.
func TestFailedFinalCommitKeepsTheLastSave(t *testing.T) {
	keepsTheLastSave(t, func(_ *fakeSink, src *fakeSource) Source {
		return refusedCommitSource{src}
	}, "final commit")
}

// refusedCommitSource's commits all fail at once.
type refusedCommitSource struct{ *fakeSource }

func (refusedCommitSource) Commit(context.Context) (map[int]int64, error) {
	return nil, errors.New("commit refused by the coordinator")
}

// keepsTheLastSave runs 16 batches of 50 records through a real detect stage with state_dir
// between the fakes' source and sink, broken by breakRun (which returns the source to use),
// expects Run's error to contain want, and the alarm state files then to be the model's
// install's alone.
func keepsTheLastSave(t *testing.T, breakRun func(*fakeSink, *fakeSource) Source, want string) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, onePartitionPlan(16, 50))
	snk := newFakeSink(t)
	dir := t.TempDir()
	p := loopPipeline(t, breakRun(snk, src), snk, func(c *Config) {
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
	if err := runUntilDrained(t, p, src); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run: %v, want an error with %q", err, want)
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
