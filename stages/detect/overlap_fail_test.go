package detect

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// failingKeyedAccel is keyedTwinAccel whose global calls (ScoreBatch) fail from the failAt-th
// on (0: never).
type failingKeyedAccel struct {
	*keyedTwinAccel
	calls, failAt atomic.Int64
}

var errDeviceLost = errors.New("device lost")

func (a *failingKeyedAccel) ScoreBatch(dens *density.Scoring, knn []solvingset.Scoring) error {
	if n := a.calls.Add(1); a.failAt.Load() > 0 && n >= a.failAt.Load() {
		return errDeviceLost
	}
	return a.keyedTwinAccel.ScoreBatch(dens, knn)
}

// TestOverlapKeyedFailsAndCloses: an overlapped stage with its keys' passes chained, whose
// global device call fails mid-stream (deferred, speculative and switching) or that is closed
// with batches in flight, returns the device's error from Process, releases every batch (none
// passed on after the error) and leaves no goroutine behind once closed.
func TestOverlapKeyedFailsAndCloses(t *testing.T) {
	defer func(v float64) { speculateShare = v }(speculateShare)
	rows := joiningFleet(30, 12000, 50, 0.01, 5, "sensor-%03d")
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	for _, share := range []float64{2, 0, 0.5} {
		for _, failAfter := range []int64{0, 5, 20, 40} { // (0: never fails; closed with batches in flight)
			t.Run(fmt.Sprintf("share=%v/fail=%d", share, failAfter), func(t *testing.T) {
				speculateShare = share
				before := runtime.NumGoroutine()
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				a := &failingKeyedAccel{keyedTwinAccel: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}}
				s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop(), Accelerator: a, Overlap: OverlapOnGPU})
				if err != nil {
					t.Fatal(err)
				}
				t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
				var failed error
				for at := 0; at < len(rows) && failed == nil; at += 250 {
					if failAfter > 0 && s.model != nil && a.failAt.Load() == 0 {
						a.failAt.Store(a.calls.Load() + failAfter)
					}
					var tr []testbatch.Row
					for i := at; i < at+250; i++ {
						tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Time: t0.Add(time.Duration(i) * time.Second), Features: []float32{rows[i].value}})
					}
					b := testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr)
					bs, err := s.Process(context.Background(), b)
					if err != nil {
						failed = err
						b.Release() // (the failing call's batch is its caller's)
						break
					}
					for _, o := range bs {
						o.Release()
					}
				}
				reached := a.failAt.Load() > 0 && a.calls.Load() >= a.failAt.Load()
				if failed == nil && failAfter > 0 { // (a failing call of a batch still in flight: Flush finishes it)
					bs, err := s.Flush()
					failed = err
					for _, o := range bs {
						o.Release()
					}
				}
				if reached != errors.Is(failed, errDeviceLost) || !reached && failed != nil {
					t.Fatalf("%d global calls (failing from %d): the stage's error %v", a.calls.Load(), a.failAt.Load(), failed)
				}
				if failAfter == 0 && len(s.flight) == 0 {
					t.Fatal("nothing in flight at the close: the case misses its point")
				}
				t.Logf("%d global calls (failing from %d): %v; %d batches in flight at the close", a.calls.Load(), a.failAt.Load(), failed, len(s.flight))
				s.Close()
				mem.AssertSize(t, 0)
				deadline := time.Now().Add(5 * time.Second)
				for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := runtime.NumGoroutine(); n > before {
					buf := make([]byte, 1<<20)
					t.Fatalf("%d goroutines after the close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
				}
			})
		}
	}
}
