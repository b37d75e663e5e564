package pipeline

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// attemptSlack is what an attempt ended by brokerAttemptWait may take beyond it: a dial to the
// loopback and a timer's wake-up take milliseconds; 3 s covers a 2-core machine under make
// test's parallel packages (the detect loop once took over 10 s to answer there, but that is
// a goroutine's turn at a busy stage, not a timer's).
const attemptSlack = 3 * time.Second

// modelTopicReads are the model topic's reads of a start, an assignment or a restore that ask a
// broker (each returns a short description of what it read).
func modelTopicReads(t *testing.T) map[string]func(context.Context, modelTopicConfig) (string, error) {
	return map[string]func(context.Context, modelTopicConfig) (string, error){
		"partitions": func(ctx context.Context, cfg modelTopicConfig) (string, error) {
			m, err := modelTopicPartitions(ctx, cfg, kafka.DefaultDialer)
			return strconv.Itoa(m), err
		},
		"offsets": func(ctx context.Context, cfg modelTopicConfig) (string, error) {
			first, end, err := partitionOffsets(ctx, cfg, kafka.DefaultDialer, 1)
			return strconv.FormatInt(first, 10) + ".." + strconv.FormatInt(end, 10), err
		},
		"follower offsets": func(ctx context.Context, cfg modelTopicConfig) (string, error) {
			f, err := newModelFollower(cfg, []string{"value"}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			first, end, err := f.offsets(ctx)
			return strconv.FormatInt(first, 10) + ".." + strconv.FormatInt(end, 10), err
		},
		"last key version": func(ctx context.Context, cfg modelTopicConfig) (string, error) {
			v, err := lastKeyVersion(ctx, cfg, kafka.DefaultDialer, 1)
			return strconv.FormatUint(v, 10), err
		},
	}
}

// TestModelTopicReadsBoundedBySilentBroker: the model topic's reads asked a broker with no bound
// but the caller's context. A broker that took the request and never answered held a scorer's
// start ~48 s in modelTopicPartitions (TestKeyRestoreReadsItsPartitionsRealBroker, 2 of 6 make
// test runs), and a retry would have answered at once. Each exchange is bounded by
// brokerAttemptWait: the read fails then, naming the broker, and its caller's retry (or the
// next broker) goes on. Failed first: each read returned only at the caller's 20 s deadline.
func TestModelTopicReadsBoundedBySilentBroker(t *testing.T) {
	cfg := modelTopicConfig{brokers: []string{testsupport.SilentBroker(t)}, topic: "models", maxMessageBytes: 1 << 20}
	for name, read := range modelTopicReads(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err, took, ctxErr := timedRead(read, cfg)
			t.Logf("%s: %v after %v", got, err, took.Round(time.Millisecond))
			if err == nil || ctxErr != nil || took > brokerAttemptWait+attemptSlack {
				t.Fatalf("read from a broker that never answers: %v after %v (the caller's context: %v): want a failure within %v",
					err, took.Round(time.Millisecond), ctxErr, brokerAttemptWait+attemptSlack)
			}
			if !strings.Contains(err.Error(), cfg.brokers[0]) || !strings.Contains(err.Error(), "no answer within") {
				t.Errorf("error %q: want it to name the broker %s and say it did not answer", err, cfg.brokers[0])
			}
		})
	}
}

// TestModelTopicReadsPastASilentBroker: with a broker that never answers first in the list, the
// model topic's reads get their answer from the next one within brokerAttemptWait.
func TestModelTopicReadsPastASilentBroker(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		mt := testsupport.UniqueName("silent-models")
		createCompactedTopic(t, br, mt, 3)
		produceKeyModel(t, br, mt, 9)
		cfg := modelTopicConfig{brokers: append([]string{testsupport.SilentBroker(t)}, br.Addrs...), topic: mt, maxMessageBytes: 1 << 20}
		want := map[string]string{"partitions": "3", "offsets": "0..1", "follower offsets": "0..0", "last key version": "9"}
		for name, read := range modelTopicReads(t) {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				got, err, took, _ := timedRead(read, cfg)
				if err != nil || got != want[name] || took > brokerAttemptWait+attemptSlack {
					t.Fatalf("read past a broker that never answers: %s, %v after %v: want %s within %v",
						got, err, took.Round(time.Millisecond), want[name], brokerAttemptWait+attemptSlack)
				}
			})
		}
	})
}

// TestModelTopicReadsBoundedByASilentLeader: a leader that answers the metadata request and
// then never answers the partition's offsets (ListOffsets) or a fetch of its tail: each
// request on the leader's connection is bounded by brokerAttemptWait too. Failed first: each
// read returned only at the caller's 20 s deadline.
func TestModelTopicReadsBoundedByASilentLeader(t *testing.T) {
	for _, held := range []kmsg.Key{kmsg.ListOffsets, kmsg.Fetch} {
		t.Run(held.Name(), func(t *testing.T) {
			br := testsupport.KfakeBroker(t, kfake.SeedTopics(2, "models"))
			produceKeyModel(t, br, "models", 9)
			wake := make(chan struct{})
			t.Cleanup(func() { close(wake) }) // (before the cluster's close: cleanups run last first)
			br.Kfake.ControlKey(int16(held), func(kmsg.Request) (kmsg.Response, error, bool) {
				br.Kfake.KeepControl()
				br.Kfake.SleepControl(func() { <-wake })
				return nil, nil, false
			})
			cfg := modelTopicConfig{brokers: br.Addrs, topic: "models", maxMessageBytes: 1 << 20}
			reads := modelTopicReads(t)
			delete(reads, "partitions") // (metadata alone: answered)
			if held == kmsg.Fetch {
				reads = map[string]func(context.Context, modelTopicConfig) (string, error){"last key version": reads["last key version"]}
			}
			for name, read := range reads {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					got, err, took, ctxErr := timedRead(read, cfg)
					t.Logf("%s: %v after %v", got, err, took.Round(time.Millisecond))
					if err == nil || ctxErr != nil || took > brokerAttemptWait+attemptSlack {
						t.Fatalf("read from a leader that never answers %s: %v after %v (the caller's context: %v): want a failure within %v",
							held.Name(), err, took.Round(time.Millisecond), ctxErr, brokerAttemptWait+attemptSlack)
					}
				})
			}
		})
	}
}

// timedRead runs read under a caller's context of 4 brokerAttemptWait: its answer, how long it
// took and the caller's context's error when it returned (nil: the bound, not the caller, ended
// a failed read).
func timedRead(read func(context.Context, modelTopicConfig) (string, error), cfg modelTopicConfig) (got string, err error, took time.Duration, ctxErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*brokerAttemptWait)
	defer cancel()
	t0 := time.Now()
	got, err = read(ctx, cfg)
	return got, err, time.Since(t0), ctx.Err()
}

// produceKeyModel writes a key model message of version v to topic's partition 1.
func produceKeyModel(t *testing.T, br testsupport.Broker, topic string, v int) {
	t.Helper()
	tr := &kafka.Transport{} // (its own metadata: publishTestModel says why)
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: topic, Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 1 }),
		BatchSize: 1, RequiredAcks: kafka.RequireAll, Transport: tr} // (at once, not after a batch's second; acknowledged: a write to a leader that moved is retried, not lost)
	defer w.Close()
	err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte(keyModelPrefix + "k"), Value: []byte("m"),
		Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: []byte(strconv.Itoa(v))}}})
	if err != nil {
		t.Fatal(err)
	}
}
