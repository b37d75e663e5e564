package pipeline

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestStaleKeyModelsTombstonedRealBroker: after ingest.features changed, the keys' models the
// old builder published stayed on the compacted model topic for good where the new builder
// never published the key again (a sensor retired with the change): read, skipped and warned
// of at every scorer's start, the topic never shrinking (failed before the fix: the 48 keys
// the new builder never saw kept their old models). Now the new builder reads the topic at its
// start and, once its first global model is out, tombstones the keys' models of the old
// features it has not replaced; the keys it sees get its new models (never a tombstone after
// them); a scorer still on the old features (a rolling change, the builder first) keeps every
// key's model it holds, the old global model too; and once the broker compacts the topic, no
// model of the old features is left on it.
func TestStaleKeyModelsTombstonedRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 3
	in, out, dlq, group, _ := roleTopics(t, br, parts)
	mt := testsupport.UniqueName("ks-models")
	compactedAtOnce(t, br, mt, parts+1)
	cfgA := roleConfig(br, in, out, dlq, group, mt)
	cfgA.Detect.FlagBy, cfgA.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfgA.Detect.Keys.Tail = detect.TailOwn
	cfgB := cfgA
	cfgB.Ingest.Features = cfgA.Ingest.Features[:len(cfgA.Ingest.Features)-1] // a feature dropped
	builderA, scorerA, builderB := cfgA, cfgA, cfgB
	builderA.Run.Role, scorerA.Run.Role, builderB.Run.Role = "builder", "scorer", "builder"
	builderA.Run.KeyPublishInterval, builderB.Run.KeyPublishInterval = time.Second, time.Second

	// The old features: every key's model on the topic, a scorer serving them.
	recs := keyedRecords(t, 8000, parts, 91)
	produceSome(t, br, newInput(in, parts, recs), recs)
	bA := startPipeline(t, builderA, nil)
	isModel := func(cfg Config) func(key string, v []byte) bool {
		return func(key string, v []byte) bool {
			k, _, _, err := detect.DecodeKeyModel(v, cfg.Ingest.Columns(), &cfg.Detect)
			return err == nil && k == key
		}
	}
	ofA, ofB := isModel(cfgA), isModel(cfgB)
	// newest is each key's newest message on the topic: "A", "B" (a model of those features) or
	// "tombstone".
	newest := func() map[string]string {
		got := map[string]string{}
		for _, m := range modelTopicMessages(t, br, mt) {
			if !isKeyModel(m) {
				continue
			}
			key := string(m.Key[len(keyModelPrefix):])
			switch {
			case m.Value == nil:
				got[key] = "tombstone"
			case ofA(key, m.Value):
				got[key] = "A"
			case ofB(key, m.Value):
				got[key] = "B"
			default:
				t.Fatalf("key %q: a model of neither configuration at %d/%d", key, m.Partition, m.Offset)
			}
		}
		return got
	}
	waitFor(t, 60*time.Second, "the first builder publishing every key's model", func() bool {
		n := newest()
		return len(n) == 64 && !slices.ContainsFunc(slices.Collect(maps.Values(n)), func(s string) bool { return s != "A" })
	})
	sA := startPipeline(t, scorerA, nil)
	var held map[string]uint64
	waitFor(t, 60*time.Second, "the old scorer serving every key's model", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, _, err := sA.p.KeyVersions(ctx)
		held = v
		return err == nil && len(v) == 64
	})
	if err := bA.stop(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// What the scorer holds is taken once it has read every key model the first builder wrote:
	// that builder rebuilds and publishes keys after their first models, so what the scorer held
	// at its first 64 keys could change before the stop (flaky31: 64 of 64 under -race, 18 with
	// the builder slowed by 1 s a batch). Read to the ends, then handed to the detect goroutine
	// (2 s, as below).
	keyMessages := func() (n int) {
		for mp := 1; mp <= parts; mp++ {
			n += len(modelPartitionMessages(t, br, mt, mp))
		}
		return n
	}
	onA := keyMessages()
	waitFor(t, 30*time.Second, "the old scorer reading the first builder's keys' models to their ends", func() bool {
		return sA.p.Stats().KeyModelsRead.Load() >= int64(onA)
	})
	time.Sleep(2 * time.Second)
	vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer vcancel()
	var err error
	if held, _, err = sA.p.KeyVersions(vctx); err != nil || len(held) != 64 {
		t.Fatalf("the old scorer after the first builder's stop: %d keys' models (%v), want 64", len(held), err)
	}
	globalA := sA.p.Stats().ModelVersion.Load()

	// The new features: the builder sees 16 of the keys again, the other 48 never.
	keys := slices.Sorted(maps.Keys(held))
	seen := map[string]bool{}
	for _, k := range keys[:16] {
		seen[k] = true
	}
	var again []*sensorRecord
	for _, r := range keyedRecords(t, 16_000, parts, 92) {
		if seen[string(r.key)] {
			again = append(again, r)
		}
	}
	produceSome(t, br, newInput(in, parts, again), again)
	bB := startPipeline(t, builderB, nil)
	waitFor(t, 60*time.Second, "the new builder's first model", func() bool { return bB.p.Stats().ModelVersion.Load() > 0 })
	var differ []string // (the keys whose newest message is not the one wanted, at the last look)
	defer func() {
		if t.Failed() {
			t.Logf("keys whose newest message differs: %v", differ)
		}
	}()
	waitFor(t, 60*time.Second, "the old features' keys' models tombstoned, the keys seen again with models of the new ones", func() bool {
		n := newest()
		differ = differ[:0]
		for _, k := range keys {
			if want := map[bool]string{true: "B", false: "tombstone"}[seen[k]]; n[k] != want {
				differ = append(differ, fmt.Sprintf("%s: %s, want %s", k, n[k], want))
			}
		}
		return len(differ) == 0
	})
	// The scorer of the old features (a rolling change, the builder first) keeps what it holds,
	// once it has read every message of the keys' partitions (it owns every input partition),
	// the tombstones among them, and handed them to its detect goroutine (2 s: the decoders and
	// the inbox take milliseconds; without the scorer's passing over them, 58 keys were dropped).
	onKeys := keyMessages()
	waitFor(t, 30*time.Second, "the old scorer reading the keys' partitions to their ends", func() bool {
		return sA.p.Stats().KeyModelsRead.Load() >= int64(onKeys)
	})
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now, _, err := sA.p.KeyVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(now, held) || sA.p.Stats().ModelVersion.Load() != globalA {
		t.Fatalf("the scorer of the old features holds %d keys' models (%d changed) and global model %d, want the %d it held and %d",
			len(now), changed(now, held), sA.p.Stats().ModelVersion.Load(), len(held), globalA)
	}
	if err := sA.stop(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Compacted, the topic holds no model of the old features.
	waitCompacted(t, br, mt)
	for _, m := range modelTopicMessages(t, br, mt) {
		if key := string(m.Key[len(keyModelPrefix):]); isKeyModel(m) && m.Value != nil && ofA(key, m.Value) {
			t.Fatalf("key %s: a model of the old features still on the topic after compaction (%d/%d)", key, m.Partition, m.Offset)
		}
	}
}

// changed counts the keys whose values (versions, reasons) differ between a and b (either
// missing included).
func changed[V comparable](a, b map[string]V) int {
	n := 0
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}

// TestStaleKeyJudgedAsScorersJudge: the builder's scan tombstones exactly the keys' models a
// scorer of its configuration skips as built for another one: other features or keys'
// settings, or other derived columns (the header); a model of its own configuration, one
// without the header (a release before it: judged by the features, as scorers judge it), a
// tombstone and a message that does not read (not the builder's to judge: a newer format, or
// damage) stay.
func TestStaleKeyJudgedAsScorersJudge(t *testing.T) {
	cfg := roleConfig(testsupport.Broker{Addrs: []string{"localhost:9092"}}, "in", "out", "dl", "g", "models")
	cfg.Ingest.Uncertainty = nil
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Ingest.Features = []string{"temp", "hum"}
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
	other := cfg
	other.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "d"}}}
	kw := cfg
	kw.Detect.Keys.K = cfg.Detect.Keys.K - 1
	fewer := cfg
	fewer.Ingest.Features = []string{"temp"}
	// Settings a scorer's check passes (its models still serve): keys.min_records, a flag's
	// threshold.
	compatible := cfg
	compatible.Detect.Keys.MinRecords = cfg.Detect.Keys.MinRecords + 5
	compatible.Detect.MinScore = cfg.Detect.MinScore + 0.1
	p := &keyPublisher{cfg: cfg.modelTopic(), features: cfg.Ingest.Columns(), detect: cfg.Detect}
	message := func(c Config, header *string) kafka.Message {
		v, err := detect.EncodeKeyModel(c.Ingest.Columns(), &c.Detect, "k", 7, warmKeyModel(t, c))
		if err != nil {
			t.Fatal(err)
		}
		m := kafka.Message{Key: []byte(keyModelPrefix + "k"), Value: v}
		if header != nil {
			m.Headers = []kafka.Header{{Key: headerColumns, Value: []byte(*header)}}
		}
		return m
	}
	own, otherDefs := derivedDefs(cfg.Ingest), derivedDefs(other.Ingest)
	corrupt := message(cfg, &own)
	corrupt.Value = slices.Clone(corrupt.Value)
	corrupt.Value[len(corrupt.Value)/2] ^= 1
	for _, c := range []struct {
		name  string
		msg   kafka.Message
		stale string // a part of the reason; "": not stale
	}{
		{"its own configuration", message(cfg, &own), ""},
		{"its features without the header (a release before it)", message(cfg, nil), ""},
		{"other derived columns", message(other, &otherDefs), "built for derived columns [d: diff of hum]"},
		{"other derived columns without the header", message(other, nil), ""},
		{"other features", message(fewer, &own), "built for features [temp d]"},
		{"other keys' settings", message(kw, &own), "keys.k"},
		{"settings that leave the models compatible", message(compatible, &own), ""},
		{"a tombstone", kafka.Message{Key: []byte(keyModelPrefix + "k")}, ""},
		{"corrupt", corrupt, ""},
	} {
		got := p.otherConfiguration(c.msg)
		if (got != "") != (c.stale != "") || !strings.Contains(got, c.stale) {
			t.Errorf("%s: judged %q, want stale %v (%q)", c.name, got, c.stale != "", c.stale)
		}
	}
}

// BenchmarkStaleScanRealBroker is a builder's start-up scan of the keys' models (keystale.go)
// over staleScanKeys keys' models of 8 features (about 18 KB each, a full keys.window) on two
// model partitions, every one of another configuration (a feature dropped): the time to read,
// checksum and judge them all, reported as keys/s.
func BenchmarkStaleScanRealBroker(b *testing.B) {
	_, cfg, size := staleScanTopic(b)
	p := staleScanner(cfg)
	b.ResetTimer()
	for range b.N {
		p.stale = staleKeys{}
		p.scanStale(context.Background(), kafka.DefaultDialer, 3)
		if len(p.stale.found) != staleScanKeys {
			b.Fatalf("%d stale keys found, want %d", len(p.stale.found), staleScanKeys)
		}
	}
	b.ReportMetric(float64(staleScanKeys*b.N)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(size)/staleScanKeys, "bytes/key")
}

// BenchmarkStaleScanResumedRealBroker is a builder's second start with detect.state_dir
// (keyscanstate.go) after staleScanKeys keys' models were scanned at its first and
// staleScanSince keys' models of its configuration were published since: by another writer
// (others: the record stops at the first, keyscanadvance.go), or by the builder itself (own:
// the record moves on through them). The time of the scan reading on from the record, per
// start, with the messages it read.
func BenchmarkStaleScanResumedRealBroker(b *testing.B) {
	const staleScanSince = 1_000
	for _, own := range []bool{false, true} {
		b.Run(map[bool]string{false: "others", true: "own"}[own], func(b *testing.B) {
			br, cfg, _ := staleScanTopic(b)
			dir := b.TempDir()
			p := staleScanner(cfg)
			p.stale.dir = dir
			if own {
				w, err := newKeyPublisher(p.cfg, p.features, p.detect, zerolog.Nop())
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				w.stale.dir = dir
				p = w
			}
			p.scanStale(context.Background(), kafka.DefaultDialer, 3) // the first start: its record
			other := cfg
			other.Ingest.Features = cfg.Ingest.Features[:len(cfg.Ingest.Features)-1] // (the builder's configuration)
			if own {
				model := warmKeyModel(b, other)
				todo := map[string]detect.KeyModel{}
				for i := range staleScanSince {
					key := fmt.Sprintf("sensor-%06d", i)
					todo[key] = detect.KeyModel{Key: key, Partition: int32(i % 2), Model: model}
				}
				p.version = 2
				if _, err := p.publish(context.Background(), todo); err != nil {
					b.Fatal(err)
				}
				p.saveAdvance(context.Background(), true)
			} else {
				writeKeyModels(b, br, cfg.Run.ModelTopic, other, 0, staleScanSince)
			}
			record, err := os.ReadFile(filepath.Join(dir, scanStateName))
			if err != nil {
				b.Fatal(err)
			}
			wantRead := map[bool]int{false: staleScanSince, true: 0}[own]
			q := staleScanner(cfg)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := os.WriteFile(filepath.Join(dir, scanStateName), record, 0o644); err != nil {
					b.Fatal(err)
				}
				q.stale = staleKeys{dir: dir}
				b.StartTimer()
				q.scanStale(context.Background(), kafka.DefaultDialer, 3)
				if q.stale.read != wantRead || len(q.stale.found) != staleScanKeys-staleScanSince {
					b.Fatalf("read %d messages and found %d stale keys, want %d and %d", q.stale.read, len(q.stale.found), wantRead, staleScanKeys-staleScanSince)
				}
			}
			b.ReportMetric(float64(wantRead), "messages_read/start")
		})
	}
}

// staleScanKeys is the keys' models on BenchmarkStaleScanRealBroker's topic.
const staleScanKeys = 20_000

// staleScanTopic is a model topic of 3 partitions with staleScanKeys keys' models of cfg's
// configuration on partitions 1 and 2, and their bytes.
func staleScanTopic(b *testing.B) (testsupport.Broker, Config, int) {
	br := testsupport.RealBroker(b)
	mt := testsupport.UniqueName("ks-bench")
	createCompactedTopic(b, br, mt, 3)
	b.Cleanup(func() {
		cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 30 * time.Second}
		cl.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{mt}})
	})
	cfg := roleConfig(br, "in", "out", "dl", "g", mt)
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	return br, cfg, writeKeyModels(b, br, mt, cfg, 0, staleScanKeys)
}

// writeKeyModels writes the keys' models of keys sensor-<lo>.. sensor-<hi-1> under cfg to
// topic (input partitions 0 and 1 in turn) and returns their bytes.
func writeKeyModels(b *testing.B, br testsupport.Broker, topic string, cfg Config, lo, hi int) int {
	model := warmKeyModel(b, cfg)
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: topic, Balancer: keyModelBalancer(), BatchSize: 1000,
		BatchBytes: int64(cfg.Sink.MaxMessageBytes), RequiredAcks: kafka.RequireAll}
	defer w.Close()
	size := 0
	for from := lo; from < hi; from += 1000 {
		msgs := make([]kafka.Message, 0, 1000)
		for i := from; i < min(from+1000, hi); i++ {
			key := fmt.Sprintf("sensor-%06d", i)
			v, err := detect.EncodeKeyModel(cfg.Ingest.Columns(), &cfg.Detect, key, 1, model)
			if err != nil {
				b.Fatal(err)
			}
			size += len(v)
			msgs = append(msgs, kafka.Message{Key: []byte(keyModelPrefix + key), Value: v, Headers: []kafka.Header{
				{Key: headerKeyModelVersion, Value: []byte("1")}, {Key: headerKeyPartition, Value: []byte(strconv.Itoa(i % 2))}}})
		}
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			b.Fatal(err)
		}
	}
	return size
}

// staleScanner is a builder's publisher of the keys' models whose configuration is cfg's with
// a feature dropped: every model of cfg is stale to it.
func staleScanner(cfg Config) *keyPublisher {
	other := cfg
	other.Ingest.Features = cfg.Ingest.Features[:len(cfg.Ingest.Features)-1]
	return &keyPublisher{cfg: other.modelTopic(), features: other.Ingest.Columns(), detect: other.Detect, log: zerolog.Nop(),
		wake: make(chan struct{}, 1)}
}

// TestScorerPassesOverStaleTombstones: a scorer hands a key's tombstone to its detect goroutine
// (the key dropped) unless it carries outlierd-key-stale, a builder's removal of a model of
// another configuration than its own, which the scorer keeps when it holds it, whatever the
// tombstone's version (its own is the stale model's: a scorer of an earlier release keeps it by
// the version).
func TestScorerPassesOverStaleTombstones(t *testing.T) {
	cfg := roleConfig(testsupport.Broker{Addrs: []string{"localhost:9092"}}, "in", "out", "dl", "g", "models")
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	sp := &Pipeline{cfg: cfg, keys: newKeyInbox()}
	read := sp.keyReader(func(int32) bool { return true }, zerolog.Nop())
	tombstone := func(key string, stale bool) kafka.Message {
		m := kafka.Message{Key: []byte(keyModelPrefix + key), Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: []byte("9")},
			{Key: headerKeyPartition, Value: []byte("0")}}}
		if stale {
			m.Headers = append(m.Headers, kafka.Header{Key: headerKeyStale, Value: []byte("built for features [temp]")})
		}
		return m
	}
	read(tombstone("evicted", false))
	read(tombstone("stale", true))
	got := sp.keys.take(func(int32) bool { return true })
	if len(got) != 1 || got[0].Key != "evicted" || got[0].Model != nil {
		t.Fatalf("the inbox holds %+v, want the evicted key's tombstone alone", got)
	}
}
