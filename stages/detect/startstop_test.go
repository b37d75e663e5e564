package detect

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
)

// TestNewStageContextCutsTheSnapshotLoad: a stop during the start (the context of
// pipeline.New) did not cut the load of detect.state_dir's keys' state: NewStage took no context,
// and the load (about 1.3 GB at 100,000 keys: read, checksummed, decoded) ran to its end before
// the process could exit. Cancelled a tenth of the way into the load, NewStageContext must return
// the context's error well before the load's time, without taking the file for a bad one (no
// "skipped" warning: the next start loads it).
func TestNewStageContextCutsTheSnapshotLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 keys' models")
	}
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	kb := newKeyedBench(t, cfg, 10_000, nil, 0)
	kb.s.Close() // (the stop's save: the keys' state file)
	d, err := OpenSnapshotDir(cfg.StateDir, cfg.Snapshots, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	saved, err := d.list(keysPrefix)
	if err != nil || len(saved) == 0 {
		t.Fatalf("keys' state files %v (%v), want some", saved, err)
	}
	cfg = kb.s.cfg
	load := func(ctx context.Context, log zerolog.Logger) (*Stage, time.Duration, float64, error) {
		t0, c0 := time.Now(), cputime.Seconds()
		s, err := NewStageContext(ctx, cfg, kb.s.features, false, Deps{Log: log})
		return s, time.Since(t0), cputime.Seconds() - c0, err
	}
	full, fullCPU := time.Duration(1<<63-1), math.Inf(1)
	for range 2 { // the shorter of two whole loads (the machine is shared)
		s, took, cpu, err := load(context.Background(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if st := s.KeyStats(); st.Live != 10_000 {
			t.Fatalf("the whole load gave %d warm keys, want 10000", st.Live)
		}
		s.PassedOnDropped() // (Close saves nothing: the files stay those written above)
		s.Close()
		full, fullCPU = min(full, took), min(fullCPU, cpu)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(full/10, cancel)
	var logs testsupport.LogBuffer
	s, took, cpu, err := load(ctx, zerolog.New(&logs))
	t.Logf("whole load %v (%.0f ms of CPU); cancelled at %v: returned after %v, %.0f ms of CPU (%v)", full.Round(time.Millisecond),
		1e3*fullCPU, (full / 10).Round(time.Millisecond), took.Round(time.Millisecond), 1e3*cpu, err)
	if !errors.Is(err, context.Canceled) {
		if s != nil {
			s.PassedOnDropped()
			s.Close()
		}
		t.Fatalf("NewStageContext cancelled during the load: %v, want context.Canceled", err)
	}
	if s != nil {
		t.Error("NewStageContext returned a stage with its error")
	}
	// A load not cut takes about full (the shorter of two whole loads: at least full under the
	// same load) and its CPU time; a cut one returns soon after full/10, but on 2 shared cores
	// the return came 205-385 ms past a 35-48 ms cancel (make test's other packages; another
	// helper's tests: 1 of 4 runs once, 282 ms of a 348 ms load) while the process was waiting
	// for a core, not loading. So the wall time alone does not tell a cut load from one run to
	// its end; the CPU time does (a load run on past the cancel spends the whole load's): it fails
	// only when the return is late by both, each past 3/4 of the whole load's.
	if took > 3*full/4 && cpu > 3*fullCPU/4 {
		t.Errorf("NewStageContext returned %v after the start, %v after the cancel, having spent %.0f ms of CPU: the whole load takes %v, %.0f ms of CPU",
			took, took-full/10, 1e3*cpu, full, 1e3*fullCPU)
	}
	if strings.Contains(logs.String(), "skipped") {
		t.Errorf("the cut load took the file for a bad one:\n%s", logs.String())
	}
	if files, err := d.list(keysPrefix); err != nil || !slices.Equal(files, saved) {
		t.Errorf("keys' state files after the cut load %v (%v), want those saved %v", files, err, saved)
	}
}

// gatedAccel is the CPU's model builds behind a gate: while block is set, SolvingSet (a full
// build's first device step) says it started and waits for release.
type gatedAccel struct {
	fakeAccel
	block   atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (g *gatedAccel) SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if g.block.Load() {
		g.started <- struct{}{}
		<-g.release
	}
	return g.fakeAccel.SolvingSet(cols, p)
}

// buildingStage is a stage serving model 1, with state_dir, whose build of model 2 runs behind
// g's gate (started, not released).
func buildingStage(t *testing.T, logs *testsupport.LogBuffer) (*Stage, *gatedAccel) {
	t.Helper()
	mem := memory.NewGoAllocator()
	cfg := testConfig()
	cfg.StateDir, cfg.RefreshRecords = t.TempDir(), 500
	g := &gatedAccel{fakeAccel: fakeAccel{exact: true}, started: make(chan struct{}, 1), release: make(chan struct{})}
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.New(logs), Accelerator: g})
	if err != nil {
		t.Fatal(err)
	}
	d := testData(3000, 11)
	// Model 1 is built inside Process at 1,000 records (before_model: hold); model 2's build
	// starts after the batch that brings 500 more (refresh_records), at 1,500. The gate is set
	// before that batch: set after it, model 2's build ran on its goroutine with the gate open
	// as often as the test's goroutine was descheduled before setting it, model 2 was installed
	// and the gated build was model 3's (a 200 ms sleep before the gate failed both subtests
	// 10 of 10).
	feed(t, s, mem, d, 0, 1250, 250)
	if s.Model() == nil || s.Model().Version != 1 || s.builds.running {
		t.Fatalf("a model serves: %v (version 1 is %v), a build runs: %v; want model 1 and no build running", s.Model() != nil, s.Model() != nil && s.Model().Version == 1, s.builds.running)
	}
	g.block.Store(true)
	feed(t, s, mem, d, 1250, 2000, 250)
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("model 2's build never started")
	}
	if v := s.Model().Version; v != 1 {
		t.Fatalf("model %d serves while the gated build runs, want 1", v)
	}
	return s, g
}

// newestSnapshot is the version of state_dir's newest model snapshot (0: none).
func newestSnapshot(t *testing.T, s *Stage) uint64 {
	t.Helper()
	ld, err := s.ext.snaps.LoadNewest(s.features, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ld.Model == nil {
		return 0
	}
	return ld.Model.Version
}

// TestStopDeadlineBoundsAModelBuild: at a stop, Flush and Close waited for a model build in
// progress without bound (a full build at a window of millions takes minutes on a CPU, and the
// supervisor's kill follows run.shutdown_timeout). Given the stop's deadline, they wait until
// it at most and say what is lost (the build's model: not served, saved or published); a build
// that ends before the deadline is still installed and saved.
func TestStopDeadlineBoundsAModelBuild(t *testing.T) {
	t.Run("past the deadline", func(t *testing.T) {
		var logs testsupport.LogBuffer
		s, g := buildingStage(t, &logs)
		unblock := time.AfterFunc(5*time.Second, func() { close(g.release) }) // (were it waited for)
		defer unblock.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		if _, err := s.FlushContext(ctx); err != nil {
			t.Fatal(err)
		}
		s.CloseContext(ctx)
		took := time.Since(t0)
		if unblock.Stop() {
			close(g.release) // (the build goroutine ends)
		}
		if took > 2*time.Second {
			t.Fatalf("Flush and Close took %v with a deadline of 200 ms: they waited for the build", took.Round(time.Millisecond))
		}
		if v := s.Model().Version; v != 1 {
			t.Errorf("model %d serves after the stop, want 1 (2 was cut)", v)
		}
		if v := newestSnapshot(t, s); v != 1 {
			t.Errorf("newest model snapshot %d, want 1", v)
		}
		if !strings.Contains(logs.String(), "its model is lost") {
			t.Errorf("the log does not say the build's model is lost:\n%s", logs.String())
		}
	})
	t.Run("within the deadline", func(t *testing.T) {
		var logs testsupport.LogBuffer
		s, g := buildingStage(t, &logs)
		time.AfterFunc(100*time.Millisecond, func() { close(g.release) })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.FlushContext(ctx); err != nil {
			t.Fatal(err)
		}
		s.CloseContext(ctx)
		if v := s.Model().Version; v != 2 {
			t.Errorf("model %d serves after the stop, want 2 (built within the deadline)", v)
		}
		if v := newestSnapshot(t, s); v != 2 {
			t.Errorf("newest model snapshot %d, want 2", v)
		}
		if strings.Contains(logs.String(), "its model is lost") {
			t.Errorf("the log says a model was lost:\n%s", logs.String())
		}
	})
}

// TestHeldFirstBuildEndsWithTheContext: under before_model: hold the first model is built inside
// Process (nothing can go out before it), and that wait had no bound: at the pipeline's hard
// stop (Process's context) the detect goroutine stayed in it until the build ended. It ends with
// the context now: nothing goes out, the batches stay held (read again after a restart), and the
// log says the model is lost.
func TestHeldFirstBuildEndsWithTheContext(t *testing.T) {
	mem := memory.NewGoAllocator()
	cfg := testConfig() // (before_model: hold, the default)
	if cfg.BeforeModel != BeforeModelHold {
		t.Fatalf("before_model %v, want hold", cfg.BeforeModel)
	}
	g := &gatedAccel{fakeAccel: fakeAccel{exact: true}, started: make(chan struct{}, 1), release: make(chan struct{})}
	g.block.Store(true)
	unblock := time.AfterFunc(5*time.Second, func() { close(g.release) }) // (were it waited for)
	defer func() {
		if unblock.Stop() {
			close(g.release)
		}
	}()
	var logs testsupport.LogBuffer
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.New(&logs), Accelerator: g})
	if err != nil {
		t.Fatal(err)
	}
	d := testData(2000, 11)
	feed(t, s, mem, d, 0, 750, 250) // (held: below min_records)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	out, err := s.Process(ctx, makeBatch(t, mem, d, 750, 1250, true)) // crosses min_records: the build
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if took > 2*time.Second {
		t.Fatalf("Process took %v with a context of 200 ms: it waited for the first build", took.Round(time.Millisecond))
	}
	if len(out) != 0 || s.Model() != nil {
		t.Errorf("%d batches out, model %v after the cut first build; want none, nil", len(out), s.Model())
	}
	if s.HeldRecords() != 1250 {
		t.Errorf("%d records held, want 1250", s.HeldRecords())
	}
	if !strings.Contains(logs.String(), "its model is lost") {
		t.Errorf("the log does not say the build's model is lost:\n%s", logs.String())
	}
	s.Abandon()
	s.Close()
}
