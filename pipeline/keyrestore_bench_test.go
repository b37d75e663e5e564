package pipeline

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// BenchmarkKeyRestore: what a scorer's restore of one input partition's keys' models costs (a
// rebalance moving that partition in), against the real broker: OUTLIERD_BENCH_KEYS (default
// 100,000) keys on 6 input partitions, each key's model one message on the model topic (3
// features, the default keys' settings: about 10 KB a key). Reported: the key model messages
// read, the keys restored, and the time until every one of them was read and decoded, with one
// decoding goroutine and with as many as CPUs (the scorer's).
//
//	KAFKA_PORT=39592 .ci/with-kafka.sh go test ./pipeline -run '^$' -bench KeyRestore -benchtime 3x
func BenchmarkKeyRestore(b *testing.B) {
	br := testsupport.RealBroker(b)
	nkeys := envInt(b, "OUTLIERD_BENCH_KEYS", 100_000)
	const parts = 6
	cfg := roleConfig(br, "in", "out", "dlq", "g", "")
	cfg.Ingest.Uncertainty = nil
	cfg.Run.Role = "scorer"
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	r := warmKeyModel(b, cfg)
	for _, layout := range keyRestoreLayouts {
		mt := testsupport.UniqueName("kb-models")
		createCompactedTopic(b, br, mt, layout)
		cfg.Run.ModelTopic = mt
		b.Cleanup(func() { // (about 1 GB each: a broker kept for other tests should not keep them)
			cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...)}
			if _, err := cl.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{mt}}); err != nil {
				b.Logf("deleting %s: %v", mt, err)
			}
		})
		t0 := time.Now()
		for lo := 0; lo < nkeys; lo += 5000 {
			keys := map[string]int32{}
			for i := lo; i < min(nkeys, lo+5000); i++ {
				keys[fmt.Sprintf("sensor-%06d", i)] = int32(i % parts)
			}
			publishKeyModels(b, cfg, keys, r, 1)
		}
		b.Logf("%d keys' models written to a model topic of %d partitions in %s", nkeys, layout, time.Since(t0).Round(time.Millisecond))
		for _, workers := range []int{1, 0} { // one decoder, as many as CPUs
			name := fmt.Sprintf("model-topic-%d-partitions/decoders-1", layout)
			if workers == 0 {
				name = fmt.Sprintf("model-topic-%d-partitions/decoders-%d", layout, runtime.GOMAXPROCS(0))
			}
			b.Run(name, func(b *testing.B) {
				read, restored := 0, 0
				for range b.N {
					p := &Pipeline{cfg: cfg, log: zerolog.Nop(), keys: newKeyInbox(), scope: newKeyScope()}
					restored = benchRestore(b, p, parts, 0, workers)
					read = int(p.stats.KeyModelsRead.Load())
				}
				b.ReportMetric(float64(read), "records_read")
				b.ReportMetric(float64(restored), "keys_restored")
			})
		}
	}
}

// keyRestoreLayouts are the model topics compared: one partition (every model topic before
// issue 21's restore fix; every key read) and the input's partitions + 1 (topics create's).
var keyRestoreLayouts = []int{1, 7}

// benchRestore restores on p, a scorer holding no key, the keys of input partition q: its
// model partition read from the start to its end now, as a follower does when q moves in.
func benchRestore(b *testing.B, p *Pipeline, parts int, q int32, workers int) int {
	p.scope.set(ingest.Assignment{Generation: 1, Partitions: []int32{q}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // (a broker gone: fail, not retry for ever)
	defer cancel()
	k, err := p.newKeyFollowers(ctx)
	if err != nil {
		b.Fatal(err)
	}
	k.decodeWorkers = workers
	m, err := modelTopicPartitions(ctx, p.cfg.modelTopic(), k.dialer)
	if err != nil || m < 1 || m > 1 && m != parts+1 {
		b.Fatalf("model topic of %d partitions (%v), want 1 or %d", m, err, parts+1)
	}
	k.follow(ctx, keyModelPartition(q, m), []int32{q}, p.scope.keep, true, func() {})
	if ctx.Err() != nil {
		b.Fatalf("the restore of partition %d did not end within 2 min", q)
	}
	return len(p.keys.pending)
}
