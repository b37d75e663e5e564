package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestLoopsHardStopReleasesQueuedBatches: at the hard stop every batch is released (DESIGN:
// "every path that drops a batch ... releases it"), including those still queued in the
// fetched channel when the detect goroutine gives up.
func TestLoopsHardStopReleasesQueuedBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	src := newFakeSource(t, mem, onePartitionPlan(10, 5))
	snk := newFakeSink(t)
	snk.fail = func(_ int, b *batch.Batch) error {
		if b == nil || b.Offsets()[0] >= 5 {
			return unreachableErr // transient: retried until the hard stop
		}
		return nil
	}
	p := loopPipeline(t, src, snk, func(c *Config) { c.Run.ShutdownTimeout = 300 * time.Millisecond })
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(1500 * time.Millisecond) // the queues fill behind the stuck sink
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	if n := mem.CurrentAlloc(); n != 0 {
		t.Errorf("%d bytes of Arrow buffers never released after the hard stop", n)
	}
}

// stuckCommitSource is a fakeSource whose commits wait until their context ends, as
// ingest.Source's final commit does while the group rebalances (it waits for the next
// generation).
type stuckCommitSource struct{ *fakeSource }

func (s stuckCommitSource) Commit(ctx context.Context) (map[int]int64, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestLoopsFinalCommitEndsAtHardStop: run.shutdown_timeout bounds the whole graceful stop,
// the final commit included (config.go; docs/OPERATIONS.md: the supervisor's kill follows
// it): a final commit still waiting when it passes is cut there, and Run says why. It had a
// shutdown_timeout of its own from the drain's end, so a slow drain and a stuck commit took up
// to twice the bound.
func TestLoopsFinalCommitEndsAtHardStop(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, onePartitionPlan(4, 5))
	snk := newFakeSink(t)
	snk.delay = 250 * time.Millisecond // one write at a time: the drain takes about 1 s of the 2 s
	const limit = 2 * time.Second
	p := loopPipeline(t, stuckCommitSource{src}, snk, func(c *Config) { c.Run.ShutdownTimeout, c.Run.SinkWriters = limit, 1 })
	took, err := stopWhenDrained(t, p, src)
	t.Logf("Run returned %v after the soft stop: %v", took.Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "final commit") || !strings.Contains(err.Error(), "shutdown timeout") {
		t.Errorf("Run: %v, want the final commit cut by the shutdown timeout", err)
	}
	if took > limit+700*time.Millisecond {
		t.Errorf("Run returned %v after the soft stop, past run.shutdown_timeout %v", took.Round(time.Millisecond), limit)
	}
}

// hangingCloseSink is a fakeSink whose Close waits until release is closed, as kafka-go's
// Writer.Close waits for the produces it is still trying (sink.max_attempts tries, each up to
// sink.write_timeout, backoff up to 1 s between them).
type hangingCloseSink struct {
	*fakeSink
	release chan struct{}
}

func (s hangingCloseSink) Close() error { <-s.release; return nil }

// TestRunEndsWhileSinkCloseHangs: closing the Kafka clients at Run's end is bounded
// (closeGrace), and the error says what was cut. With sink.write_timeout 1ns every produce timed
// out and was retried inside kafka-go, and the process exited 87 s after SIGTERM, 57 s past a
// shutdown_timeout of 30 s that docs/OPERATIONS.md says bounds the whole stop.
func TestRunEndsWhileSinkCloseHangs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, onePartitionPlan(2, 5))
	snk := hangingCloseSink{newFakeSink(t), make(chan struct{})}
	defer close(snk.release)
	p := loopPipeline(t, src, snk, func(c *Config) { c.Run.ShutdownTimeout = time.Second })
	took, err := stopWhenDrained(t, p, src) // (the sink's Close held Run beyond 20 s)
	if took > time.Second+closeGrace+time.Second {
		t.Errorf("Run returned %v after the stop, past shutdown_timeout 1s + closeGrace %v", took.Round(time.Millisecond), closeGrace)
	}
	if err == nil || !strings.Contains(err.Error(), "closing") {
		t.Errorf("Run: %v, want an error saying the close was cut", err)
	}
}

// slowCloseSink is a fakeSink whose Close takes d, as kafka-go's clients' closes may on a clean
// stop (a reader's fetch in flight, a writer's last batch).
type slowCloseSink struct {
	*fakeSink
	d time.Duration
}

func (s slowCloseSink) Close() error { time.Sleep(s.d); return nil }

// TestRunWaitsForASlowCloseWithinTheBudget: a clean stop whose Kafka clients take longer than
// closeGrace to close, well within run.shutdown_timeout, is a clean stop. Bounding the close by
// closeGrace alone made Run fail ("closing the Kafka clients took over 2s") when a keyed scorer's
// clients took 2-3 s to close on a loaded machine (TestKeyedBuilderAndScorersRealBroker, make
// test): the grace is for a close still running once the stop's deadline has passed.
func TestRunWaitsForASlowCloseWithinTheBudget(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newFakeSource(t, mem, onePartitionPlan(2, 5))
	snk := slowCloseSink{newFakeSink(t), closeGrace + time.Second}
	p := loopPipeline(t, src, snk, func(c *Config) { c.Run.ShutdownTimeout = 30 * time.Second })
	if _, err := stopWhenDrained(t, p, src); err != nil {
		t.Errorf("Run after a clean stop whose close took %v (shutdown_timeout 30s): %v, want nil", snk.d, err)
	}
}

// fixedCommitSource is a fakeSource whose commits return sent, as ingest.Source's does: nil
// when nothing was done since the last one (no request sent), else the offsets it committed.
type fixedCommitSource struct {
	*fakeSource
	sent map[int]int64
}

func (s fixedCommitSource) Commit(context.Context) (map[int]int64, error) { return s.sent, nil }

// TestCommitLoopCountsCommitsSent: outlierd_offset_commits_total counts the commits sent, as
// docs/OPERATIONS.md says ("offset commits that succeeded or failed"), not the intervals: an idle
// pipeline counted one a second (with commit_interval 1ns, 49.5M in 13 s), each a commit of
// nothing, and the dashboard's commit rate showed commits that never reached a broker.
func TestCommitLoopCountsCommitsSent(t *testing.T) {
	for _, c := range []struct {
		sent map[int]int64
		some bool
	}{{nil, false}, {map[int]int64{0: 5}, true}} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		src := fixedCommitSource{newFakeSource(t, mem, nil), c.sent}
		p := loopPipeline(t, src, newFakeSink(t), func(cfg *Config) { cfg.Run.CommitInterval = 10 * time.Millisecond })
		ctx, stop := context.WithTimeout(context.Background(), 200*time.Millisecond)
		p.commitLoop(ctx)
		stop()
		fams, err := p.metrics.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		commits := 0.0
		for _, f := range fams {
			if f.GetName() == "outlierd_offset_commits_total" {
				commits = f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		if (commits > 0) != c.some || (p.stats.Commits.Load() > 0) != c.some {
			t.Errorf("commits returning %v: outlierd_offset_commits_total %v, stats %d: want some %v", c.sent, commits, p.stats.Commits.Load(), c.some)
		}
	}
}

// TestCommitLoopCountsNoCommitCutByTheStop: a commit that the hard stop (work's end) cuts
// failed: it is not a commit in Stats.Commits either (the metric already left it out). The
// loop's else branch took every call that was not a logged failure for a success.
func TestCommitLoopCountsNoCommitCutByTheStop(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	src := stuckCommitSource{newFakeSource(t, mem, nil)}
	p := loopPipeline(t, src, newFakeSink(t), func(cfg *Config) { cfg.Run.CommitInterval = 10 * time.Millisecond })
	work, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	p.commitLoop(work) // the first tick's commit waits until work ends, then fails
	if n := p.stats.Commits.Load(); n != 0 {
		t.Errorf("Stats.Commits %d after a commit the stop cut, want 0", n)
	}
}
