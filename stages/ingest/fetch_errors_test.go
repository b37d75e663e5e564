package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestSourceFetchErrorNamesPartitionAndOffset (kfake): an error the broker answers a partition's
// fetch with reaches Next naming the topic, the partition and the offset it was fetched at, as
// the project's errors do (topic/partition/offset). Before, it said only the topic: "ingest:
// fetch from in: [56] Kafka Storage Error: ...", not which of the partitions, nor where.
func TestSourceFetchErrorNamesPartitionAndOffset(t *testing.T) {
	env := kfakeEnv(t)
	const n = 5
	produce(t, env, makeMessages(0, 0, n, false))
	var refused atomic.Int64
	c := env.br.Kfake
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 0 && rp.FetchOffset >= n { // partition 0 once its records were read
					refused.Add(1)
					return testsupport.FailFetch(req, kerr.KafkaStorageError), nil, true
				}
			}
		}
		return nil, nil, false
	})
	cfg := itConfig(env, fmt.Sprintf("g-fetcherr-%d", time.Now().UnixNano()))
	src := openSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for {
		b, _, err := src.Next(ctx)
		if b != nil {
			got += b.Len()
			b.Release()
		}
		if err == nil {
			continue
		}
		if refused.Load() == 0 {
			t.Fatalf("Next after %d records: %v (no fetch refused yet)", got, err)
		}
		want := fmt.Sprintf("ingest: fetch from %s: partition 0 at offset %d: ", env.topic, n)
		if got != n || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("after %d records (want %d): %q, want it to start %q", got, n, err, want)
		}
		return
	}
}

// TestSourceFetchErrorNotLostAtBatchWindow (kfake): a fetch error that is ready when a batch's
// window (max_wait) has also run out is reported on the next call, not dropped: Next's fetch
// picks either at random, and it took any error met with the window closed for the window's
// own. With max_wait 1 ns the window is closed as soon as it opens, so each round offers both.
func TestSourceFetchErrorNotLostAtBatchWindow(t *testing.T) {
	env := kfakeEnv(t)
	cfg := itConfig(env, fmt.Sprintf("g-errwindow-%d", time.Now().UnixNano()))
	cfg.MaxWait = time.Nanosecond
	src := openSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := src.fetch.current(ctx); err != nil { // joined: a generation is live
		t.Fatal(err)
	}
	gen := src.fetch.live.Load()
	refusal := errors.New("the broker refused the fetch")
	for round := range 20 { // both ready each round: the error lost half the time before
		msg := kafka.Message{Topic: env.topic, Partition: 0, Offset: int64(round), Value: []byte(`{"temp":1.5,"sensor":{"hum":2}}`)}
		src.fetch.chunks <- decodedChunk(t, cfg, gen, msg)
		src.fetch.chunks <- chunk{gen: gen, err: refusal}
		b, dls, err := src.Next(ctx)
		if err != nil || b == nil || b.Len() != 1 || dls.Len() != 0 {
			t.Fatalf("round %d: Next: batch %v, %d dead letters, err %v; want the record", round, b, dls.Len(), err)
		}
		b.Release()
		short, stop := context.WithTimeout(ctx, time.Second)
		_, _, err = src.Next(short)
		stop()
		if !errors.Is(err, refusal) {
			t.Fatalf("round %d: the next call returned %v, want the fetch error met with the window closed", round, err)
		}
	}
}
