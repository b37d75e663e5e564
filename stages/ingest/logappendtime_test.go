package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestSourceLogAppendTimeReadsProducerTime pins a limit that docs/OPERATIONS.md states (no
// defect of outlierd's code, one of kafka-go v0.4.51's): on a topic of message.timestamp.type
// LogAppendTime the broker writes its append time as the batch's max timestamp and flags the
// batch so, leaving each record's own (the producer's CreateTime) in place; Kafka's clients
// read the append time then, kafka-go's reader (readMessageV2: first timestamp + delta) the
// producer's. A record's time without ingest.event_time_field, and the time the epoch-seconds
// check compares with, is thus the producer's clock there too. A kafka-go that reads the
// append time fails this test: the docs' sentence then goes. Real broker only (kfake has no
// LogAppendTime).
func TestSourceLogAppendTimeReadsProducerTime(t *testing.T) {
	br := testsupport.RealBroker(t)
	env := kafkaEnv{br: br, topic: testsupport.UniqueName("logappend")}
	testsupport.CreateTopicConfigs(t, br, kafka.TopicConfig{Topic: env.topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "LogAppendTime"}}})
	created := time.Now().Add(-365 * 24 * time.Hour).Truncate(time.Millisecond) // a producer's clock a year off
	testsupport.Produce(t, br, &kgo.Record{Topic: env.topic, Partition: 0, Timestamp: created, Value: []byte(`{"temp":1,"sensor":{"hum":1}}`)})
	// (franz-go reads the append time: the topic is LogAppendTime indeed)
	if got := testsupport.ReadTopic(t, br, env.topic, 1)[0].Timestamp; got.Sub(created) < 300*24*time.Hour {
		t.Fatalf("franz-go reads %v, the producer's %v: the topic's timestamps are not the broker's", got, created)
	}
	src := openSource(t, itConfig(env, testsupport.UniqueName("g-logappend")))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		b, _, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil || b.Len() == 0 {
			continue
		}
		at, ok := b.Time(0)
		b.Release()
		if !ok || !at.Equal(created) {
			t.Errorf("the source's time %v (%v), want the producer's %v, as docs/OPERATIONS.md says (kafka-go reads the append time now? then the docs change)", at, ok, created)
		}
		return
	}
}
