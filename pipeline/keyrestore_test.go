package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// A scorer's share of the keys' models (issue 21 item 3's leftovers): what it reads and holds.

// warmKeyModel is a warm key's model under cfg (a builder's detect stage fed one key's records).
func warmKeyModel(tb testing.TB, cfg Config) *detect.Ranker {
	tb.Helper()
	withSD := cfg.Ingest.Uncertainty != nil
	s, err := detect.NewStage(cfg.Detect, cfg.Ingest.Columns(), withSD, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleBuilder})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	d := len(cfg.Ingest.Columns())
	rows := make([]testbatch.Row, 2*cfg.Detect.Keys.Window)
	for i := range rows {
		x, sd := make([]float32, d), make([]float32, d)
		for j := range d {
			x[j], sd[j] = float32(20+rng.NormFloat64()), 0.1
		}
		if !withSD {
			sd = nil
		}
		rows[i] = testbatch.Row{Offset: int64(i), Key: []byte("k"), Time: time.UnixMilli(1_700_000_000_000 + int64(i)), Features: x, SD: sd}
	}
	b := testbatch.New(tb, memory.DefaultAllocator, "in", cfg.Ingest.Columns(), withSD, false, rows)
	if _, err := s.Process(context.Background(), b); err != nil {
		tb.Fatal(err)
	}
	for _, m := range s.TakeKeyModels() {
		if m.Model != nil {
			return m.Model
		}
	}
	tb.Fatal("no warm key after two windows of its records")
	return nil
}

// publishKeyModels writes r as the model of each key (key -> its input partition) at version v,
// through a builder's publisher.
func publishKeyModels(tb testing.TB, cfg Config, keys map[string]int32, r *detect.Ranker, v uint64) *keyPublisher {
	tb.Helper()
	kp, err := newKeyPublisher(cfg.modelTopic(), cfg.Ingest.Columns(), cfg.Detect, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { kp.Close() })
	todo := make(map[string]detect.KeyModel, len(keys))
	for k, q := range keys {
		todo[k] = detect.KeyModel{Key: k, Partition: q, Model: r}
	}
	kp.version = v
	deadline := time.Now().Add(30 * time.Second)
	for { // (a topic created a moment ago: its leader not known everywhere yet)
		_, err := kp.publish(context.Background(), todo)
		if err == nil {
			return kp
		}
		if !transient(err) || time.Now().After(deadline) {
			tb.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keyedScorerTopics makes a keyed scorer's topics on the real broker (input and output of parts
// partitions, the model topic of parts+1: the input's and the global model's) and its config,
// and places nkeys keys "sensor-NN" on the input partitions in turn.
func keyedScorerTopics(t *testing.T, prefix string, parts, nkeys int) (Config, map[string]int32) {
	t.Helper()
	br := testsupport.RealBroker(t)
	in, out, dlq, group, mt := testsupport.UniqueName(prefix+"-in"), testsupport.UniqueName(prefix+"-out"), testsupport.UniqueName(prefix+"-dlq"),
		testsupport.UniqueName(prefix+"-group"), testsupport.UniqueName(prefix+"-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	createCompactedTopic(t, br, mt, parts+1)
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = "scorer"
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	keyPart := map[string]int32{}
	for i := range nkeys {
		keyPart[fmt.Sprintf("sensor-%02d", i)] = int32(i % parts)
	}
	return cfg, keyPart
}

// gatedSource delays the assignments its source reports until the gate opens (a scorer whose
// group has not assigned it yet).
type gatedSource struct {
	Source
	gate chan struct{}
}

func (g gatedSource) OnAssigned(f func(ingest.Assignment)) {
	g.Source.(Assigning).OnAssigned(func(a ingest.Assignment) {
		<-g.gate
		f(a)
	})
}

// TestKeyRestoreReadsItsPartitionsRealBroker: a scorer reads from the model topic the keys'
// models of its input partitions only, holds none before its first assignment, and at a
// rebalance reads only the partitions moved in (not again those it kept). 60 keys on 6 input
// partitions, the model topic with 7 (`topics create`: the input's and the global model's).
// Before: every restore read every key of the topic (and a scorer held every key until its
// first assignment).
func TestKeyRestoreReadsItsPartitionsRealBroker(t *testing.T) {
	const parts, nkeys = 6, 60
	cfg, keyPart := keyedScorerTopics(t, "ks", parts, nkeys)
	const version = 7
	publishKeyModels(t, cfg, keyPart, warmKeyModel(t, cfg), version)
	want := func() map[string]uint64 {
		w := map[string]uint64{}
		for k := range keyPart {
			w[k] = version
		}
		return w
	}

	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	a := startPipeline(t, cfg, func(p *Pipeline) { p.src = gatedSource{p.src, gate} })
	t.Cleanup(release)          // (before the pipeline's own clean-up: its source's close awaits the gate)
	time.Sleep(3 * time.Second) // its start-up read done, its group joined, the assignment held at the gate
	// The query waits for the detect loop, a liveness bound and not a speed one: under make
	// test's parallel packages on 2 cores the loop once took over 10 s to answer (session 16).
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	held, assigned, err := a.p.KeyVersions(ctx)
	cancel()
	if err != nil || assigned != nil || len(held) != 0 || a.p.Stats().KeyModelsRead.Load() != 0 {
		t.Fatalf("before its first assignment the scorer holds %d keys' models (partitions %v, err %v) after reading %d: want none read or held",
			len(held), assigned, err, a.p.Stats().KeyModelsRead.Load())
	}
	release()
	waitServed(t, "the scorer alone serving every key", []*running{a}, keyPart, want)
	if got := a.p.Stats().KeyModelsRead.Load(); got != nkeys {
		t.Fatalf("the scorer of all %d partitions read %d key model messages, want the %d keys' once", parts, got, nkeys)
	}

	b := startPipeline(t, cfg, nil)
	waitServed(t, "two scorers, each serving its partitions' keys", []*running{a, b}, keyPart, want)
	if got := b.p.Stats().KeyModelsRead.Load(); got != nkeys/2 {
		t.Fatalf("the second scorer (3 of 6 partitions) read %d key model messages, want its %d keys'", got, nkeys/2)
	}
	if got := a.p.Stats().KeyModelsRead.Load(); got != nkeys {
		t.Fatalf("the first scorer read %d key model messages after giving half its partitions away, want still %d (nothing re-read)", got, nkeys)
	}
	if err := b.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitServed(t, "the first scorer serving every key again", []*running{a}, keyPart, want)
	if got := a.p.Stats().KeyModelsRead.Load(); got != nkeys+nkeys/2 {
		t.Fatalf("the first scorer read %d key model messages after taking 3 partitions back, want %d (%d + those partitions' %d)", got, nkeys+nkeys/2, nkeys, nkeys/2)
	}
	if err := a.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestKeyModelTooLargeTombstoned: a key whose new model does not fit sink.max_message_bytes gets
// a tombstone (at the publication's version), so scorers drop its older model and score its
// records with the global model, instead of keeping the older model silently.
func TestKeyModelTooLargeTombstoned(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		mt := testsupport.UniqueName("kt-models")
		createCompactedTopic(t, br, mt, 1)
		cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
		cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
		r := warmKeyModel(t, cfg)
		long := "sensor-" + strings.Repeat("x", 4000)
		publishKeyModels(t, cfg, map[string]int32{long: 0, "short": 0}, r, 1)
		enc, err := detect.EncodeKeyModel(cfg.Ingest.Columns(), &cfg.Detect, "short", 2, r)
		if err != nil {
			t.Fatal(err)
		}
		// Room for the short key's model, not for the long key's.
		cfg.Sink.MaxMessageBytes = len(enc) + len(keyModelPrefix) + 100 + modelChunkOverhead
		if kp := publishKeyModels(t, cfg, map[string]int32{long: 0, "short": 0}, r, 2); kp.tooLarge.Load() != 1 {
			t.Fatalf("%d keys' models counted too large, want the long key's", kp.tooLarge.Load())
		}
		newest := map[string]kafka.Message{}
		for _, m := range modelTopicMessages(t, br, mt) {
			newest[string(m.Key)] = m
		}
		if m := newest[keyModelPrefix+"short"]; m.Value == nil || keyModelVersion(m) != 2 {
			t.Fatalf("the short key's newest message: version %d, %d bytes: want its model of version 2", keyModelVersion(m), len(m.Value))
		}
		if m := newest[keyModelPrefix+long]; m.Value != nil || keyModelVersion(m) != 2 {
			t.Fatalf("the long key's newest message: version %d, %d bytes: want a tombstone of version 2 (its model of version 2 does not fit)", keyModelVersion(m), len(m.Value))
		}
	})
}

// TestCreateTopicsModelTopicKeyed: `outlierd topics create` with detect.key_by: key makes the
// model topic with a partition for the global model and one for each input partition's keys'
// models; without key_by, one.
func TestCreateTopicsModelTopicKeyed(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	for _, keyed := range []bool{false, true} {
		cfg := roleConfig(br, testsupport.UniqueName("ct-in"), testsupport.UniqueName("ct-out"), testsupport.UniqueName("ct-dlq"), "g", testsupport.UniqueName("ct-models"))
		want := 1
		if keyed {
			cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
			want = 7
		}
		res, err := CreateTopics(context.Background(), cfg, 6, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Key == "run.model_topic" && (r.Partitions != want || !r.Created) {
				t.Errorf("key_by %v: model topic %+v, want %d partitions, created", keyed, r, want)
			}
		}
	}
}

// TestKeyMovedTombstonedAtOldPlace: a key whose records moved to another input partition (the
// input topic got more partitions) gets its model at the new partition's place and a tombstone
// of the same version at the old one's, so the scorer of the old partition drops it.
func TestKeyMovedTombstonedAtOldPlace(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	mt := testsupport.UniqueName("km-models")
	createCompactedTopic(t, br, mt, 7)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	r := warmKeyModel(t, cfg)
	kp := publishKeyModels(t, cfg, map[string]int32{"k": 1}, r, 1)
	kp.version = 2
	if _, err := kp.publish(context.Background(), map[string]detect.KeyModel{"k": {Key: "k", Partition: 4, Model: r}}); err != nil {
		t.Fatal(err)
	}
	old, moved := modelPartitionMessages(t, br, mt, keyModelPartition(1, 7)), modelPartitionMessages(t, br, mt, keyModelPartition(4, 7))
	if len(old) != 2 || old[1].Value != nil || keyModelVersion(old[1]) != 2 || keyPartition(old[1]) != 1 {
		t.Fatalf("old place (model partition %d): %d messages, want the model of version 1 then a tombstone of version 2", keyModelPartition(1, 7), len(old))
	}
	if len(moved) != 1 || moved[0].Value == nil || keyModelVersion(moved[0]) != 2 || keyPartition(moved[0]) != 4 {
		t.Fatalf("new place (model partition %d): %d messages, want the model of version 2", keyModelPartition(4, 7), len(moved))
	}
	// A scorer holding both input partitions keeps the model, whichever it reads first.
	for _, order := range [][]kafka.Message{{old[1], moved[0]}, {moved[0], old[1]}} {
		p := &Pipeline{cfg: cfg, keys: newKeyInbox()}
		read := p.keyReader(func(int32) bool { return true }, zerolog.Nop())
		for _, m := range order {
			read(m)
		}
		if got := p.keys.pending["k"]; got.Model == nil || got.Version != 2 || got.Partition != 4 {
			t.Fatalf("read in order %d, %d: the inbox has %+v, want the model of version 2", keyPartition(order[0]), keyPartition(order[1]), got)
		}
	}
}

// TestKeyRestoreBeforeFetchRealBroker: a scorer's partitions' records wait for their keys'
// models at an assignment, so a key with a model on the topic never has a record scored by the
// global model because the scorer was still reading (a slow model topic here: 30 ms a message,
// about 2 s for the 64 keys). Before: the fetch began at once and the first batches of each
// partition were scored by the global model.
func TestKeyRestoreBeforeFetchRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 6
	in, out, dlq, group, mt := testsupport.UniqueName("kf-in"), testsupport.UniqueName("kf-out"), testsupport.UniqueName("kf-dlq"),
		testsupport.UniqueName("kf-group"), testsupport.UniqueName("kf-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	createCompactedTopic(t, br, mt, parts+1)
	recs := keyedRecords(t, 12_000, parts, 85)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs)
	base := roleConfig(br, in, out, dlq, group, mt)
	base.Detect.FlagBy, base.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	builderCfg, scorerCfg := base, base
	builderCfg.Run.Role, scorerCfg.Run.Role = "builder", "scorer"
	builder := startPipeline(t, builderCfg, nil)
	waitFor(t, 60*time.Second, "the builder publishing the global model and all 64 keys' models", func() bool {
		return len(keyModelsOnTopic(t, br, base)) == 64 && publishedModel(t, base) != nil
	})
	if err := builder.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	scorer := startPipeline(t, scorerCfg, func(p *Pipeline) {
		p.src = slowKeys{p.src, p}
	})
	waitCommittedBelow(t, br, group, input, len(recs), 90*time.Second)
	if err := scorer.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	byID, _ := readVerdicts(t, br, out, parts)
	global := 0
	for _, rec := range recs {
		if rec.malformed {
			continue
		}
		v := scoredVerdict(t, byID, in, rec)
		if v.Scores.KeyModelVersion == 0 {
			global++
		}
	}
	if global > 0 {
		t.Fatalf("%d records scored by the global model, though every key's model was on the topic when the scorer started", global)
	}
}

// slowKeys makes a scorer's keys' model reads slow (30 ms a message) once its followers exist
// (they are made when the pipeline runs, after the test's hook).
type slowKeys struct {
	Source
	p *Pipeline
}

func (s slowKeys) OnAssigned(f func(ingest.Assignment)) {
	s.p.keyFollow.slow = func() { time.Sleep(30 * time.Millisecond) }
	s.Source.(Assigning).OnAssigned(f)
}

// TestBuilderTombstonesPartition0KeysRealBroker: partitions added to a one-partition model topic
// (to move to the layout of one partition per input partition's keys): a builder's start writes
// tombstones for the keys' models left on partition 0, so compaction removes them and the
// scorers' start-up read of the global model no longer reads through them.
func TestBuilderTombstonesPartition0KeysRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 6
	in, out, dlq, group, mt := testsupport.UniqueName("kz-in"), testsupport.UniqueName("kz-out"), testsupport.UniqueName("kz-dlq"),
		testsupport.UniqueName("kz-group"), testsupport.UniqueName("kz-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	createCompactedTopic(t, br, mt, 1)
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = "builder"
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	old := map[string]int32{"a": 0, "b": 3, "c": 5}
	publishKeyModels(t, cfg, old, warmKeyModel(t, cfg), 3) // the one-partition layout: all on 0
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...)}
	res, err := cl.CreatePartitions(context.Background(), &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: mt, Count: parts + 1}}})
	if err == nil && len(res.Errors) > 0 {
		err = res.Errors[mt]
	}
	if err != nil {
		t.Fatal(err)
	}
	b := startPipeline(t, cfg, nil)
	waitFor(t, 30*time.Second, "the builder's tombstones for the keys on partition 0", func() bool {
		newest := map[string]kafka.Message{}
		for _, m := range modelPartitionMessages(t, br, mt, 0) {
			newest[string(m.Key)] = m
		}
		for k := range old {
			if m, ok := newest[keyModelPrefix+k]; !ok || m.Value != nil {
				return false
			}
		}
		return true
	})
	if err := b.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestScorerStopsWhileRestoringKeysRealBroker: a scorer whose first assignment is still waiting
// (at most keyRestoreWait, 30 s) for its partitions' keys' models stops promptly on the graceful
// stop (the wait ends with the soft stop): a slow model topic does not hold a rolling restart.
// Both orders of the group's join and the scorer's start: the assignment heard after
// followAssignments registered (the group's goroutine waits), and heard before it (the wait
// runs inside the role's start; CI stop 45 failed on that order: 20 s).
func TestScorerStopsWhileRestoringKeysRealBroker(t *testing.T) {
	for _, heardFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("heard_first=%v", heardFirst), func(t *testing.T) {
			scorerStopsWhileRestoring(t, heardFirst)
		})
	}
}

func scorerStopsWhileRestoring(t *testing.T, heardFirst bool) {
	cfg, keyPart := keyedScorerTopics(t, "kst", 2, 40)
	publishKeyModels(t, cfg, keyPart, warmKeyModel(t, cfg), 3)
	scorer := startPipeline(t, cfg, func(p *Pipeline) {
		p.src = stallKeys{p.src, p, heardFirst} // 40 keys' models at 1 s each: the restore outlasts the stop's bound
	})
	waitFor(t, 60*time.Second, "the scorer's first assignment", func() bool {
		scorer.p.scope.mu.Lock()
		defer scorer.p.scope.mu.Unlock()
		return scorer.p.scope.known
	})
	time.Sleep(time.Second) // inside the assignment's wait for the keys' models
	t0 := time.Now()
	if err := scorer.stop(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %v after the graceful stop", time.Since(t0).Round(time.Millisecond))
}

// stallKeys makes a scorer's keys' model reads take 1 s a message; heardFirst as
// onAssignedAfter's.
type stallKeys struct {
	Source
	p          *Pipeline
	heardFirst bool
}

func (s stallKeys) OnAssigned(f func(ingest.Assignment)) {
	s.p.keyFollow.slow = func() { time.Sleep(time.Second) }
	onAssignedAfter(s.Source, f, s.heardFirst)
}

// onAssignedAfter registers f with src's OnAssigned; heardFirst: only once the group has
// assigned src (at most 60 s), so that f hears that assignment at once, on the caller's
// goroutine (the role's start).
func onAssignedAfter(src Source, f func(ingest.Assignment), heardFirst bool) {
	on := src.(Assigning)
	if heardFirst {
		heard := make(chan struct{})
		once := sync.OnceFunc(func() { close(heard) })
		on.OnAssigned(func(ingest.Assignment) { once() })
		select {
		case <-heard:
		case <-time.After(60 * time.Second):
		}
	}
	on.OnAssigned(f)
}

// TestScorerStopsWhileModelTopicUnreachableRealBroker: a scorer whose assignment finds the
// model topic's partitions unreadable (the followers' lookup retried with backoff, as while its
// brokers are away) stops promptly on the graceful stop, in both orders of the group's join and
// the scorer's start. Heard first, the retries ran inside the role's start, before Run's
// stages exist, and only the hard stop (shutdown_timeout, 30 s) ended them.
func TestScorerStopsWhileModelTopicUnreachableRealBroker(t *testing.T) {
	for _, heardFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("heard_first=%v", heardFirst), func(t *testing.T) {
			cfg, _ := keyedScorerTopics(t, "ksu", 2, 4)
			var dials atomic.Int64
			scorer := startPipeline(t, cfg, func(p *Pipeline) {
				p.src = unreachableKeys{p.src, p, heardFirst, &dials}
			})
			waitFor(t, 60*time.Second, "the followers' lookup of the model topic failing", func() bool { return dials.Load() >= 2 })
			t0 := time.Now()
			if err := scorer.stop(t, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped %v after the graceful stop (%d dials refused)", time.Since(t0).Round(time.Millisecond), dials.Load())
		})
	}
}

// unreachableKeys makes a scorer's keys' followers find the model topic's brokers unreachable
// (every dial refused, counted in dials); heardFirst as onAssignedAfter's.
type unreachableKeys struct {
	Source
	p          *Pipeline
	heardFirst bool
	dials      *atomic.Int64
}

func (s unreachableKeys) OnAssigned(f func(ingest.Assignment)) {
	s.p.keyFollow.dialer = &kafka.Dialer{Timeout: time.Second, DialFunc: func(context.Context, string, string) (net.Conn, error) {
		s.dials.Add(1)
		return nil, errors.New("test: the model topic's brokers are unreachable")
	}}
	onAssignedAfter(s.Source, f, s.heardFirst)
}
