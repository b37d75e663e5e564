package pipeline

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
)

// lostWhile is how long testsupport.LosingBroker loses every request in the follow tests: a live
// follower's fetch (a long poll of 500 ms) and whatever it asks next (kafka-go's Reader: its
// re-dial's metadata request, 0.5-1.6 s later) are lost in it.
const lostWhile = 2 * time.Second

// recoverWithin bounds how long a follower takes, once the broker answers again, to read what
// is written then: the attempt in flight ends within brokerAttemptWait (its own, or the dial's
// of each broker; one here), then a backoff (retryMin x 2^attempt: under 1 s after the two or
// three attempts a loss of lostWhile costs), then a dial and a fetch answered at once;
// attemptSlack covers a loaded machine's timers and dials.
const recoverWithin = brokerAttemptWait + time.Second + attemptSlack

// publishTestModel writes model v (testModel) to the model topic cfg names, as a builder does.
func publishTestModel(t *testing.T, cfg modelTopicConfig, v uint64) {
	t.Helper()
	msgs, err := modelMessages(publication{model: testModel(t, v, 200)}, cfg.maxMessageBytes)
	if err != nil {
		t.Fatal(err)
	}
	// (A transport of its own: the shared one's metadata, cached for 6 s, sent a write after a
	// partition moved to its old leader, refused, until it expired.)
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(cfg.brokers...), Topic: cfg.topic, Balancer: toPartition0, BatchSize: 1, RequiredAcks: kafka.RequireAll, Transport: tr}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// TestModelFollowerPastALostRequest: a scorer's model follower (roles.go's follow goroutine:
// next, retried after a backoff) whose broker loses every request for lostWhile, then answers
// again, reads the model published after that within recoverWithin (before, at the topic's
// end, no read fails); its stop (the context's
// end) returns within attemptSlack, while the broker loses its requests too. Failed first
// (kafka-go's Reader): its re-dial's metadata request, lost, was bounded by nothing but the
// Reader's close, so the follower never read the new model (the scorer served the old one
// until a restart).
func TestModelFollowerPastALostRequest(t *testing.T) {
	br, lose := testsupport.LosingBroker(t, kfake.SeedTopics(1, "models"))
	cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
	publishTestModel(t, cfg, 1)
	f, err := newModelFollower(cfg, synth.SensorFeatures, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, done := make(chan uint64, 4), make(chan struct{})
	var failed atomic.Int64
	go func() { // (roles.go's follow goroutine)
		defer close(done)
		after := uint64(0)
		for {
			m, err := f.next(ctx, after, -1)
			if err != nil {
				t.Logf("follow: %v", err)
				failed.Add(1)
				if !backoff(ctx, 1) {
					return
				}
				continue
			}
			after = m.model.Version
			got <- after
		}
	}()
	waitVersion := func(v uint64, within time.Duration) {
		t.Helper()
		select {
		case g := <-got:
			if g != v {
				t.Fatalf("the follower read model %d, want %d", g, v)
			}
		case <-time.After(within):
			t.Fatalf("the follower did not read model %d within %v", v, within)
		}
	}
	waitVersion(1, 20*time.Second)
	// At the partition's end its fetches (long polls) end with nothing, kafka-go's RequestTimedOut:
	// no failure (roles.go logs each as a warning).
	time.Sleep(4 * followWait)
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d reads failed while the follower waited at the end of a broker that answers", n)
	}

	lose(true)
	time.Sleep(lostWhile)
	lose(false)
	publishTestModel(t, cfg, 2)
	t0 := time.Now()
	waitVersion(2, recoverWithin)
	t.Logf("model 2 read %v after it was published, the broker having lost every request for %v", time.Since(t0).Round(time.Millisecond), lostWhile)

	lose(true)
	time.Sleep(lostWhile / 2)
	t0 = time.Now()
	cancel()
	select {
	case <-done:
		t.Logf("the follower stopped %v after its context ended, the broker losing its requests", time.Since(t0).Round(time.Millisecond))
	case <-time.After(attemptSlack):
		t.Fatalf("the follower had not stopped %v after its context ended", attemptSlack)
	}
}

// TestKeyFollowerPastALostRequest: a scorer's follower of a keys' model partition
// (keyFollowers.follow) whose broker loses every request for lostWhile, then answers again,
// reads the key model written after that within recoverWithin; close (a stop) returns within
// attemptSlack while the broker loses its requests. Failed first (kafka-go's Reader): the
// follower never read the second message.
func TestKeyFollowerPastALostRequest(t *testing.T) {
	br, lose := testsupport.LosingBroker(t, kfake.SeedTopics(2, "models"))
	p, k := keyFollowersInTest(t, "models", br.Addrs)
	produceKeyModel(t, br, "models", 1)
	k.start(func(int) map[int][]int32 { return map[int][]int32{1: {0}} }, []int32{0}, nil)
	read := func(n int64, within time.Duration) {
		t.Helper()
		waitFor(t, within, "the key follower's read", func() bool { return p.stats.KeyModelsRead.Load() >= n })
	}
	read(1, 20*time.Second)

	lose(true)
	time.Sleep(lostWhile)
	lose(false)
	produceKeyModel(t, br, "models", 2)
	t0 := time.Now()
	read(2, recoverWithin)
	t.Logf("the key model read %v after it was written, the broker having lost every request for %v", time.Since(t0).Round(time.Millisecond), lostWhile)

	lose(true)
	time.Sleep(lostWhile / 2)
	t0 = time.Now()
	closed := make(chan struct{})
	go func() { k.close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("the key followers closed in %v, the broker losing their requests", time.Since(t0).Round(time.Millisecond))
	case <-time.After(attemptSlack):
		t.Fatalf("the key followers had not closed %v after close", attemptSlack)
	}
}

// TestModelFollowBackoffGrows: a broker that refuses connections fails each of the model
// follower's reads at once (kafka-go's Reader retried inside, 100 ms to 1 s apart, and
// reported each failure from its third); roles.go's follow loop backs off from retryMin,
// doubling with the reads failed in a row, so its attempts come at 0, 0.1, 0.3, 0.7, 1.5 s:
// at most 5 in 2 s (6 allowed: a timer late on a loaded machine moves an attempt, it adds
// none), counted by Stats.ModelTopicReadFailures (outlierd_model_topic_read_failures_total);
// one warning says them (failureRun: the first failure's, the next 30 s later). Failed first (a
// backoff of retryMin after each failure): about 20 attempts, each warned, in 2 s.
func TestModelFollowBackoffGrows(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	var logs testsupport.LogBuffer
	p := &Pipeline{log: zerolog.New(&logs), models: make(chan *followed, 1)}
	cfg := modelTopicConfig{brokers: []string{refused}, topic: "models", maxMessageBytes: 1 << 20}
	if p.follow, err = newModelFollower(cfg, synth.SensorFeatures, p.log); err != nil {
		t.Fatal(err)
	}
	defer p.follow.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.followModels(ctx, 0)
	attempts := p.stats.ModelTopicReadFailures.Load()
	t.Logf("%d failed reads in 2 s of a broker refusing connections", attempts)
	if attempts < 2 || attempts > 6 {
		t.Errorf("%d failed reads in 2 s of a broker refusing connections: want 2 to 6 (a backoff doubling from %v)", attempts, retryMin)
	}
	if warned := logs.Lines("model topic read failed; retrying"); len(warned) != 1 {
		t.Errorf("%d warnings in 2 s of a broker refusing connections, want 1 (the first failure's):\n%s", len(warned), logs.String())
	}
}

// TestModelFollowerFollowsAMovedLeader: the model topic's partition moves to another broker (a
// leader election) while a scorer's follower reads it: the old leader refuses the fetch (not
// leader for partition), the follower dials the new one and reads the model published after
// the move, as kafka-go's Reader did (its re-dial), within a retry: a backoff, a dial and a
// fetch (2 s: a loaded machine's dials take milliseconds; the slack of attemptSlack).
func TestModelFollowerFollowsAMovedLeader(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "models"))
	cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
	publishTestModel(t, cfg, 1)
	f, err := newModelFollower(cfg, synth.SensorFeatures, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // (after followInTest's own cleanup: the follower stops first)
	wait := followInTest(t, f, nil)
	wait(1, 20*time.Second)
	old := br.Kfake.LeaderFor("models", 0)
	if err := br.Kfake.MoveTopicPartition("models", 0, (old+1)%3); err != nil {
		t.Fatal(err)
	}
	publishTestModel(t, cfg, 2)
	t0 := time.Now()
	wait(2, 2*time.Second+attemptSlack)
	t.Logf("partition 0 moved from broker %d to %d: model 2 read %v after it was published", old, br.Kfake.LeaderFor("models", 0), time.Since(t0).Round(time.Millisecond))
}

// followInTest runs p.followModels over f until the test ends and returns wait(v, within): it
// fails the test unless model v comes within within; models of lower versions before it are
// passed over (a follower started below the topic's newest reads the older ones first), a
// higher one fails. log, when not nil, is shown with a timeout (the follower's lines).
func followInTest(t *testing.T, f *modelFollower, log *testsupport.LogBuffer) (wait func(v uint64, within time.Duration)) {
	t.Helper()
	p := &Pipeline{log: zerolog.New(zerolog.NewTestWriter(t)), models: make(chan *followed, 1), follow: f}
	if log != nil {
		p.log = zerolog.New(log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.followModels(ctx, 0) }()
	t.Cleanup(func() { cancel(); <-done })
	return func(v uint64, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case m := <-p.models:
				if m.model.Version == v {
					return
				}
				if m.model.Version > v {
					t.Fatalf("the follower read model %d, want %d", m.model.Version, v)
				}
			case <-deadline:
				shown := ""
				if log != nil {
					shown = "; the log:\n" + log.String()
				}
				t.Fatalf("the follower did not read model %d within %v (its offset %d)%s", v, within, f.r.Offset(), shown)
			}
		}
	}
}

// keyFollowersInTest is a scorer's keys' followers of the model topic on brokers, the
// scorer assigned input partition 0 (generation 1), with the pipeline they report to.
func keyFollowersInTest(t *testing.T, topic string, brokers []string) (*Pipeline, *keyFollowers) {
	t.Helper()
	var cfg Config
	cfg.Run.ModelTopic, cfg.Sink.Brokers, cfg.Sink.MaxMessageBytes = topic, brokers, 1<<20
	p := &Pipeline{cfg: cfg, log: zerolog.New(zerolog.NewTestWriter(t)), keys: newKeyInbox(), scope: newKeyScope()}
	p.scope.set(ingest.Assignment{Generation: 1, Partitions: []int32{0}})
	k, err := p.newKeyFollowers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p, k
}
