package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// Builder and scorers under faults (issue 25, and the three defects of issue 21): each test
// failed before its fix.

// roleTopics creates the input, output and dead-letter topics and a compacted model topic.
func roleTopics(t *testing.T, br testsupport.Broker, parts int) (in, out, dlq, group, mt string) {
	t.Helper()
	in, out, dlq, group, mt = testsupport.UniqueName("rf-in"), testsupport.UniqueName("rf-out"), testsupport.UniqueName("rf-dlq"),
		testsupport.UniqueName("rf-group"), testsupport.UniqueName("rf-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	createCompactedTopic(t, br, mt, 1)
	return in, out, dlq, group, mt
}

// roleConfig is the tests' builder/scorer configuration: a small window, one model (refresh off).
func roleConfig(br testsupport.Broker, in, out, dlq, group, mt string) Config {
	c := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	c.Detect.Window, c.Detect.MinRecords = 2000, 1000
	c.Detect.RefreshRecords, c.Detect.RecalibrateRecords, c.Detect.RefreshInterval = 1<<30, 1<<30, time.Hour
	c.Run.ModelTopic = mt
	c.Run.CommitInterval = 200 * time.Millisecond
	return c
}

// TestScorerHoldsBoundedAndHypercubeRealBroker (issue 21): (1) a scorer waiting for its first
// model under before_model: hold appended every fetched batch to memory: 20,000 records read
// with no model; now it stops fetching once detect.window records are held, so at most the
// window, the queues' batches and the batch in hand are read. (2) With
// detect.hypercube.enabled a scorer flagged every record (its counts, of no window, stayed
// empty); now it scores with the builder's published counts: every output has a hypercube
// verdict and few are outliers. Once the builder publishes, every record is output exactly
// once (nothing held was lost or committed unscored), scored by the builder's model.
func TestScorerHoldsBoundedAndHypercubeRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts, n = 2, 20_000
	in, out, dlq, group, mt := roleTopics(t, br, parts)
	recs := makeSensorRecords(t, n, parts, 61, 0.005, 0)
	input := newInput(in, parts, recs)
	produceSensors(t, br, input)
	base := roleConfig(br, in, out, dlq, group, mt)
	base.Detect.Hypercube.Enabled = true
	scorerCfg, builderCfg := base, base
	scorerCfg.Run.Role, builderCfg.Run.Role = "scorer", "builder"

	scorer := startPipeline(t, scorerCfg, nil)
	// Held (< window + one batch) + the fetched queue + the batch the fetch loop holds.
	bound := int64(base.Detect.Window + (base.Run.QueueBatches+2)*base.Ingest.BatchSize)
	waitFor(t, 60*time.Second, "the scorer reading past the window", func() bool {
		return scorer.p.Stats().RecordsIn.Load() >= int64(base.Detect.Window)
	})
	time.Sleep(3 * time.Second) // long enough to read all 20,000 had nothing stopped it
	if got := scorer.p.Stats().RecordsIn.Load(); got > bound {
		t.Fatalf("a scorer without a model read %d of %d records, want at most %d (detect.window %d held, the queues, one batch)",
			got, n, bound, base.Detect.Window)
	}
	if c := scorer.p.Stats().Commits.Load(); scorer.p.Stats().RecordsOut.Load() != 0 {
		t.Fatalf("records output before any model (%d commits)", c)
	}

	builder := startPipeline(t, builderCfg, nil)
	waitCommittedBelow(t, br, group, input, n, 120*time.Second)
	version := builder.p.Stats().ModelVersion.Load()
	for _, r := range []*running{scorer, builder} {
		if err := r.stop(t, 30*time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	byID, msgs := readVerdicts(t, br, out, parts)
	flagged := 0
	for _, rec := range recs {
		v, ok := byID[fmt.Sprintf("%s/%d/%d", in, rec.p, rec.off)]
		if !ok || v.Scores == nil || v.ModelVersion != version {
			t.Fatalf("record %d/%d: output %+v, want one scored by the builder's model %d", rec.p, rec.off, v, version)
		}
		h := v.Scores.Hypercube
		if h == nil {
			t.Fatalf("record %d/%d: no hypercube verdict", rec.p, rec.off)
		}
		if h.Outlier {
			flagged++
		}
	}
	if len(byID) != n || msgs != n {
		t.Errorf("%d outputs for %d distinct ids, want %d of each (complete and unique)", msgs, len(byID), n)
	}
	// 0.5% anomalies: a scorer with the builder's counts flags a few percent at most (all 100%
	// before); 5% leaves room for the sensors' sparse modes without hiding the old defect.
	if flagged > n/20 {
		t.Errorf("the hypercube flagged %d of %d records, want at most %d", flagged, n, n/20)
	}
	t.Logf("scorer read at most %d records before the model; %d outputs, %d hypercube outliers, model %d", bound, msgs, flagged, version)
}

// modelTopicMessages reads every message of the model topic, tombstones too: partition 0's,
// then each other partition's (the keys' models with detect.key_by), each in offset order.
func modelTopicMessages(t *testing.T, br testsupport.Broker, topic string) []kafka.Message {
	t.Helper()
	ps, err := kafka.DefaultDialer.LookupPartitions(context.Background(), "tcp", br.Addrs[0], topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for mp := range len(ps) {
		out = append(out, modelPartitionMessages(t, br, topic, mp)...)
	}
	return out
}

// modelPartitionMessages reads every message of the model topic's partition mp.
func modelPartitionMessages(t *testing.T, br testsupport.Broker, topic string, mp int) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", br.Addrs[0], topic, mp)
	if err != nil {
		t.Fatal(err)
	}
	first, end, err := conn.ReadOffsets()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: br.Addrs, Topic: topic, Partition: mp, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for first < end {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		if m.Offset+1 >= end {
			break
		}
	}
	return out
}

// TestModelTopicCompactionRealBroker (issue 21, issue 25 items 2 and 5): on a topic that the
// broker compacts at once, a builder's complete model A, then a publication cut short (chunk
// 0 of a newer version B only: a builder killed mid-publication). With chunk keys shared by
// every version, compaction removed A's chunk 0 and a scorer started later found no model
// (seen twice by the independent test). Now a scorer started after compaction serves A; a
// new builder numbers its model above B (B's number is never reused) and, once it is
// published, tombstones A's and B's chunks, which compaction then removes.
func TestModelTopicCompactionRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 2
	in, out, dlq, group := testsupport.UniqueName("cp-in"), testsupport.UniqueName("cp-out"), testsupport.UniqueName("cp-dlq"), testsupport.UniqueName("cp-group")
	mt := testsupport.UniqueName("cp-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	// Compaction as soon as the broker's cleaner looks (every 15 s): tiny segments rolled
	// after 100 ms, any dirty ratio, tombstones kept 100 ms.
	testsupport.CreateTopicConfigs(t, br, kafka.TopicConfig{Topic: mt, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "segment.ms", ConfigValue: "100"}, {ConfigName: "min.cleanable.dirty.ratio", ConfigValue: "0.001"},
			{ConfigName: "delete.retention.ms", ConfigValue: "100"}, {ConfigName: "min.compaction.lag.ms", ConfigValue: "0"}}})
	recs := makeSensorRecords(t, 3000, parts, 67, 0.01, 0)
	input := newInput(in, parts, recs)
	produceSensors(t, br, input)
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = "builder"
	cfg.Sink.MaxMessageBytes = 16 << 10 // several chunks

	b := startPipeline(t, cfg, nil)
	waitFor(t, 60*time.Second, "model A", func() bool { return b.p.Stats().ModelVersion.Load() != 0 })
	modelA := b.p.Detect().Model()
	waitFor(t, 30*time.Second, "model A published", func() bool { m := publishedModel(t, cfg); return m != nil && m.Version == modelA.Version })
	if err := b.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// B: a model one version up, cut short after its first chunk.
	modelB := *modelA
	modelB.Version = modelA.Version + 1
	msgsB, err := modelMessages(publication{model: &modelB}, cfg.Sink.MaxMessageBytes)
	if err != nil || len(msgsB) < 2 {
		t.Fatalf("model B: %d chunks, %v", len(msgsB), err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: mt, RequiredAcks: kafka.RequireAll, BatchSize: 1}
	defer w.Close()
	witness := func(s string) kafka.Message {
		return kafka.Message{Key: []byte("compaction-witness"), Value: []byte(s)}
	}
	if err := w.WriteMessages(context.Background(), msgsB[0], witness("1")); err != nil {
		t.Fatal(err)
	}
	// Compaction has run once the witness key's first value is gone; a message now and then
	// rolls the segment so the cleaner may take it.
	compacted := func(what string) {
		t.Helper()
		waitFor(t, 90*time.Second, what, func() bool {
			time.Sleep(200 * time.Millisecond)
			if err := w.WriteMessages(context.Background(), witness("2")); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range modelTopicMessages(t, br, mt) {
				if string(m.Value) == "1" {
					n++
				}
			}
			return n == 0
		})
	}
	compacted("the broker compacting the model topic")
	got := publishedModel(t, cfg)
	if got == nil || got.Version != modelA.Version {
		t.Fatalf("after a publication cut short and compaction, a new scorer finds model %v, want version %d (the last complete one)", got, modelA.Version)
	}

	// A new builder (other group: it reads the input again) numbers its model above B.
	cfg2 := cfg
	cfg2.Ingest.GroupID = group + "-2"
	b2 := startPipeline(t, cfg2, nil)
	waitFor(t, 60*time.Second, "the new builder's model", func() bool { return b2.p.Stats().ModelVersion.Load() != 0 })
	c := b2.p.Stats().ModelVersion.Load()
	if c <= modelB.Version {
		t.Fatalf("the new builder's version %d, want above %d (the cut-short publication's)", c, modelB.Version)
	}
	waitFor(t, 30*time.Second, "model C published", func() bool { m := publishedModel(t, cfg); return m != nil && m.Version == c })
	if err := b2.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(context.Background(), witness("1")); err != nil {
		t.Fatal(err)
	}
	compacted("the broker compacting the tombstones")
	for _, m := range modelTopicMessages(t, br, mt) {
		if string(m.Key) == "compaction-witness" || m.Value == nil {
			continue
		}
		var h string
		for _, x := range m.Headers {
			if x.Key == headerModelVersion {
				h = string(x.Value)
			}
		}
		if h != fmt.Sprint(c) {
			t.Errorf("after the tombstones and compaction the topic still holds %s (version %s), want only version %d's chunks", m.Key, h, c)
		}
	}
	if m := publishedModel(t, cfg); m == nil || m.Version != c {
		t.Fatalf("newest model after compaction %v, want %d", m, c)
	}
}

// TestBuilderVersionsRealBroker (issue 25 item 2): model versions only grow, whoever builds.
// (1) A standby builder whose state_dir holds an old version, while the topic has newer ones,
// published its state's next versions again (the scorer ignored them); now it publishes above
// the topic's newest. (2) After the topic is emptied (its records deleted), a builder without
// state_dir restarted at version 1, which a running scorer ignored; now its version is above
// every earlier one and the running scorer serves it.
func TestBuilderVersionsRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 2
	in, out, dlq, group, mt := roleTopics(t, br, parts)
	recs := makeSensorRecords(t, 6000, parts, 71, 0.01, 0)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs[:3000])
	more := recs[3000:]
	base := roleConfig(br, in, out, dlq, group, mt)
	builderCfg := func(name, stateDir string) Config {
		c := base
		c.Run.Role = "builder"
		c.Ingest.GroupID = group + "-" + name // its own builder group: it reads the whole input
		c.Detect.StateDir = stateDir
		return c
	}
	runBuilder := func(c Config) uint64 {
		t.Helper()
		b := startPipeline(t, c, nil)
		loaded := b.p.Stats().ModelVersion.Load() // from state_dir (not published again)
		polls := 0
		waitFor(t, 60*time.Second, "a model built", func() bool {
			// A refresh's model is installed at the next batch: give it batches.
			if polls++; loaded != 0 && polls%20 == 0 && len(more) >= 100 {
				produceSome(t, br, input, more[:100])
				more = more[100:]
			}
			return b.p.Stats().ModelVersion.Load() != loaded
		})
		v := b.p.Stats().ModelVersion.Load()
		waitFor(t, 30*time.Second, "its publication", func() bool { m := publishedModel(t, c); return m != nil && m.Version == v })
		if err := b.stop(t, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		return v
	}
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	v1 := runBuilder(builderCfg("a", state))
	v2 := runBuilder(builderCfg("b", ""))
	if v2 <= v1 {
		t.Fatalf("second builder's version %d, want above %d", v2, v1)
	}
	// The standby with v1 in state_dir: it serves v1 and builds its next model at a refresh.
	standby := builderCfg("c", state)
	standby.Detect.RefreshRecords = 2500
	v3 := runBuilder(standby)
	if v3 <= v2 {
		t.Fatalf("a builder with version %d in state_dir published %d, want above the topic's %d", v1, v3, v2)
	}

	scorerCfg := base
	scorerCfg.Run.Role = "scorer"
	scorer := startPipeline(t, scorerCfg, nil)
	waitFor(t, 30*time.Second, "the scorer serving the newest", func() bool { return scorer.p.Stats().ModelVersion.Load() == v3 })
	deleteAllRecords(t, br, mt)
	if m := publishedModel(t, base); m != nil {
		t.Fatalf("model %d still on the emptied topic", m.Version)
	}
	v4 := runBuilder(builderCfg("d", ""))
	if v4 <= v3 {
		t.Fatalf("after the topic was emptied a builder published %d, want above %d", v4, v3)
	}
	waitFor(t, 30*time.Second, "the running scorer serving the new model", func() bool { return scorer.p.Stats().ModelVersion.Load() == v4 })
	if err := scorer.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("versions %d, %d, %d (state_dir at %d), %d after the topic was emptied", v1, v2, v3, v1, v4)
}

// deleteAllRecords empties partition 0 of topic (DeleteRecords up to its end offset, after
// making the topic compact,delete: the broker refuses DeleteRecords on a compact-only topic),
// as retention on a compact,delete topic or an operator does.
func deleteAllRecords(t *testing.T, br testsupport.Broker, topic string) {
	t.Helper()
	ac := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	ares, err := ac.IncrementalAlterConfigs(context.Background(), &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "cleanup.policy", Value: "compact,delete", ConfigOperation: kafka.ConfigOperationSet}}}}})
	if err == nil && len(ares.Resources) == 1 {
		err = ares.Resources[0].Error
	}
	if err != nil {
		t.Fatal(err)
	}
	conn, err := kafka.DialLeader(context.Background(), "tcp", br.Addrs[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, end, err := conn.ReadOffsets()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.DeleteRecordsBelow(t, br, topic, 0, end)
}

// TestStartRetry (issue 25 item 3): the start-up read of the model topic met a passing broker
// error (a topic created a moment ago: "[6] Not Leader For Partition") and the builder exited.
// Start-up requests now go through startRetry: the broker's passing errors are retried with
// backoff, each logged with what it waits for, for a bounded time; an error no retry cures
// (authorization) fails at once.
func TestStartRetry(t *testing.T) {
	var logs testsupport.LogBuffer
	log := zerolog.New(&logs)
	passing := []error{kafka.NotLeaderForPartition, kafka.UnknownTopicOrPartition, kafka.GroupLoadInProgress, kafka.LeaderNotAvailable}
	calls := 0
	err := startRetry(context.Background(), log, 30*time.Second, "waiting for the model topic", func(context.Context) error {
		calls++
		if calls <= len(passing) {
			return fmt.Errorf("reading the model topic: %w", passing[calls-1])
		}
		return nil
	})
	if err != nil || calls != len(passing)+1 {
		t.Fatalf("after %d passing errors: %v in %d calls, want success in %d", len(passing), err, calls, len(passing)+1)
	}
	if n := strings.Count(logs.String(), "waiting for the model topic"); n != len(passing) {
		t.Errorf("%d log lines say what it waits for, want %d:\n%s", n, len(passing), logs.String())
	}
	calls = 0
	err = startRetry(context.Background(), log, 30*time.Second, "w", func(context.Context) error {
		calls++
		return kafka.TopicAuthorizationFailed
	})
	if calls != 1 || !errors.Is(err, kafka.TopicAuthorizationFailed) {
		t.Errorf("authorization refused: %d calls, %v; want one call and the error", calls, err)
	}
	start := time.Now()
	err = startRetry(context.Background(), log, 500*time.Millisecond, "w", func(context.Context) error { return kafka.NotLeaderForPartition })
	if !errors.Is(err, kafka.NotLeaderForPartition) || time.Since(start) > 3*time.Second {
		t.Errorf("a broker that never settles: %v after %s, want the error after the 500 ms bound", err, time.Since(start))
	}
}

// TestBuilderRestartAfterKillRealBroker (issue 25 item 4): a builder killed with -9 stays a
// member of its group until its session expires, and the restarted builder's join waited for
// it: the whole session timeout (30 s) before any model. Here the dead builder is a member
// that joined and then went silent; the new builder removes it before joining and builds its
// first model well within the session timeout, saying so in its log.
func TestBuilderRestartAfterKillRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 2
	in, out, dlq, group, mt := roleTopics(t, br, parts)
	produceSensors(t, br, newInput(in, parts, makeSensorRecords(t, 3000, parts, 73, 0.01, 0)))
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = "builder"
	cfg.Ingest.SessionTimeout = 30 * time.Second
	deadMember(t, br, BuilderGroup(group), in, cfg.Ingest.SessionTimeout)
	start := time.Now()
	b := startPipeline(t, cfg, nil)
	waitFor(t, 60*time.Second, "the builder's first model", func() bool { return b.p.Stats().ModelVersion.Load() != 0 })
	took := time.Since(start)
	if err := b.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The model itself takes a second or two; the dead member's session is 30 s.
	if took > cfg.Ingest.SessionTimeout/2 {
		t.Fatalf("first model %s after the start, want well within the dead member's session timeout %s", took, cfg.Ingest.SessionTimeout)
	}
	t.Logf("first model %s after the start", took.Round(time.Millisecond))
}

// deadMember makes group hold a member that consumes topic and then goes silent, as a builder
// killed with -9 leaves it: joined, assigned, no LeaveGroup, no more heartbeats.
func deadMember(t *testing.T, br testsupport.Broker, group, topic string, session time.Duration) {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	join := &kafka.JoinGroupRequest{GroupID: group, SessionTimeout: session, RebalanceTimeout: session, ProtocolType: "consumer",
		Protocols: []kafka.GroupProtocol{{Name: "range", Metadata: kafka.GroupProtocolSubscription{Topics: []string{topic}}}}}
	var res *kafka.JoinGroupResponse
	var err error
	for range 3 { // the first join of a new member answers MEMBER_ID_REQUIRED with its id
		if res, err = cl.JoinGroup(ctx, join); err == nil && res.Error == nil {
			break
		}
		if res != nil && res.MemberID != "" {
			join.MemberID = res.MemberID
		}
	}
	if err != nil || res.Error != nil {
		t.Fatalf("JoinGroup: %v %v", err, res.Error)
	}
	sync := &kafka.SyncGroupRequest{GroupID: group, GenerationID: res.GenerationID, MemberID: res.MemberID,
		ProtocolType: "consumer", ProtocolName: "range",
		Assignments: []kafka.SyncGroupRequestAssignment{{MemberID: res.MemberID,
			Assignment: kafka.GroupProtocolAssignment{AssignedPartitions: map[string][]int{topic: {0, 1}}}}}}
	if sr, err := cl.SyncGroup(ctx, sync); err != nil || sr.Error != nil {
		t.Fatalf("SyncGroup: %v %v", err, sr.Error)
	}
}

// TestMissingModelTopicRealBroker: a model topic that does not exist stops a scorer at start,
// naming run.model_topic, and nothing creates it (a broker-created topic would be
// delete-policy, which retention empties); the brokers' metadata is asked again for
// metadataSettle first, in case the topic was created a moment ago.
func TestMissingModelTopicRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	in, out, dlq, group, _ := roleTopics(t, br, 1)
	mt := testsupport.UniqueName("no-models")
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = "scorer"
	t0 := time.Now()
	_, err := New(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if err == nil || !strings.Contains(err.Error(), "run.model_topic") || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("New with the model topic missing: %v, want an error naming run.model_topic", err)
	}
	if d := time.Since(t0); d < metadataSettle || d > metadataSettle+5*time.Second {
		t.Errorf("New failed after %s, want after the %s of settling", d, metadataSettle)
	}
	if serves(br, map[string]int{mt: 1}) {
		t.Errorf("model topic %q exists after the failed start", mt)
	}
}

// TestBuilderKill9ProcessesRealBroker (issue 25 item 4, as the independent test ran it): a
// builder and a scorer as separate processes (the real binary), the builder killed with -9
// after its first model and started again at once, with a 30 s session timeout. The restarted
// builder removes its dead predecessor from the group and publishes its first model without
// waiting out that session (before: the whole 30 s, then the model), numbered above the first;
// the scorer, serving the first model throughout, takes the new one, and every record gets
// exactly one verdict.
func TestBuilderKill9ProcessesRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	bin := outlierdBinary(t)
	c := defaultE2E(br, sink.EmitAll)
	c.refreshRecords = 1 << 30
	c.sessionTimeout = 30 * time.Second
	c.heartbeat = 3 * time.Second
	const parts = 4
	mt := testsupport.UniqueName("kill-models")
	testsupport.CreateTopics(t, br, map[string]int{c.in: parts, c.out: parts, c.dlq: 1})
	createCompactedTopic(t, br, mt, 1)
	recs := makeSensorRecords(t, 8000, parts, 79, 0.01, 0)
	input := newInput(c.in, parts, recs)
	produceSome(t, br, input, recs[:4000])
	log := newChildLog(t)
	write := func(role string) string {
		y := strings.Replace(c.yaml(), "  shutdown_timeout: 20s\n", "  shutdown_timeout: 20s\n  role: "+role+"\n  model_topic: "+mt+"\n", 1)
		y = strings.Replace(y, "refresh_interval: 30s", "refresh_interval: 1h", 1)
		path := filepath.Join(t.TempDir(), role+".yaml")
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	builderCfg := write("builder")
	published := func() int { return len(log.grep(`"message":"model published"`)) }
	builder := startChild(t, bin, builderCfg, log, "builder")
	scorer := startChild(t, bin, write("scorer"), log, "scorer")
	waitFor(t, 60*time.Second, "the first model published", func() bool { return published() == 1 })
	waitCommittedBelow(t, br, c.group, input, 4000, 90*time.Second)

	builder.kill9(t)
	restart := time.Now()
	builder = startChild(t, bin, builderCfg, log, "builder (restarted)")
	produceSome(t, br, input, recs[4000:])
	waitFor(t, 60*time.Second, "the restarted builder's model published", func() bool { return published() == 2 })
	took := time.Since(restart)
	waitCommittedBelow(t, br, c.group, input, len(recs), 90*time.Second)
	for _, p := range []*child{scorer, builder} {
		if err := p.stop(t, 40*time.Second); err != nil {
			t.Fatalf("graceful stop: %v", err)
		}
	}
	if took > c.sessionTimeout/2 {
		t.Errorf("the restarted builder published %s after its start, want well within the dead member's session (%s)", took, c.sessionTimeout)
	}
	if len(log.grep("left by a previous builder")) != 1 {
		t.Error("the restarted builder did not say it removed its predecessor's member")
	}
	byID, n := readVerdicts(t, br, c.out, parts)
	versions := map[uint64]int{}
	for _, rec := range recs {
		v, ok := byID[fmt.Sprintf("%s/%d/%d", c.in, rec.p, rec.off)]
		if !ok || v.Scores == nil {
			t.Fatalf("record %d/%d: output %+v, want a scored verdict", rec.p, rec.off, v)
		}
		versions[v.ModelVersion]++
	}
	if len(byID) != len(recs) {
		t.Errorf("%d distinct outputs for %d records", len(byID), len(recs))
	}
	// The two publications, in order: the restarted builder's numbered above the first, and
	// the scorer serving it.
	var pubs []uint64
	for _, l := range log.grep(`"message":"model published"`) {
		var e struct {
			V uint64 `json:"model_version"`
		}
		if i := strings.Index(l, "{"); i >= 0 && json.Unmarshal([]byte(l[i:]), &e) == nil {
			pubs = append(pubs, e.V)
		}
	}
	if len(pubs) != 2 || pubs[1] <= pubs[0] {
		t.Fatalf("versions published %v, want two, the restarted builder's above the first", pubs)
	}
	if len(log.grep(fmt.Sprintf(`"model_version":%d,"age_s"`, pubs[1]))) != 1 {
		t.Errorf("the scorer did not install the restarted builder's model %d", pubs[1])
	}
	for v := range versions {
		if !slices.Contains(pubs, v) {
			t.Errorf("outputs scored by version %d, which was not published (%v)", v, pubs)
		}
	}
	t.Logf("restarted builder published %s after its start; %d outputs for %d records; versions %v", took.Round(time.Millisecond), n, len(recs), versions)
}
