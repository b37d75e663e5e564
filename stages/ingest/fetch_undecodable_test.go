package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// undecodableBatch is a record batch of records [first, first+n) whose attributes name
// compression codec 5, which does not exist (Kafka's are 1-4): what a producer's newer codec or
// a corrupt batch header looks like to kafka-go (the CRC is not checked on the client).
func undecodableBatch(first int64, n int32) []byte {
	rb := kmsg.NewRecordBatch()
	rb.FirstOffset, rb.Magic, rb.Attributes = first, 2, 5
	rb.LastOffsetDelta, rb.NumRecords = n-1, n
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = -1, -1, -1
	rb.Records = []byte("compressed with a codec no client knows")
	rb.Length = int32(len(rb.AppendTo(nil)) - 12) // what follows FirstOffset and Length
	return rb.AppendTo(nil)
}

// TestFetchUndecodableBatchIsReported (kfake): a partition whose records cannot be decoded (the
// broker's fetch answer holds a record batch of an unknown compression codec) is reported to
// Next with the partition, the offset and the cause, after a few tries on new connections,
// each logged; the records are not skipped. Before, the partition goroutine reconnected and
// read it again every 100 ms forever: the partition stalled and nothing reached Next.
func TestFetchUndecodableBatchIsReported(t *testing.T) {
	env := kfakeEnv(t)
	const n = 3
	produce(t, env, makeMessages(0, 0, n, false)) // the offsets the partition lists
	c := env.br.Kfake
	var mu sync.Mutex
	fetches := 0
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].FetchOffset >= n {
			return nil, nil, false
		}
		mu.Lock()
		fetches++
		mu.Unlock()
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := req.Topics[0]
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = rt.Partitions[0].Partition
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = n, n, 0
		sp.RecordBatches = undecodableBatch(0, n)
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	f, errs := testFetcher(env, 16, 1<<20, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.fetchPartition(fctx, 1, 0, kafka.FirstOffset)
	}()
	defer func() { stop(); <-done }()
	select {
	case ch := <-f.chunks:
		want := "partition 0 at offset 0: its record batch cannot be decoded: the compression code is invalid"
		if ch.err == nil || !errors.Is(ch.err, ErrUndecodable) || !strings.HasPrefix(ch.err.Error(), want) {
			t.Fatalf("chunk of %d messages, err %v; want an error starting %q", len(ch.msgs), ch.err, want)
		}
	case <-time.After(10 * time.Second): // the tries take about 0.5 s of back-off
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("nothing reported in 10 s (%d fetches of the undecodable batch)", fetches)
	}
	logged := errs.all()
	want := fmt.Sprintf("fetching partition 0 of %s at offset 0: its record batch cannot be decoded: ", env.topic)
	if len(logged) < readMaxAttempts-1 || !strings.HasPrefix(logged[0], want) {
		t.Errorf("logged %q, want %d lines starting %q", logged, readMaxAttempts-1, want)
	}
}
