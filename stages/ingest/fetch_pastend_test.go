package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFetchPastTheEndResetsKfake(t *testing.T) {
	for _, latest := range []bool{false, true} {
		t.Run(fmt.Sprintf("latest=%v", latest), func(t *testing.T) { testFetchPastTheEndResets(t, kfakeEnv(t), latest) })
	}
}

func TestFetchPastTheEndResetsRealBroker(t *testing.T) {
	for _, latest := range []bool{false, true} {
		t.Run(fmt.Sprintf("latest=%v", latest), func(t *testing.T) { testFetchPastTheEndResets(t, realEnv(t), latest) })
	}
}

// testFetchPastTheEndResets: the group's offset of a partition is past the partition's end (the
// topic was deleted and created again, or the log truncated): the partition is read from where
// ingest.start_offset says, as Kafka's auto.offset.reset (earliest: its first record; latest:
// the records produced after the reset), and the reset is logged with the partition and the
// offsets. Before, the partition waited for records to reach the old offset: nothing was
// fetched, the records below it were never read.
func testFetchPastTheEndResets(t *testing.T, env kafkaEnv, latest bool) {
	const n, stale = 5, 100
	produce(t, env, makeMessages(0, 0, n, false))
	f, errs := testFetcher(env, 1, 1<<20, 0)
	f.resetLatest = latest
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.fetchPartition(fctx, 1, 0, stale)
	}()
	defer func() { stop(); <-done }()
	how := "earliest: reading from the first retained record, offset 0"
	if latest {
		how = fmt.Sprintf("latest: reading from the end, offset %d", n)
	}
	want := fmt.Sprintf("partition 0 of %s: offset %d is past the end (%d; first retained 0): the topic was recreated or the partition truncated; start_offset %s", env.topic, stale, n, how)
	said := func() bool {
		for _, l := range errs.all() {
			if strings.Contains(l, want) {
				return true
			}
		}
		return false
	}
	// The reset comes after pastEndAttempts dials (about 2.4 s of back-off); 15 s for a
	// loaded machine.
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel()
	if !waitUntil(wctx, said) {
		t.Fatalf("logged %q, want %q", errs.all(), want)
	}
	wantOff := int64(0)
	if latest {
		produce(t, env, makeMessages(0, n, 1, false))
		wantOff = n
	}
	select {
	case c := <-f.chunks:
		if c.err != nil || len(c.msgs) != 1 || c.msgs[0].m.Offset != wantOff {
			t.Fatalf("after the reset: chunk of %d messages (first %v), err %v; want offset %d", len(c.msgs), c.msgs, c.err, wantOff)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing fetched in 10 s after the reset (want offset %d)", wantOff)
	}
}
