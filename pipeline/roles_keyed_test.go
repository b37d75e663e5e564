package pipeline

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// Models per key in a builder/scorer deployment (issue 21 item 3): the keys' models travel on
// the compacted model topic, one message per key (modelkeys.go).

// keyedRecords is the sensor stream (64 keys) with each key's records on one partition, as a
// producer partitioning by key writes them: scorers then see every record of their keys.
func keyedRecords(t *testing.T, n, parts int, seed uint64) []*sensorRecord {
	recs := makeSensorRecords(t, n, parts, seed, 0.01, 0.002)
	for _, r := range recs {
		h := fnv.New32a()
		h.Write(r.key)
		r.p = int32(h.Sum32() % uint32(parts))
	}
	return recs
}

// waitServed waits until the running scorers hold, between them, the keys' models of want():
// each key's at its version, on the scorer whose partitions include the key's, and no scorer any
// other key; it fails naming what still differed.
func waitServed(t *testing.T, what string, scorers []*running, keyPart map[string]int32, want func() map[string]uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		why := served(scorers, keyPart, want())
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 60 s, %s", what, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// served says how the scorers' keys differ from want ("" when they do not).
func served(scorers []*running, keyPart map[string]int32, want map[string]uint64) string {
	owner := map[int32]int{}
	held := make([]map[string]uint64, len(scorers))
	for i, s := range scorers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, parts, err := s.p.KeyVersions(ctx)
		cancel()
		if err != nil || parts == nil {
			return fmt.Sprintf("scorer %d: no assignment yet (%v)", i, err)
		}
		for _, q := range parts {
			if j, dup := owner[q]; dup {
				return fmt.Sprintf("partition %d on scorers %d and %d", q, j, i)
			}
			owner[q] = i
		}
		held[i] = v
	}
	for key, v := range want {
		i, ok := owner[keyPart[key]]
		if !ok {
			return fmt.Sprintf("partition %d (key %s) on no scorer", keyPart[key], key)
		}
		if held[i][key] != v {
			return fmt.Sprintf("key %s: scorer %d serves version %d, want %d", key, i, held[i][key], v)
		}
	}
	for i, h := range held {
		for key := range h {
			if owner[keyPart[key]] != i {
				return fmt.Sprintf("scorer %d holds key %s of partition %d, not one of its own", i, key, keyPart[key])
			}
		}
	}
	return ""
}

// compactedAtOnce creates a model topic of parts partitions that the broker compacts as soon as
// its cleaner looks (every 15 s): tiny segments rolled after 100 ms, any dirty ratio.
func compactedAtOnce(t *testing.T, br testsupport.Broker, topic string, parts int) {
	testsupport.CreateTopicConfigs(t, br, kafka.TopicConfig{Topic: topic, NumPartitions: parts, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "segment.ms", ConfigValue: "100"}, {ConfigName: "min.cleanable.dirty.ratio", ConfigValue: "0.001"},
			{ConfigName: "min.compaction.lag.ms", ConfigValue: "0"}}})
}

// waitCompacted waits for a compaction pass over each partition of the topic: a witness key
// written twice to it has lost its first value (a message now and then rolls the segment so
// the cleaner may take it).
func waitCompacted(t *testing.T, br testsupport.Broker, topic string) {
	t.Helper()
	ps, err := kafka.DefaultDialer.LookupPartitions(context.Background(), "tcp", br.Addrs[0], topic)
	if err != nil {
		t.Fatal(err)
	}
	toOwn := kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { // witness i to partition i
		i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Key), "compaction-witness-"))
		return i
	})
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchSize: 1, Balancer: toOwn}
	defer w.Close()
	mark := func(s string) {
		for mp := range len(ps) {
			if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("compaction-witness-" + strconv.Itoa(mp)), Value: []byte(s)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark("1")
	waitFor(t, 90*time.Second, "the broker compacting the model topic", func() bool {
		time.Sleep(200 * time.Millisecond)
		mark("2")
		for _, m := range modelTopicMessages(t, br, topic) {
			if string(m.Value) == "1" {
				return false
			}
		}
		return true
	})
}

// keyModelsOnTopic reads the key model messages on the model topic and returns each key's
// newest version (0: a tombstone), as a scorer installs them.
func keyModelsOnTopic(t *testing.T, br testsupport.Broker, cfg Config) (newest map[string]uint64) {
	t.Helper()
	newest = map[string]uint64{}
	for _, m := range modelTopicMessages(t, br, cfg.Run.ModelTopic) {
		if !isKeyModel(m) {
			continue
		}
		key := string(m.Key[len(keyModelPrefix):])
		if m.Value == nil {
			newest[key] = 0
			continue
		}
		k, v, _, err := detect.DecodeKeyModel(m.Value, cfg.Ingest.Columns(), &cfg.Detect)
		if err != nil || k != key || v != keyModelVersion(m) {
			t.Fatalf("key model message %s at %d: key %q version %d (header %d): %v", m.Key, m.Offset, k, v, keyModelVersion(m), err)
		}
		newest[key] = v
	}
	return newest
}

// TestKeyedBuilderAndScorersRealBroker: a builder and three scorers with detect.key_by: key on a
// 6-partition topic partitioned by key.
//   - the builder publishes the keys' models on the model topic, and every record a scorer
//     scores by its key's model names that model's version and gets exactly the score that
//     model (read back from the topic) gives it;
//   - each scorer keeps the models of its partitions' keys only, and a rebalance moves them
//     (a scorer stopped: the others read its partitions' keys' models from the topic; back:
//     it serves them again and the others drop them);
//   - the builder killed mid-publication (some keys' new models written, the others' not), and
//     the broker compacting the topic (it keeps one message a key, the newest): the scorers
//     serve on, and a restarted scorer serves, for its keys, their newest complete models;
//   - a new builder's keys' models (versions above the first's) replace them on every scorer.
func TestKeyedBuilderAndScorersRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	// The model topic as topics create makes it (a partition for each input partition's keys,
	// and the global model's), and of one partition (a topic made before: every key on it).
	for _, layout := range []int{7, 1} {
		t.Run(fmt.Sprintf("model-topic-%d-partitions", layout), func(t *testing.T) { keyedBuilderAndScorers(t, br, layout) })
	}
}

func keyedBuilderAndScorers(t *testing.T, br testsupport.Broker, modelParts int) {
	const parts = 6
	in, out, dlq, group := testsupport.UniqueName("kr-in"), testsupport.UniqueName("kr-out"), testsupport.UniqueName("kr-dlq"), testsupport.UniqueName("kr-group")
	mt := testsupport.UniqueName("kr-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	compactedAtOnce(t, br, mt, modelParts)
	recs := keyedRecords(t, 36_000, parts, 81)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs[:12000])

	base := roleConfig(br, in, out, dlq, group, mt)
	base.Detect.FlagBy = detect.FlagBySignificance
	base.Detect.KeyBy = detect.KeyByKey
	// Under keys.tail: own: a scorer's score is then exactly its key's published model's; under
	// fleet (the default) each scorer also reads its own fleet pool, fitted from its partitions'
	// keys (stages/detect: TestScorerRestartContinuesFleetTail).
	base.Detect.Keys.Tail = detect.TailOwn
	builderCfg, scorerCfg := base, base
	builderCfg.Run.Role, scorerCfg.Run.Role = "builder", "scorer"
	builderCfg.Run.KeyPublishInterval = 2 * time.Second // a key rebuilt within it waits, with its newest model

	// Every key model the builders write is recorded (the broker compacts the topic: the older
	// versions do not stay on it). The first builder's first publication (of two messages at
	// least) once armed, after the 64 keys' models are out and more records come, is cut after
	// half its messages, and the builder dies there (writes nothing more), as one killed
	// mid-publication. (It was the third publication from the start: a builder slower than one
	// that builds all 64 keys' first models within two publications, a second apart (a loaded
	// machine, -race), died before the last keys' first models and never published them.)
	var mu sync.Mutex
	all := map[string]map[uint64]*detect.Ranker{}
	record := func(msgs []kafka.Message) {
		for _, m := range msgs {
			if m.Value == nil {
				continue
			}
			k, v, r, err := detect.DecodeKeyModel(m.Value, base.Ingest.Columns(), &base.Detect)
			if err != nil {
				t.Errorf("key model %s: %v", m.Key, err)
				continue
			}
			if all[k] == nil {
				all[k] = map[uint64]*detect.Ranker{}
			}
			all[k][v] = r
		}
	}
	armed, cutAt := false, -1
	builder := startPipeline(t, builderCfg, func(p *Pipeline) {
		p.keyPub.cut = func(msgs []kafka.Message) ([]kafka.Message, bool) {
			mu.Lock()
			defer mu.Unlock()
			cut := armed && cutAt < 0 && len(msgs) >= 2
			if cut {
				cutAt = len(msgs) / 2
				msgs = msgs[:cutAt]
			}
			record(msgs)
			return msgs, cut
		}
	})
	waitFor(t, 60*time.Second, "the builder publishing models of all 64 keys", func() bool {
		newest := keyModelsOnTopic(t, br, base)
		return len(newest) == 64
	})
	keyPart := map[string]int32{}
	for _, r := range recs {
		keyPart[string(r.key)] = r.p
	}
	onTopic := func() map[string]uint64 { return keyModelsOnTopic(t, br, base) }
	scorers := make([]*running, 3)
	for i := range scorers {
		scorers[i] = startPipeline(t, scorerCfg, nil)
	}
	waitCommittedBelow(t, br, group, input, 12000, 90*time.Second)
	waitServed(t, "each scorer serving the newest models of its partitions' keys, and no other key", scorers, keyPart, onTopic)

	// More records: the keys rebuild, the builder publishes and dies in that publication.
	mu.Lock()
	armed = true
	mu.Unlock()
	produceSome(t, br, input, recs[12000:24000])
	waitFor(t, 60*time.Second, "the builder's cut publication", func() bool { mu.Lock(); defer mu.Unlock(); return cutAt >= 0 })
	if err := builder.stop(t, 20*time.Second); err != nil {
		t.Fatalf("builder stop: %v", err)
	}
	waitCommittedBelow(t, br, group, input, 24000, 90*time.Second)
	newestAtKill := keyModelsOnTopic(t, br, base)
	versions := map[uint64]int{}
	for _, v := range newestAtKill {
		versions[v]++
	}
	if cutAt < 1 || len(versions) < 2 {
		t.Fatalf("the cut publication wrote %d messages, newest versions per key %v: want some keys' new models and some keys' older ones", cutAt, versions)
	}

	// The broker compacts the topic (the keys' older models go); then a scorer restarts: it
	// serves every key's newest complete model on the topic, the last of the cut publication's
	// keys and the one before it of the others.
	waitCompacted(t, br, mt)
	if got := keyModelsOnTopic(t, br, base); !maps.Equal(got, newestAtKill) {
		t.Fatalf("after compaction the topic's newest key models %v, before it %v", got, newestAtKill)
	}
	kept := 0
	for _, m := range modelTopicMessages(t, br, mt) {
		if isKeyModel(m) {
			kept++
		}
	}
	if kept != len(newestAtKill) {
		t.Fatalf("after compaction the topic holds %d key model messages, want one for each of the %d keys", kept, len(newestAtKill))
	}
	atKill := func() map[string]uint64 { return newestAtKill }
	if err := scorers[0].stop(t, 20*time.Second); err != nil {
		t.Fatalf("scorer stop: %v", err)
	}
	waitServed(t, "the other scorers taking its partitions and their keys' models (read from the compacted topic)", scorers[1:], keyPart, atKill)
	scorers[0] = startPipeline(t, scorerCfg, nil)
	waitServed(t, "the restarted scorer serving its partitions' keys' newest complete models", scorers, keyPart, atKill)

	// A new builder: its keys' models are newer, and every scorer serves them.
	builder2 := startPipeline(t, builderCfg, func(p *Pipeline) {
		p.keyPub.cut = func(msgs []kafka.Message) ([]kafka.Message, bool) {
			mu.Lock()
			defer mu.Unlock()
			record(msgs)
			return msgs, false
		}
	})
	produceSome(t, br, input, recs[24000:])
	waitCommittedBelow(t, br, group, input, len(recs), 120*time.Second)
	waitFor(t, 60*time.Second, "the new builder publishing every key's model", func() bool {
		for key, v := range onTopic() {
			if v <= newestAtKill[key] {
				return false
			}
		}
		return true
	})
	waitServed(t, "the scorers serving the new builder's keys' models", scorers, keyPart, onTopic)
	for _, s := range append(scorers, builder2) {
		if err := s.stop(t, 20*time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}

	// Every record scored by its key's model: the score that model gives it.
	mu.Lock()
	defer mu.Unlock()
	byID, n := readVerdicts(t, br, out, parts)
	byKey, flagged := 0, 0
	for _, rec := range recs {
		if rec.malformed {
			continue
		}
		v := scoredVerdict(t, byID, in, rec)
		if v.Scores.KeyModelVersion == 0 {
			continue // its key was not warm yet on the scorer: the global model scored it
		}
		byKey++
		r := all[string(rec.key)][v.Scores.KeyModelVersion]
		if r == nil {
			var have []uint64
			for v := range all[string(rec.key)] {
				have = append(have, v)
			}
			t.Fatalf("record %d/%d (%s) scored by key model version %d, which was never published (published: %v; %d keys)", rec.p, rec.off, rec.key, v.Scores.KeyModelVersion, have, len(all))
		}
		want := r.ScoreRecord(rec.means[:])
		// A flag below min_score is the alarm's deadband holding its key's episode (flag_clear),
		// and says so.
		held := strings.HasPrefix(v.Explanation, "outlier: held:") && want >= base.Detect.FlagClear*base.Detect.MinScore
		if v.Scores.Score != want || (v.Scores.Outlier && want < base.Detect.MinScore && !held) {
			t.Errorf("record %d/%d (%s), key model %d: scorer said score %v outlier %v, the model says %v (min_score %v)",
				rec.p, rec.off, rec.key, v.Scores.KeyModelVersion, v.Scores.Score, v.Scores.Outlier, want, base.Detect.MinScore)
		}
		if v.Scores.Outlier {
			flagged++
		}
	}
	if byKey < len(recs)/2 || flagged == 0 {
		t.Fatalf("%d of %d records scored by their key's model (%d flagged), want most of them and some flagged", byKey, len(recs), flagged)
	}
	t.Logf("%d outputs; %d records checked against their key's published model (%d flagged); the cut publication wrote %d messages; newest versions per key at the kill %v",
		n, byKey, flagged, cutAt, versions)
}

// TestKeyedRestartRealBroker (issue 21 item 3): a role-all pipeline with key_by and state_dir,
// stopped and started again, resumes every key warm before it reads a record (the keys' state
// written at the stop), and after the rest of the stream every key is still warm (none started
// cold again).
func TestKeyedRestartRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 3
	in, out, dlq, group, mt := roleTopics(t, br, parts)
	recs := keyedRecords(t, 12_000, parts, 83)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs[:8000])
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.ModelTopic = ""
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Detect.StateDir = t.TempDir()

	first := startPipeline(t, cfg, nil)
	waitCommittedBelow(t, br, group, input, 8000, 60*time.Second)
	if err := first.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	atStop := first.p.Detect().KeyStats()
	if atStop.Live != 64 {
		t.Fatalf("%d keys warm at the stop, want 64", atStop.Live)
	}
	second := startPipeline(t, cfg, nil)
	if st := second.p.Detect().KeyStats(); st.Live != atStop.Live || st.Bytes != atStop.Bytes || second.p.Stats().RecordsIn.Load() != 0 {
		t.Fatalf("restarted: keys %+v after %d records, want %+v before any", st, second.p.Stats().RecordsIn.Load(), atStop)
	}
	produceSome(t, br, input, recs[8000:])
	waitCommittedBelow(t, br, group, input, len(recs), 60*time.Second)
	if err := second.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := second.p.Detect().KeyStats(); st.Live != 64 || st.Warming != 0 {
		t.Fatalf("keys after the rest of the stream %+v, want the 64 warm ones", st)
	}
}

// TestKeyPublishInterval: a key's first model is due at once, a newer one only once
// run.key_publish_interval has passed since the key's last publication (then its newest model
// goes), and an evicted key's tombstone at once.
func TestKeyPublishInterval(t *testing.T) {
	p := &keyPublisher{pending: map[string]detect.KeyModel{}, wake: make(chan struct{}, 1), every: 10 * time.Second,
		published: map[string]time.Time{}}
	t0 := time.Now()
	r1, r2 := &detect.Ranker{}, &detect.Ranker{}
	p.published["warm"], p.published["gone"] = t0, t0
	p.add([]detect.KeyModel{{Key: "new", Model: r1}, {Key: "warm", Model: r1}, {Key: "gone"}})
	p.add([]detect.KeyModel{{Key: "warm", Model: r2}}) // rebuilt again before any round
	todo, waiting := p.due(t0.Add(time.Second), false)
	if len(todo) != 2 || todo["new"].Model != r1 || todo["gone"].Model != nil || !waiting {
		t.Fatalf("round 1: due %v, waiting %v: want the new key's model and the tombstone, the warm key waiting", todo, waiting)
	}
	if todo, waiting = p.due(t0.Add(9*time.Second), false); len(todo) != 0 || !waiting {
		t.Fatalf("round 2 (9 s): due %v, waiting %v: want nothing due yet", todo, waiting)
	}
	if todo, waiting = p.due(t0.Add(10*time.Second), false); len(todo) != 1 || todo["warm"].Model != r2 || waiting {
		t.Fatalf("round 3 (10 s): due %v, waiting %v: want the warm key's newest model", todo, waiting)
	}
	// A graceful stop's last round takes every pending key, due or not.
	p.published["warm"] = t0.Add(10 * time.Second)
	p.add([]detect.KeyModel{{Key: "warm", Model: r1}})
	if todo, waiting = p.due(t0.Add(11*time.Second), true); len(todo) != 1 || todo["warm"].Model != r1 || waiting {
		t.Fatalf("the stop's round (11 s): due %v, waiting %v: want the warm key's model, not due yet", todo, waiting)
	}
}

// TestKeyedRoleMessageSizeChecked: with key_by and a builder/scorer role, a sink.max_message_bytes
// that cannot carry one key's model (one message per key) is refused at start, naming what it
// needs; one that can is accepted.
func TestKeyedRoleMessageSizeChecked(t *testing.T) {
	cfg := roleConfig(testsupport.Broker{Addrs: []string{"localhost:9092"}}, "in", "out", "dl", "g", "models")
	cfg.Run.Role = "scorer"
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Sink.MaxMessageBytes = 16 << 10 // 8 features x 200 records: about 18 KB a key
	need := detect.KeyModelBound(cfg.Ingest.Columns(), &cfg.Detect, len(keyModelPrefix)+assumedKeyBytes) + modelChunkOverhead
	err := cfg.Validate()
	want := fmt.Sprintf("sink.max_message_bytes: 16384 cannot carry a key's model with detect.key_by and run.role scorer: want at least %d", need)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Validate: %v, want %q", err, want)
	}
	cfg.Sink.MaxMessageBytes = need
	if err := cfg.Validate(); err != nil {
		t.Fatalf("max_message_bytes %d refused: %v", need, err)
	}
}
