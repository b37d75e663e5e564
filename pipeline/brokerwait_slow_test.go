package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestReadRangeSlowConsumerNotCut: brokerAttemptWait bounds a broker that does not answer, not
// a fetch that was answered and is being read: a fetch whose messages take longer than it to
// hand over (a slow link for a 16 MB stale scan's fetch, or a starved process; here each
// message's handling takes 0.45 of it) is read whole, after the partition's offsets were read on the connection as its callers
// read them. kafka-go ends a fetch's batch with
// RequestTimedOut once the connection's deadline at the fetch has passed, whatever arrived.
func TestReadRangeSlowConsumerNotCut(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(2, "models"))
	for v := 1; v <= 3; v++ {
		produceKeyModel(t, br, "models", v)
	}
	cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), 6*brokerAttemptWait)
	defer cancel()
	conn, err := dialPartition(ctx, cfg, kafka.DefaultDialer, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first, end, err := readOffsets(ctx, conn, conn.RemoteAddr().String()) // (as scanPartition and lastKeyVersion do first)
	if err != nil || first != 0 || end != 3 {
		t.Fatalf("offsets %d..%d, %v; want 0..3", first, end, err)
	}
	read := 0
	err = readRange(ctx, conn, first, end, 1<<20, func(kafka.Message) {
		read++
		time.Sleep(brokerAttemptWait * 45 / 100)
	})
	if err != nil || read != 3 {
		t.Fatalf("a fetch read slowly (3 messages, 0.45 x brokerAttemptWait each): %d read, %v; want all 3 and no error", read, err)
	}
}

// TestModelTopicOffsetsEndWithTheCaller: a caller's context that ends before brokerAttemptWait
// (a stop, startRetry's last attempt of 1 s) ends a leader's offsets request waiting on a leader
// that never answers it, as it ends readRange's fetches. Failed first: partitionOffsets returned
// only at brokerAttemptWait, 4.5 s after its caller's end.
func TestModelTopicOffsetsEndWithTheCaller(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(2, "models"))
	wake := make(chan struct{})
	t.Cleanup(func() { close(wake) }) // (before the cluster's close: cleanups run last first)
	br.Kfake.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		br.Kfake.KeepControl()
		br.Kfake.SleepControl(func() { <-wake })
		return nil, nil, false
	})
	cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
	const caller = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), caller)
	defer cancel()
	t0 := time.Now()
	_, _, err := partitionOffsets(ctx, cfg, kafka.DefaultDialer, 1)
	took := time.Since(t0)
	if err == nil || took > caller+attemptSlack {
		t.Fatalf("offsets of a leader that never answers, the caller's context ending after %v: %v after %v; want a failure within %v",
			caller, err, took.Round(time.Millisecond), caller+attemptSlack)
	}
}

// TestAnswerWatchAnsweredNotCut: a wait that got its answer is not failed by the watch's timer
// firing before the wait is disarmed (an answer that arrives at the bound, or a goroutine
// descheduled between its answer and disarm on a loaded machine: review27's spurious retry).
// Here the disarm comes a fifth of brokerAttemptWait after the bound, the answer long before:
// the watch has not fired, and the connection's next request is answered. Failed first: the
// watch said fired, and the next request failed on the deadline the timer had set.
func TestAnswerWatchAnsweredNotCut(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(2, "models"))
	cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), 4*brokerAttemptWait)
	defer cancel()
	conn, err := dialPartition(ctx, cfg, kafka.DefaultDialer, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch := newAnswerWatch(conn)
	defer watch.stop()
	watch.arm()
	_, _, err = conn.ReadOffsets()
	time.Sleep(brokerAttemptWait + brokerAttemptWait/5)
	watch.disarm(ctx, err)
	if err != nil {
		t.Fatal(err)
	}
	if watch.fired() {
		t.Error("the watch fired on a wait that had its answer")
	}
	if _, _, err := conn.ReadOffsets(); err != nil {
		t.Errorf("the connection's next request after a wait answered: %v", err)
	}
}
