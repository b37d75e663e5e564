package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

func TestTransient(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("sink: write 3 outputs: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"cancelled (the stop)", wrap(context.Canceled), false},
		{"connection refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"connection reset", wrap(syscall.ECONNRESET), true},
		{"closed connection", wrap(io.EOF), true},
		{"request timeout", wrap(context.DeadlineExceeded), true},
		{"retriable Kafka code", wrap(kafka.NotEnoughReplicas), true},
		{"leader election", wrap(kafka.NotLeaderForPartition), true},
		{"no leader yet (client side)", wrap(&protocol.TopicError{Topic: "out", Err: protocol.ErrNoLeader}), true},
		{"message too large (broker)", wrap(kafka.MessageSizeTooLarge), false},
		{"message too large (client)", wrap(kafka.MessageTooLargeError{}), false},
		{"authorization", wrap(kafka.TopicAuthorizationFailed), false},
		{"batch contract", errors.New("sink: batch has no _offset column"), false},
		// A fetch whose records cannot be decoded stops the pipeline, naming where.
		{"undecodable records", fmt.Errorf("ingest: fetch from in: partition 0 at offset 7: %w: unknown codec", ingest.ErrUndecodable), false},
		// A write of several messages fails with one error per message (kafka-go's
		// WriteErrors, what a writer of MaxAttempts 1 returns: the keys' models' publisher):
		// transient when every failure is (a leader election on a topic created a moment ago).
		{"per-message errors, a leader election", kafka.WriteErrors{nil, kafka.NotLeaderForPartition, kafka.NotLeaderForPartition}, true},
		{"per-message errors, one too large", kafka.WriteErrors{kafka.NotLeaderForPartition, kafka.MessageSizeTooLarge}, false},
		{"per-message errors, none", kafka.WriteErrors{nil, nil}, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestSinkWriteRetried is the regression test of the pipeline stopping on the first failed
// produce (found by TestBrokerRestartRealBroker: a broker restart made the sink's write fail
// and outlierd exit). kfake answers the pipeline's first produce requests to the output and
// dead-letter topics with NOT_ENOUGH_REPLICAS (retriable), four times each. With
// sink.max_attempts 5 (one more than the refusals any batch can meet) the pipeline must keep
// running, write every batch and dead letter once the broker accepts them again, and commit
// everything; TestSinkCannotWriteRealBroker checks that max_attempts refusals stop it.
func TestSinkWriteRetried(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	c := br.Kfake
	const parts, n = 3, 6000
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	input := newInput(in, parts, makeSensorRecords(t, n, parts, 5, 0.01, 0.01))
	produceSensors(t, br, input)

	// Refuse the first four produce requests to each of out and dlq.
	const refusals = 4
	var mu sync.Mutex
	failed := map[string]int{}
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		refuse := false
		for _, rt := range req.Topics {
			refuse = refuse || ((rt.Topic == out || rt.Topic == dlq) && failed[rt.Topic] < refusals)
		}
		if !refuse {
			return nil, nil, false // kfake handles it
		}
		for _, rt := range req.Topics {
			failed[rt.Topic]++
		}
		return testsupport.FailProduce(req, kerr.NotEnoughReplicas), nil, true
	})

	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Sink.MaxAttempts = refusals + 1
	cfg.Detect.MinRecords = 1000
	r := startPipeline(t, cfg, nil)
	r.waitCommitted(t, br, group, input, 60*time.Second)
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("Run returned %v, want nil (failed writes are retried)", err)
	}
	mu.Lock()
	t.Logf("produce requests refused: %v", failed)
	if failed[out] == 0 || failed[dlq] == 0 {
		t.Errorf("refused produces %v: want some to both the output and the dead-letter topic, or the test shows nothing", failed)
	}
	mu.Unlock()
	outs := map[string]int{}
	for _, m := range testsupport.ReadTopic(t, br, out, parts) {
		id, _ := testsupport.Header(m, sink.HeaderID)
		outs[id]++
	}
	dls := map[string]int{}
	for _, m := range testsupport.ReadTopic(t, br, dlq, 1) {
		id, _ := testsupport.Header(m, sink.HeaderSource)
		dls[id]++
	}
	for _, rec := range input.records {
		id := fmt.Sprintf("%s/%d/%d", in, rec.p, rec.off)
		if rec.malformed && dls[id] == 0 {
			t.Errorf("dead letter %s missing", id)
		}
		if !rec.malformed && outs[id] == 0 {
			t.Errorf("output %s missing", id)
		}
	}
}

// TestFetchRetried is the regression test of the pipeline stopping on a failed fetch: kfake
// answers the first fetches of the input topic with KAFKA_STORAGE_ERROR (retriable), which
// the source's partition fetcher hands to Next. The pipeline must keep fetching and, in the end,
// output every record and commit everything.
func TestFetchRetried(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	c := br.Kfake
	const parts, n, refusals = 3, 3000, 6
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	input := newInput(in, parts, makeSensorRecords(t, n, parts, 6, 0.01, 0))
	produceSensors(t, br, input)

	var mu sync.Mutex
	refused := 0
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		mu.Lock()
		defer mu.Unlock()
		if refused >= refusals || len(req.Topics) == 0 || req.Topics[0].Topic != in {
			return nil, nil, false // kfake handles it
		}
		refused++
		return testsupport.FailFetch(req, kerr.KafkaStorageError), nil, true
	})

	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Detect.MinRecords = 1000
	r := startPipeline(t, cfg, nil)
	r.waitCommitted(t, br, group, input, 60*time.Second)
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("Run returned %v, want nil (failed fetches are retried)", err)
	}
	mu.Lock()
	if refused < refusals {
		t.Errorf("%d fetches refused, want %d: the test shows nothing", refused, refusals)
	}
	mu.Unlock()
	outs := map[string]int{}
	for _, m := range testsupport.ReadTopic(t, br, out, parts) {
		id, _ := testsupport.Header(m, sink.HeaderID)
		outs[id]++
	}
	for _, rec := range input.records {
		if id := fmt.Sprintf("%s/%d/%d", in, rec.p, rec.off); outs[id] == 0 {
			t.Errorf("output %s missing", id)
		}
	}
}

// TestUnwrittenKeepsTheFailedMessages: a retry after per-message errors writes only the messages
// that failed (the others reached their partitions: writing them again duplicated them); any
// other error, or errors that do not match the messages, leave every message to write again.
func TestUnwrittenKeepsTheFailedMessages(t *testing.T) {
	msgs := []kafka.Message{{Key: []byte("a")}, {Key: []byte("b")}, {Key: []byte("c")}}
	keys := func(ms []kafka.Message) string {
		var s string
		for _, m := range ms {
			s += string(m.Key)
		}
		return s
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"one partition's leader moved", kafka.WriteErrors{nil, kafka.NotLeaderForPartition, nil}, "b"},
		{"wrapped", fmt.Errorf("publish: %w", kafka.WriteErrors{kafka.NotLeaderForPartition, nil, kafka.NotLeaderForPartition}), "ac"},
		{"not per message", kafka.NotLeaderForPartition, "abc"},
		{"errors for other messages", kafka.WriteErrors{nil, kafka.NotLeaderForPartition}, "abc"},
	} {
		if got := keys(unwritten(msgs, c.err)); got != c.want {
			t.Errorf("%s: %q written again, want %q", c.name, got, c.want)
		}
	}
}
