package ingest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
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
	src, err := NewSource(cfg, checkpoint.New(), memory.NewGoAllocator(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
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
