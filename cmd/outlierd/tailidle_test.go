package main

import (
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestTailIdleExitCountsFromTheFirstFetch: --idle-exit was counted from before tail's readers
// had connected, so a value shorter than their connection (a TLS handshake, a remote broker)
// ended tail before its first fetch: it printed nothing, not even what the topic held. Here the
// readers' offset lookup (ListOffsets) takes 4 s and --idle-exit is 2 s: the one output in the
// topic must be printed (--max 1 then ends tail at once). Margins: 2 s for the fetch and print
// of one local record once the readers fetch (300 ms before: thin on a loaded 2-core machine),
// and 2 s between the idle timer and the held lookup's end, so that a timer counted from the
// start still fires first and the test fails on it.
func TestTailIdleExitCountsFromTheFirstFetch(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	path, names := kafkaConfig(t, br, "json")
	createTopics(t, path, 1)
	testsupport.Produce(t, br, outlierOutput(names[1], "in/0/1"))
	slowed := holdFirstOffsets(br, 4*time.Second)
	out, errs, code := outlierd(t, "tail", "--config", path, "--from-beginning", "--idle-exit", "2s", "--max", "1")
	if code != 0 || !strings.Contains(out, "in/0/1") || !strings.Contains(errs, "1 printed") {
		t.Errorf("tail --idle-exit 2s with a 4 s connection: exit %d, stdout %q, stderr %q: want the output printed", code, out, errs)
	}
	if !slowed.Load() {
		t.Error("the readers never asked for the offsets: the test did not slow their connection")
	}
}

// TestTailIdleExitBoundsTheConnection: with --idle-exit counted from the first fetch, readers that
// never get there (here the offset lookup answers after 3 s) must still end tail, with an error
// that names the topic, after tailConnectWait (cut to 300 ms here), not hang a script for ever.
func TestTailIdleExitBoundsTheConnection(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	path, names := kafkaConfig(t, br, "json")
	createTopics(t, path, 1)
	cutTailConnectWait(t, 300*time.Millisecond)
	holdFirstOffsets(br, 3*time.Second)
	start := time.Now()
	_, errs, code := outlierd(t, "tail", "--config", path, "--idle-exit", "100ms")
	if code != 1 || !strings.Contains(errs, names[1]) || !strings.Contains(errs, "have not all connected") {
		t.Errorf("tail with readers that cannot connect: exit %d, stderr %q: want exit 1 naming topic %s", code, errs, names[1])
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("tail took %s, want about tailConnectWait (300 ms)", d)
	}
}
