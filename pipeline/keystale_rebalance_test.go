package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestStaleTombstoneSparesAnotherBuildersModelRealBroker: two builders of the new
// configuration share the input partitions. The first scans the model topic at its start and
// finds two keys' models of the old one: "a" (input partition 0, its own) and "b" (input
// partition 1, the other builder's). It tombstones "a" once its global model is out; "b" waits.
// The other builder then publishes b's model of the new configuration, and a rebalance gives
// input partition 1 to the first builder. Its tombstone of "b", judged on the scan's reading
// of the topic, followed the other builder's new model and removed it (compaction keeps a
// key's newest message): failed so before the fix (b's newest message the stale tombstone).
// Now the builder reads each model partition again from where its scan ended before it
// tombstones: a key whose newer message is not a model of another configuration is left.
func TestStaleTombstoneSparesAnotherBuildersModelRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	mt := testsupport.UniqueName("ks-rebalance")
	const m = 3 // model partitions: 0 the global model's, 1 input partition 0's keys, 2 partition 1's
	testsupport.CreateTopicConfigs(t, br, kafka.TopicConfig{Topic: mt, NumPartitions: m, ReplicationFactor: 1})
	cfg := roleConfig(br, "in", "out", "dl", "g", mt)
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	old := cfg
	old.Ingest.Features = cfg.Ingest.Features[:len(cfg.Ingest.Features)-1] // a feature dropped since
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: mt, Balancer: keyModelBalancer(), RequiredAcks: kafka.RequireAll, BatchSize: 1}
	defer w.Close()
	model := func(c Config, key string, part int32, version uint64) kafka.Message {
		v, err := detect.EncodeKeyModel(c.Ingest.Columns(), &c.Detect, key, version, warmKeyModel(t, c))
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Message{Key: []byte(keyModelPrefix + key), Value: v, Headers: []kafka.Header{
			{Key: headerKeyModelVersion, Value: []byte(strconv.FormatUint(version, 10))},
			{Key: headerKeyPartition, Value: []byte(strconv.Itoa(int(part)))}}}
	}
	if err := w.WriteMessages(ctx, model(old, "a", 0, 10), model(old, "b", 1, 10)); err != nil {
		t.Fatal(err)
	}

	p, err := newKeyPublisher(cfg.modelTopic(), cfg.Ingest.Columns(), cfg.Detect, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.w.Close()
	p.assigned([]int32{0}, false) // input partition 1 is the other builder's
	p.scanStale(ctx, kafka.DefaultDialer, m)
	p.modelServing()
	p.tombstoneStale(ctx)

	if err := w.WriteMessages(ctx, model(cfg, "b", 1, 20)); err != nil { // the other builder's
		t.Fatal(err)
	}
	p.assigned([]int32{0, 1}, false) // a rebalance: input partition 1 is this builder's now
	p.tombstoneStale(ctx)

	newest := map[string]kafka.Message{}
	for _, msg := range modelTopicMessages(t, br, mt) {
		if isKeyModel(msg) {
			newest[string(msg.Key[len(keyModelPrefix):])] = msg
		}
	}
	if a := newest["a"]; a.Value != nil {
		t.Errorf("key a (the old configuration's model, input partition 0): newest message at %d/%d is not a tombstone", a.Partition, a.Offset)
	} else if _, stale := headerValue(a, headerKeyStale); !stale {
		t.Errorf("key a's tombstone at %d/%d lacks %s", a.Partition, a.Offset, headerKeyStale)
	}
	b := newest["b"]
	if b.Value == nil {
		t.Fatalf("key b: the other builder's model of this configuration (version 20) was followed by a tombstone at %d/%d: compaction removes it", b.Partition, b.Offset)
	}
	if v := keyModelVersion(b); v != 20 {
		t.Errorf("key b: newest model version %d at %d/%d, want the other builder's 20", v, b.Partition, b.Offset)
	}
}

// TestStaleNamesBounded: the log line's first stale keys are taken from the keys found without
// a name formatted for each (at 1,000,000 stale keys the scan's log formatted and sorted a
// million strings, about as much memory again as the keys held: failed so before, 100,000
// allocations here), in the order of the key, then the model partition.
func TestStaleNamesBounded(t *testing.T) {
	found := map[staleRef]staleKey{}
	for i := range 100_000 {
		found[staleRef{1 + i%3, fmt.Sprintf("k%06d", 99_999-i)}] = staleKey{}
	}
	found[staleRef{2, "k000000"}] = staleKey{}
	var got []string
	// AllocsPerRun counts the whole process's allocations: goroutines an earlier test left
	// behind count too. 1,113 a run were counted so (flaky31: 1 of 4 runs of pipeline's keyed
	// tests under a collection forced every 2 ms; 100 was the bound then), against 100,000 (one
	// a key) for the defect: the bound, a tenth of the keys, tells one from the other with a
	// margin of about 9 on either side.
	if allocs := testing.AllocsPerRun(3, func() { got = staleNames(found) }); allocs > 10_000 {
		t.Errorf("%v allocations for %d keys, want a number that does not grow with them", allocs, len(found))
	}
	want := []string{"k000000 (model partition 1)", "k000000 (model partition 2)", "k000001 (model partition 3)", "k000002 (model partition 2)",
		"k000003 (model partition 1)", "k000004 (model partition 3)", "k000005 (model partition 2)", "k000006 (model partition 1)",
		"k000007 (model partition 3)", "k000008 (model partition 2)"}
	if !slices.Equal(got, want) {
		t.Errorf("first keys %q, want %q", got, want)
	}
}

// TestStaleTombstoneOfAVersionAheadNotRefused: a builder's tombstone of a model of another
// configuration carries that model's version, which may be one a scorer refuses as more than an
// hour ahead of its clock (the model was refused so too). The scorer passes over such a
// tombstone whatever its version; it counted and logged it as a refusal (version_ahead) of a
// message it never takes (failed so before: a "model topic: refused" line with that reason).
func TestStaleTombstoneOfAVersionAheadNotRefused(t *testing.T) {
	cfg := roleConfig(testsupport.Broker{Addrs: []string{"localhost:9092"}}, "in", "out", "dl", "g", "models")
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	sp := &Pipeline{cfg: cfg, keys: newKeyInbox()}
	var logs testsupport.LogBuffer
	read, _ := sp.keyReaderSkips(func(int32) bool { return true }, zerolog.New(&logs))
	ahead := strconv.FormatInt(time.Now().Add(2*maxVersionAhead).UnixMilli(), 10)
	read(kafka.Message{Key: []byte(keyModelPrefix + "k"), Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: []byte(ahead)},
		{Key: headerKeyPartition, Value: []byte("0")}, {Key: headerKeyStale, Value: []byte("built for features [temp]")}}})
	if strings.Contains(logs.String(), refusedVersionAhead) {
		t.Errorf("a stale model's tombstone refused as a version ahead: %s", logs.String())
	}
	if got := sp.keys.take(func(int32) bool { return true }); len(got) != 0 {
		t.Errorf("the inbox holds %+v, want nothing (the tombstone passed over)", got)
	}
}
