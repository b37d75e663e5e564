package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// recreateTopic deletes topic and creates it again with parts partitions (an operator's
// "delete the model topic and start again"): its offsets start at 0 again. The real broker
// deletes a topic asynchronously: its creation is retried while it says the topic still exists.
func recreateTopic(t *testing.T, br testsupport.Broker, topic string, parts int) {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dres, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
	if err := dres.Errors[topic]; err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
	for {
		cres, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: parts, ReplicationFactor: 1}}})
		if err == nil {
			err = cres.Errors[topic]
		}
		if err == nil {
			return
		}
		if !errors.Is(err, kafka.TopicAlreadyExists) || ctx.Err() != nil {
			t.Fatalf("create topic %s again: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// recreatedWithin bounds how long a follower takes to read what a recreated topic holds once
// it is written: the follower's backoff while the topic was gone (at most retryMax), the
// partition's end seen below its offset for pastEndWait, then a dial and a fetch from the
// first offset; attemptSlack covers a loaded machine.
const recreatedWithin = retryMax + pastEndWait + 2*followWait + attemptSlack

// TestModelFollowerReadsARecreatedTopic: the model topic deleted and created again while a
// scorer follows it (its offsets start at 0 again, its end below the follower's offset): the
// follower reads the model published on the new topic (a builder's next, numbered above the
// old ones by its clock) within recreatedWithin, with a warning. Failed first: each fetch was
// refused with OffsetOutOfRange and outOfRange's offsets request failed on the connection the
// refusal left (TestPartitionReaderPastRetention): a warning every backoff, model 3 never read;
// and past that, outOfRange took the end below the offset for a leader's end lagging and
// waited for it to reach the offset, for ever (as kafka-go's Reader did, with no line logged):
// the scorer served its old model until a restart.
func TestModelFollowerReadsARecreatedTopic(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		topic := testsupport.UniqueName("recreated")
		testsupport.CreateTopics(t, br, map[string]int{topic: 1})
		cfg := modelTopicConfig{brokers: br.Addrs, topic: topic, maxMessageBytes: 1 << 20}
		publishTestModel(t, cfg, 1)
		publishTestModel(t, cfg, 2)
		var logs testsupport.LogBuffer
		f, err := newModelFollower(cfg, synth.SensorFeatures, zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // (after followInTest's own cleanup: the follower stops first)
		wait := followInTest(t, f, &logs)
		wait(2, 20*time.Second)
		before := f.r.Offset()
		recreateTopic(t, br, topic, 1)
		publishTestModel(t, cfg, 3)
		t0 := time.Now()
		wait(3, recreatedWithin)
		t.Logf("model 3 read %v after it was published on the recreated topic (the follower was at offset %d)", time.Since(t0).Round(time.Millisecond), before)
		if lines := logs.Lines("the partition's end is below the offset read"); len(lines) == 0 {
			t.Errorf("no warning of the partition's end below the offset read; the log:\n%s", logs.String())
		}
	})
}

// TestKeyFollowerReadsARecreatedTopic: the same for a scorer's follower of a keys' model
// partition (keyFollowers.follow): the key model written on the recreated topic is read within
// recreatedWithin. Failed first as TestModelFollowerReadsARecreatedTopic did.
func TestKeyFollowerReadsARecreatedTopic(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		topic := testsupport.UniqueName("recreatedkeys")
		testsupport.CreateTopics(t, br, map[string]int{topic: 2})
		p, k := keyFollowersInTest(t, topic, br.Addrs)
		defer k.close()
		for v := 1; v <= 3; v++ {
			produceKeyModel(t, br, topic, v)
		}
		k.start(func(int) map[int][]int32 { return map[int][]int32{1: {0}} }, []int32{0}, nil)
		waitFor(t, 20*time.Second, "the key follower's read of 3 key models", func() bool { return p.stats.KeyModelsRead.Load() >= 3 })
		recreateTopic(t, br, topic, 2)
		produceKeyModel(t, br, topic, 4)
		t0 := time.Now()
		waitFor(t, recreatedWithin, "the key follower's read of the key model on the recreated topic", func() bool { return p.stats.KeyModelsRead.Load() >= 4 })
		t.Logf("the key model read %v after it was written on the recreated topic", time.Since(t0).Round(time.Millisecond))
	})
}

// writePlain writes n messages (key "k", value "m") to partition 0 of topic.
func writePlain(t *testing.T, br testsupport.Broker, topic string, n int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: topic, Balancer: toPartition0, BatchSize: 1, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range n {
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPartitionReaderPastRetention: retention (DeleteRecords here) moves the partition's first
// offset above a reader's while it is connected: its next read is the partition's first
// message, with no failure. Failed first: the fetch's OffsetOutOfRange left the rest of its
// answer unread on the connection (kafka-go's Conn stops reading a fetch's answer at a
// partition's error code), so outOfRange's offsets request read it as its own answer and
// failed ("multiple Read calls return no data or error", io.ErrNoProgress): a failed read, a
// warning and a backoff for a move kafka-go's Reader made silently.
func TestPartitionReaderPastRetention(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		topic := testsupport.UniqueName("retention")
		testsupport.CreateTopics(t, br, map[string]int{topic: 1})
		cfg := modelTopicConfig{brokers: br.Addrs, topic: topic, maxMessageBytes: 1 << 20}
		writePlain(t, br, topic, 1)
		r := newPartitionReader(cfg, kafka.DefaultDialer, 0, kafka.FirstOffset, zerolog.New(zerolog.NewTestWriter(t)))
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m, err := r.ReadMessage(ctx)
		if err != nil || m.Offset != 0 {
			t.Fatalf("the first read: offset %d, %v; want offset 0", m.Offset, err)
		}
		writePlain(t, br, topic, 3)
		testsupport.DeleteRecordsBelow(t, br, topic, 0, 3)
		m, err = r.ReadMessage(ctx)
		if err != nil || m.Offset != 3 {
			t.Fatalf("the read after the partition's first moved to 3: offset %d, %v; want offset 3 and no error", m.Offset, err)
		}
	})
}

// TestFollowersRedialPastASilentFirstBroker: sink.brokers' first broker takes connections and
// never answers (a host blackholed); the others are a cluster of 3. The model follower's first
// dial costs brokerAttemptWait there; once it has read from the cluster, a re-dial (its
// partition's leader moved: the old one refuses the fetch) starts at the broker that answered
// last, and what is written after the move is read within brokerAttemptWait of the move (a
// backoff, a dial, a fetch and the test's write: under a second here). The keys' followers
// start after the scorer's start has read the model topic (startRole): their first attempt
// (the topic's partition count, the partition's offsets, the dial) starts at the broker the
// model follower learnt, and their first key model is read within brokerAttemptWait of their
// start. Failed first: each re-dial began at the silent broker, 5 s, and a keys' follower's
// retry asked the partition's offsets first, through the silent broker too: 10 s; then
// (tail29) the keys' followers' first attempt began at the silent broker three times (the
// partition count, the offsets, the dial): 15 s.
func TestFollowersRedialPastASilentFirstBroker(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "models"))
	brokers := append([]string{testsupport.SilentBroker(t)}, br.Addrs...)
	move := func(mp int32) {
		t.Helper()
		old := br.Kfake.LeaderFor("models", mp)
		if err := br.Kfake.MoveTopicPartition("models", mp, (old+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("model", func(t *testing.T) {
		cfg := modelTopicConfig{brokers: brokers, topic: "models", maxMessageBytes: 1 << 20}
		pub := cfg
		pub.brokers = br.Addrs // (the test's writer: the silent broker is the followers')
		publishTestModel(t, pub, 1)
		f, err := newModelFollower(cfg, synth.SensorFeatures, zerolog.New(zerolog.NewTestWriter(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // (after followInTest's own cleanup: the follower stops first)
		wait := followInTest(t, f, nil)
		wait(1, 20*time.Second)
		t0 := time.Now()
		move(0)
		publishTestModel(t, pub, 2)
		wait(2, brokerAttemptWait-time.Since(t0))
		t.Logf("model 2 read %v after the partition's leader moved, the first broker silent", time.Since(t0).Round(time.Millisecond))
	})
	t.Run("keys", func(t *testing.T) {
		p, k := keyFollowersInTest(t, "models", brokers)
		defer k.close()
		produceKeyModel(t, br, "models", 1)
		// The scorer's start reads the model topic (readModelTopic) before the keys' followers start.
		var err error
		if p.follow, err = newModelFollower(p.cfg.modelTopic(), synth.SensorFeatures, p.log); err != nil {
			t.Fatal(err)
		}
		defer p.follow.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.follow.newest(ctx); err != nil {
			t.Fatalf("the model follower's read of the topic: %v", err)
		}
		t0 := time.Now()
		k.start(func(int) map[int][]int32 { return map[int][]int32{1: {0}} }, []int32{0}, nil)
		waitFor(t, brokerAttemptWait, "the key follower's first read", func() bool { return p.stats.KeyModelsRead.Load() >= 1 })
		t.Logf("the first key model read %v after the keys' followers started, the first broker silent", time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		move(1)
		produceKeyModel(t, br, "models", 2)
		waitFor(t, brokerAttemptWait-time.Since(t0), "the key follower's read after its leader moved", func() bool { return p.stats.KeyModelsRead.Load() >= 2 })
		t.Logf("the key model read %v after the partition's leader moved, the first broker silent", time.Since(t0).Round(time.Millisecond))
	})
}
