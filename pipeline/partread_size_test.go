package pipeline

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestPartitionReaderMessageOverMaxBytes: a message larger than a fetch's MaxBytes (a builder
// whose sink.max_message_bytes is above the scorer's: the scorer asks 2x its own) is read
// whole, not cut, refused or waited on for ever: kafka-go's Conn fetches with version 10 (or 5),
// and a broker answers a fetch's first batch whole whatever MaxBytes says (KIP-74). The
// message is 3 MiB (the topic's max.message.bytes and segment.bytes above it); the reader asks
// 2 MiB (max(max_message_bytes, 1 MiB) x 2).
func TestPartitionReaderMessageOverMaxBytes(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		topic := testsupport.UniqueName("overmax")
		testsupport.CreateTopicConfigs(t, br, kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: "8388608"}, {ConfigName: "segment.bytes", ConfigValue: "16777216"}}})
		big := bytes.Repeat([]byte{'x'}, 3<<20)
		w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: topic, Balancer: toPartition0, BatchSize: 1, BatchBytes: 8 << 20, RequiredAcks: kafka.RequireAll}
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("big"), Value: big}, kafka.Message{Key: []byte("small"), Value: []byte("s")}); err != nil {
			t.Fatal(err)
		}
		cfg := modelTopicConfig{brokers: br.Addrs, topic: topic, maxMessageBytes: 512 << 10}
		r := newPartitionReader(cfg, kafka.DefaultDialer, 0, kafka.FirstOffset, zerolog.New(zerolog.NewTestWriter(t)))
		defer r.Close()
		for i, want := range []int{len(big), 1} {
			m, err := r.ReadMessage(ctx)
			if err != nil || m.Offset != int64(i) || len(m.Value) != want {
				t.Fatalf("read %d: offset %d, %d bytes, %v; want offset %d, %d bytes", i, m.Offset, len(m.Value), err, i, want)
			}
		}
	})
}
