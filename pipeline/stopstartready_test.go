package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestReadyzSaysStoppingDuringTheStart: a SIGTERM while the start waits (here for brokers that
// cannot be reached) left /readyz on what the start waited for, and once New returned, on
// "start failed: pipeline: the start was stopped: context canceled": a clean stop (exit 0)
// read as a failure. /readyz says "stopping" from the signal on (OPERATIONS: "/readyz 503
// 'stopping' at once").
func TestReadyzSaysStoppingDuringTheStart(t *testing.T) {
	addr := refusingAddr(t)
	in, out, dlq := testsupport.UniqueName("ss-in"), testsupport.UniqueName("ss-out"), testsupport.UniqueName("ss-dlq")
	br := testsupport.Broker{Name: "none", Addrs: []string{addr}}
	ctx, stop := context.WithCancel(context.Background())
	base, newDone := newServedCtx(t, ctx, sensorConfig(br, in, out, dlq, testsupport.UniqueName("ss-group"), sink.EmitAll))
	awaitReadyz(t, base, "waiting for the brokers to answer", newDone, 10*time.Second)
	stop()
	select {
	case r := <-newDone:
		if r.err == nil || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("New after the stop: %v, want the stop", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("New did not return after the stop")
	}
	st, body, err := testsupport.TryGet(base + "/readyz")
	if err != nil || st != 503 || !strings.Contains(body, "stopping") || strings.Contains(body, "failed") {
		t.Errorf("/readyz after a stop during the start: %d %q %v, want 503 \"stopping\", not a failure", st, body, err)
	}
}
