package pipeline

import (
	"context"
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
	var plan []step
	for i := range 10 {
		plan = append(plan, step{part: 0, first: int64(5 * i), n: 5})
	}
	src := newFakeSource(t, mem, plan)
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
