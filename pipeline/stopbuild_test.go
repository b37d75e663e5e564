package pipeline

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// gatedBuilds is the CPU's accelerator whose model builds from the second on wait, once
// started, for release (SolvingSet: a full build's first device step).
type gatedBuilds struct {
	detect.Accelerator
	builds  atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (g *gatedBuilds) SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if g.builds.Add(1) >= 2 {
		g.started <- struct{}{}
		<-g.release
	}
	return g.Accelerator.SolvingSet(cols, p)
}

// newGatedBuilds is gatedBuilds over the CPU's accelerator, closed at the test's end.
func newGatedBuilds(t *testing.T) *gatedBuilds {
	t.Helper()
	cpu, err := accel.Open("cpu", zerolog.Nop(), accel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	return &gatedBuilds{Accelerator: cpu, started: make(chan struct{}, 1), release: make(chan struct{})}
}

// TestStopDoesNotWaitOutAModelBuild: a graceful stop waited, in the detect stage's Flush, for a
// model rebuild in progress, without bound: neither the hard stop (run.shutdown_timeout) nor
// anything else ended the wait, and the final commit came only after it (a build at a window of
// millions takes minutes on a CPU: the supervisor's kill came first, and the drained records
// were read again). Now the final commit goes first, the build is waited for until the stop's
// deadline, and its model is said lost past it.
func TestStopDoesNotWaitOutAModelBuild(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g := newGatedBuilds(t)
	unblock := time.AfterFunc(10*time.Second, func() { close(g.release) }) // (were it waited for)
	defer func() {
		if unblock.Stop() {
			close(g.release)
		}
	}()
	cfg := detect.Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N, cfg.BeforeModel = 2000, 200, 5, detect.BeforeModelPass
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 200, 1<<30, time.Hour
	var logs testsupport.LogBuffer
	det, err := detect.NewStage(cfg, []string{"x"}, false, detect.Deps{Log: zerolog.New(&logs), Accelerator: g})
	if err != nil {
		t.Fatal(err)
	}
	var plan []step
	for off := int64(0); off < 6000; off += 100 {
		plan = append(plan, step{part: 0, first: off, n: 100})
	}
	src := newFakeSource(t, mem, plan)
	// shutdown_timeout 2 s: the drain and the final commit come before the deadline, at which
	// the build is given up (Run returns then); at 500 ms the drain alone overran it under
	// -race on this loaded 2-core machine (flaky31), a hard stop instead of the graceful one.
	// 2 s is still well below the build's release at 10 s (and the 5 s bound below).
	p := loopPipeline(t, pacedSource{src}, newFakeSink(t), func(c *Config) { c.Run.ShutdownTimeout = 2 * time.Second })
	p.stage = det
	done := runStoppedAtRebuild(t, p, g)
	start := time.Now()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	took := time.Since(start)
	if runErr != nil {
		t.Fatalf("Run: %v, want a graceful stop", runErr)
	}
	if took > 5*time.Second {
		t.Fatalf("Run took %v after the stop with shutdown_timeout 2 s: the stop waited for the model build", took.Round(time.Millisecond))
	}
	fetched := len(src.fetched)
	if got := src.lastCommit(); got[0] != int64(fetched) {
		t.Errorf("last commit %v, want partition 0 at %d (every record fetched, drained)", got, fetched)
	}
	if !strings.Contains(logs.String(), "its model is lost") {
		t.Errorf("the log does not say the build's model is lost:\n%s", logs.String())
	}
	t.Logf("Run returned %v after the stop", took.Round(time.Millisecond))
}

// pacedSource is a source handing out a batch every 5 ms (a live stream's pace: the model built on
// the first records serves, and a rebuild starts, while records still come).
type pacedSource struct{ *fakeSource }

func (s pacedSource) Next(ctx context.Context) (*batch.Batch, *batch.DeadLetters, error) {
	select {
	case <-time.After(5 * time.Millisecond):
	case <-ctx.Done():
	}
	return s.fakeSource.Next(ctx)
}

// runStoppedAtRebuild runs p and stops it once g's model rebuild is in progress (held there
// until g is released); done says how Run ended.
func runStoppedAtRebuild(t *testing.T, p *Pipeline, g *gatedBuilds) <-chan error {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-g.started:
	case <-time.After(20 * time.Second):
		t.Fatal("no model rebuild started")
	}
	stop()
	return done
}
