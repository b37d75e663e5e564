package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// row is one record of a test batch.
type row struct {
	part    int32
	off     int64
	key     []byte // nil = null key
	ts      time.Time
	feats   []float32
	sds     []float32 // used when the batch has uncertainty columns
	payload []byte
	score   batch.Score
}

// newBatch builds a batch following the batch contract. withSD adds "<feature>_sd" columns;
// scored=false leaves Scores nil (a batch before the first model).
func newBatch(t testing.TB, mem memory.Allocator, topic string, features []string, withSD, scored bool, rows []row) *batch.Batch {
	t.Helper()
	rb := array.NewRecordBuilder(mem, batch.Schema(features, withSD))
	defer rb.Release()
	var payloads [][]byte
	var scores []batch.Score
	d := len(features)
	for _, r := range rows {
		for j := 0; j < d; j++ {
			rb.Field(j).(*array.Float32Builder).Append(r.feats[j])
		}
		col := d
		if withSD {
			for j := 0; j < d; j++ {
				rb.Field(col + j).(*array.Float32Builder).Append(r.sds[j])
			}
			col += d
		}
		rb.Field(col).(*array.Int32Builder).Append(r.part)
		rb.Field(col + 1).(*array.Int64Builder).Append(r.off)
		if r.key == nil {
			rb.Field(col + 2).(*array.BinaryBuilder).AppendNull()
		} else {
			rb.Field(col + 2).(*array.BinaryBuilder).Append(r.key)
		}
		rb.Field(col + 3).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts.UnixMilli()))
		payloads = append(payloads, r.payload)
		if scored {
			scores = append(scores, r.score)
		}
	}
	b, err := batch.New(topic, features, rb.NewRecord(), payloads)
	if err != nil {
		t.Fatal(err)
	}
	b.Scores = scores
	return b
}

// broker is a Kafka to run a test against.
type broker struct {
	name  string
	addrs []string
	kfake *kfake.Cluster // nil for the real broker
}

// topicSeq makes topic names unique within a run, so that tests against a shared real broker
// never read each other's messages.
var topicSeq atomic.Int64

// uniqueTopic returns a fresh topic name.
func uniqueTopic(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), topicSeq.Add(1))
}

// forEachBroker runs f against an in-process kfake cluster and, when KAFKA_BOOTSTRAP is set,
// against the real broker there (skipped with a message otherwise).
func forEachBroker(t *testing.T, f func(t *testing.T, br broker)) {
	t.Run("kfake", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatalf("kfake: %v", err)
		}
		t.Cleanup(c.Close)
		f(t, broker{name: "kfake", addrs: c.ListenAddrs(), kfake: c})
	})
	t.Run("kafka", func(t *testing.T) {
		bs := os.Getenv("KAFKA_BOOTSTRAP")
		if bs == "" {
			t.Skip("KAFKA_BOOTSTRAP not set: skipping the real-broker run (.ci/kafka.sh starts one)")
		}
		f(t, broker{name: "kafka", addrs: strings.Split(bs, ",")})
	})
}

// createTopics creates topics with the given partition count and waits until every partition
// has a leader, so that the first write does not race topic creation.
func createTopics(t testing.TB, br broker, partitions int, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(br.addrs...), Timeout: 10 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, tp := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: tp, NumPartitions: partitions, ReplicationFactor: 1})
	}
	resp, err := cl.CreateTopics(ctx, req)
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
	for tp, err := range resp.Errors {
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			t.Fatalf("create topic %s: %v", tp, err)
		}
	}
	for {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		ready := err == nil && len(md.Topics) == len(topics)
		if ready {
			for _, tp := range md.Topics {
				if tp.Error != nil || len(tp.Partitions) != partitions {
					ready = false
				}
				for _, p := range tp.Partitions {
					if p.Leader.Host == "" {
						ready = false
					}
				}
			}
		}
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topics %v not ready: %v", topics, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// consume reads exactly n records from topic (from the start), failing on a timeout, then
// checks for 300 ms that no further record arrives. It uses franz-go's client, independent of
// the kafka-go writer under test.
func consume(t testing.TB, br broker, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("topic %s: got %d records, want %d", topic, len(recs), n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v", tp, p, err) })
		recs = append(recs, fs.Records()...)
	}
	extra, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	recs = append(recs, cl.PollFetches(extra).Records()...)
	if len(recs) != n {
		t.Fatalf("topic %s: got %d records, want exactly %d", topic, len(recs), n)
	}
	return recs
}

// header returns the value of header k of r.
func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

// testConfig returns a valid sink config for br with fresh topics (created, 3 partitions).
func testConfig(t testing.TB, br broker) Config {
	t.Helper()
	cfg := Default()
	cfg.Brokers = br.addrs
	cfg.Topic = uniqueTopic("out")
	cfg.DeadLetterTopic = uniqueTopic("dlq")
	createTopics(t, br, 3, cfg.Topic, cfg.DeadLetterTopic)
	return cfg
}
