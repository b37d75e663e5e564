package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// TestReadyDeadLettersCountWhenFetched (fakes, no Kafka): the source's part of /readyz counts
// dead letters when the source hands them out, not when the sink has written them. A dead
// letter fetched before a broker outage and written after it says nothing about the source
// consuming again (it may still wait to rejoin its group). CI (TestBrokerOutageRealBroker,
// 2026-11-28) saw /readyz 200 4.4 s before consuming resumed: the outage's pending dead-letter
// write succeeded as the broker came back, and counted as the source fetching.
func TestReadyDeadLettersCountWhenFetched(t *testing.T) {
	src := newFakeSource(t, memory.NewGoAllocator(), []step{{part: 0, first: 0, d: 2, deadOnly: true}})
	snk := newFakeSink(t)
	entered, release := make(chan struct{}), make(chan struct{})
	snk.fail = func(_ int, b *batch.Batch) error {
		if b == nil { // the dead-letter write: held until the test lets it through
			close(entered)
			<-release
		}
		return nil
	}
	p := loopPipeline(t, src, snk, nil)
	// A lag poller turns the source's part of readiness on (it is not run: the test plays its
	// polls with SetBrokerConnected and SetLag).
	if _, err := metrics.NewLagPoller(metrics.LagConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "in", GroupID: "g",
		Interval: time.Second}, p.metrics, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	m := p.metrics
	m.SetModel(metrics.ModelInfo{Version: 1, BuiltAt: time.Now()})
	m.SetBrokerConnected(true)
	m.SetLag("g", "in", map[int]int64{0: 40})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		stop()
		<-done
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the dead letters never reached the sink")
	}
	// Fetched, not yet written: the source consumed.
	if ok, why := m.Ready(); !ok {
		t.Errorf("dead letters fetched (their write pending): not ready (%s), want ready", why)
	}
	// The brokers go away and come back, still with lag; then the write of before succeeds.
	m.SetBrokerConnected(false)
	m.SetBrokerConnected(true)
	m.SetLag("g", "in", map[int]int64{0: 40})
	close(release)
	for deadline := time.Now().Add(20 * time.Second); p.Stats().DeadLetters.Load() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dead letters were not written 20 s after the sink was let through")
		}
	}
	if ok, why := m.Ready(); ok || !strings.Contains(why, "nothing fetched since the brokers answered") {
		t.Errorf("after the outage, with only the dead letters fetched before it written: ready %v (%q), want not ready: nothing fetched since the brokers answered", ok, why)
	}
}
