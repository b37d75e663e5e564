package testsupport

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NewProducer returns a franz-go client that produces to each record's own Partition with
// acks=all; close it when done. Records produced with ProduceSync come back with their offsets.
func NewProducer(tb testing.TB, br Broker) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(100_000),
		kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		tb.Fatalf("kgo producer: %v", err)
	}
	return cl
}

// Produce writes recs (each to its Topic and Partition) synchronously, failing the test on an
// error; afterwards each record holds its offset.
func Produce(tb testing.TB, br Broker, recs ...*kgo.Record) {
	tb.Helper()
	cl := NewProducer(tb, br)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tb.Fatalf("produce %d records: %v", len(recs), err)
	}
}

// ReadTopic reads every message of topic from the start up to its end offsets (taken now).
func ReadTopic(tb testing.TB, br Broker, topic string, parts int) []*kgo.Record {
	tb.Helper()
	var out []*kgo.Record
	ScanTopic(tb, br, topic, parts, func(r *kgo.Record) { out = append(out, r) })
	return out
}

// ScanTopic calls fn, in offset order per partition, with every message of topic from the
// start up to its end offsets (taken now), read with franz-go's consumer; it returns how many.
func ScanTopic(tb testing.TB, br Broker, topic string, parts int, fn func(*kgo.Record)) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	end, err := EndOffsets(ctx, br, topic, parts)
	if err != nil {
		tb.Fatal(err)
	}
	want := map[int32]kgo.Offset{}
	total := int64(0)
	for p, e := range end {
		if e > 0 {
			want[int32(p)] = kgo.NewOffset().AtStart()
			total += e
		}
	}
	if total == 0 {
		return 0
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxBytes(32<<20), kgo.FetchMaxPartitionBytes(16<<20))
	if err != nil {
		tb.Fatalf("kgo consumer: %v", err)
	}
	defer cl.Close()
	next := make([]int64, parts) // next offset expected per partition
	remaining, n := len(want), 0
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("reading %s: got %d of %d messages before the timeout", topic, n, total)
		}
		fs.EachError(func(tp string, p int32, err error) { tb.Logf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end[r.Partition] || r.Offset < next[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			n++
			fn(r)
			if r.Offset == end[r.Partition]-1 {
				remaining--
			}
		})
	}
	return n
}

// ConsumeExactly reads exactly n records of topic (from the start), failing on a 20 s timeout,
// then checks for 300 ms that no further record arrives (a duplicate write would).
func ConsumeExactly(tb testing.TB, br Broker, topic string, n int) []*kgo.Record {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		tb.Fatalf("kgo client: %v", err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("topic %s: got %d records, want %d", topic, len(recs), n)
		}
		fs.EachError(func(tp string, p int32, err error) { tb.Logf("fetch %s/%d: %v", tp, p, err) })
		recs = append(recs, fs.Records()...)
	}
	extra, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	recs = append(recs, cl.PollFetches(extra).Records()...)
	if len(recs) != n {
		tb.Fatalf("topic %s: got %d records, want exactly %d", topic, len(recs), n)
	}
	return recs
}

// Header returns the value of header k of r.
func Header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

// FailProduce is the answer of a kfake control function that refuses a produce request: every
// partition of every topic in req fails with code (e.g. kerr.NotEnoughReplicas, retriable).
func FailProduce(req *kmsg.ProduceRequest, code *kerr.Error) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// FailFetch is the answer of a kfake control function that refuses a fetch request: every
// partition of every topic in req fails with code (e.g. kerr.KafkaStorageError, retriable).
func FailFetch(req *kmsg.FetchRequest, code *kerr.Error) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code.Code
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// DeleteRecordsBelow makes offset the log start of topic's partition (DeleteRecords), as
// retention or an operator does.
func DeleteRecordsBelow(tb testing.TB, br Broker, topic string, partition int32, offset int64) {
	tb.Helper()
	cl := NewProducer(tb, br)
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		tb.Fatal(err)
	}
	if code := res.Topics[0].Partitions[0].ErrorCode; code != 0 {
		tb.Fatalf("DeleteRecords of %s/%d below %d: error code %d", topic, partition, offset, code)
	}
}
