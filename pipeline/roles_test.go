package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// createCompactedTopic creates a topic of partitions partitions with cleanup.policy=compact (the
// model topic as docs/OPERATIONS.md says to create it: one partition, or input + 1 under
// detect.key_by) and waits for its leader.
func createCompactedTopic(tb testing.TB, br testsupport.Broker, name string, partitions int) {
	tb.Helper()
	testsupport.CreateTopicConfigs(tb, br, kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}})
}

// publishedModel reads the newest model of the model topic as a scorer would.
func publishedModel(t *testing.T, cfg Config) *detect.Model {
	t.Helper()
	if f := published(t, cfg); f != nil {
		return f.model
	}
	return nil
}

// published reads the newest model of the model topic and its hypercube counts.
func published(t *testing.T, cfg Config) *followed {
	t.Helper()
	f, err := newModelFollower(cfg.modelTopic(), cfg.Ingest.Features, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := f.newest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBuilderAndScorersRealBroker: one builder and three scorers on a 6-partition topic.
//   - every record gets exactly one verdict (de-duplicated by id), the verdict the published
//     model gives it (recomputed here from the model read back from the topic: what a single
//     process serving that model would say), naming the model's global version;
//   - the builder stopped, the scorers keep serving the last model and lose nothing;
//   - a restarted scorer serves the newest model at once, before any new record;
//   - a corrupt message on the model topic is skipped, and a new builder continues the
//     version sequence (a version above the first's and above the corrupt message's), which
//     the scorers then serve.
func TestBuilderAndScorersRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 6
	in, out, dlq, group, mt := testsupport.UniqueName("role-in"), testsupport.UniqueName("role-out"), testsupport.UniqueName("role-dlq"), testsupport.UniqueName("role-group"), testsupport.UniqueName("role-models")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	createCompactedTopic(t, br, mt, 1)
	recs := makeSensorRecords(t, 20_000, parts, 51, 0.01, 0.005)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs[:8000])

	base := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	base.Detect.MinRecords, base.Detect.RefreshRecords, base.Detect.RecalibrateRecords, base.Detect.RefreshInterval = 3000, 1<<30, 1<<30, time.Hour
	base.Run.ModelTopic = mt
	base.Run.CommitInterval = 200 * time.Millisecond
	builderCfg, scorerCfg := base, base
	builderCfg.Run.Role, scorerCfg.Run.Role = "builder", "scorer"
	// A model split into many chunks: the reassembly is exercised on every publication.
	builderCfg.Sink.MaxMessageBytes = 16 << 10

	builder := startPipeline(t, builderCfg, nil)
	waitFor(t, 60*time.Second, "builder's first model", func() bool { return builder.p.Stats().ModelVersion.Load() != 0 })
	v1 := builder.p.Stats().ModelVersion.Load()
	scorers := make([]*running, 3)
	for i := range scorers {
		scorers[i] = startPipeline(t, scorerCfg, nil)
	}
	waitCommittedBelow(t, br, group, input, 8000, 90*time.Second)

	// The builder dies; the scorers serve on with model v1.
	if err := builder.stop(t, 20*time.Second); err != nil {
		t.Fatalf("builder stop: %v", err)
	}
	produceSome(t, br, input, recs[8000:12000])
	waitCommittedBelow(t, br, group, input, 12000, 90*time.Second)

	// A scorer restarts: the model is installed before it reads any record.
	if err := scorers[0].stop(t, 20*time.Second); err != nil {
		t.Fatalf("scorer stop: %v", err)
	}
	scorers[0] = startPipeline(t, scorerCfg, nil)
	waitFor(t, 20*time.Second, "the restarted scorer serving model v1", func() bool {
		return scorers[0].p.Stats().ModelVersion.Load() == v1 && scorers[0].p.Stats().RecordsIn.Load() == 0
	})

	// A corrupt model message, then a new builder: it continues above v1.
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: mt, RequiredAcks: kafka.RequireAll}
	err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte(modelKeyPrefix + "0"), Value: []byte("not a model"),
		Headers: []kafka.Header{{Key: headerModelVersion, Value: []byte("99")}, {Key: headerModelChunk, Value: []byte("0/1")},
			{Key: headerModelSHA256, Value: []byte("00000000000000000000000000000000000000000000000000000000000000ff")}}})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	builder2 := startPipeline(t, builderCfg, nil)
	produceSome(t, br, input, recs[12000:])
	waitFor(t, 60*time.Second, "the new builder's model", func() bool { return builder2.p.Stats().ModelVersion.Load() != 0 })
	v2 := builder2.p.Stats().ModelVersion.Load()
	if v2 <= max(v1, 99) {
		t.Fatalf("the new builder's version %d, want above %d (the first builder's) and 99 (the corrupt message's)", v2, v1)
	}
	waitCommittedBelow(t, br, group, input, len(recs), 90*time.Second)
	waitFor(t, 30*time.Second, "every scorer serving model v2", func() bool {
		for _, s := range scorers {
			if s.p.Stats().ModelVersion.Load() != v2 {
				return false
			}
		}
		return true
	})
	model2 := publishedModel(t, builderCfg)
	if model2 == nil || model2.Version != v2 {
		t.Fatalf("newest published model %v, want version %d (the corrupt message skipped)", model2, v2)
	}
	for _, s := range append(scorers, builder2) {
		if err := s.stop(t, 20*time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}

	// Every valid record: one verdict, the one its model gives.
	byID, n := readVerdicts(t, br, out, parts)
	models := map[uint64]*detect.Model{v2: model2}
	byModel := map[uint64][]*sensorRecord{}
	for _, rec := range recs {
		if rec.malformed {
			continue
		}
		v := scoredVerdict(t, byID, in, rec)
		byModel[v.ModelVersion] = append(byModel[v.ModelVersion], rec)
	}
	if len(byModel[v1]) < 10000 {
		t.Fatalf("model v1 scored %d records, want the first 12000's valid ones (versions seen: %d)", len(byModel[v1]), len(byModel))
	}
	for v := range byModel {
		if v != v1 && v != v2 {
			t.Fatalf("records scored by model %d: only %d and %d were published", v, v1, v2)
		}
	}
	// Model v1 is recomputed from the builder's own copy: the one the scorers served.
	models[v1] = builder.p.Detect().Model()
	if models[v1] == nil || models[v1].Version != v1 {
		t.Fatal("the first builder's model is gone")
	}
	dp := density.Params{Eta: base.Detect.Density.Eta, Delta: base.Detect.Density.Delta, Samples: base.Detect.Density.Samples,
		Mode: density.Independent, Seed: base.Detect.Seed, Exact: true}
	checked := 0
	for v, rs := range byModel {
		// Records of the builder's window are its members by identity, in the scorers too.
		mem := models[v].Members
		member := func(r *sensorRecord) bool {
			for _, pr := range mem.Ranges {
				if pr.Partition == r.p && r.off >= pr.Lo && r.off <= pr.Hi && mem.Topic == in {
					return true
				}
			}
			return false
		}
		want := scoreWith(t, models[v], rs, dp, member)
		for _, rec := range rs {
			got := byID[fmt.Sprintf("%s/%d/%d", in, rec.p, rec.off)]
			w := want[rec]
			if got.Scores.Outlier != w.outlier || got.Scores.Weight != w.weight || got.Scores.DensityOutlier != w.density.Outlier {
				t.Errorf("record %d/%d, model %d: scorer said %+v, the model says outlier %v weight %v density %v",
					rec.p, rec.off, v, *got.Scores, w.outlier, w.weight, w.density.Outlier)
			}
			checked++
		}
	}
	t.Logf("%d outputs, %d distinct records checked against models %d (%d records) and %d (%d records)", n, checked, v1, len(byModel[v1]), v2, len(byModel[v2]))
}

// waitCommittedBelow waits until the scoring group's committed offsets cover the first upto
// records produced (each partition's highest offset among them, plus one).
func waitCommittedBelow(t testing.TB, br testsupport.Broker, group string, in *sensorInput, upto int, limit time.Duration) {
	t.Helper()
	need := make([]int64, in.parts)
	for _, r := range in.records[:upto] {
		need[r.p] = max(need[r.p], r.off+1)
	}
	var last []int64 // what the group had committed at the last look, for the failure message
	defer func() {
		if t.Failed() {
			t.Logf("group %s: committed %v, needed %v", group, last, need)
		}
	}()
	waitFor(t, limit, fmt.Sprintf("group %s committing the first %d records", group, upto), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := testsupport.CommittedOffsets(ctx, br, group, in.topic, in.parts)
		if err != nil {
			return false
		}
		last = c
		for p := range c {
			if c[p] < need[p] {
				return false
			}
		}
		return true
	})
}

// TestRolesSeveralProcessesRealBroker: the roles as separate OS processes (the real binary,
// `outlierd run` with the same config file but run.role): one builder and two scorers on a
// 4-partition topic. Every valid record gets a scored output from a scorer, named by the
// global model version the builder published (one: refresh is off), and the scoring group commits
// the whole topic; the builder's own group reads it all too.
func TestRolesSeveralProcessesRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	bin := outlierdBinary(t)
	c := defaultE2E(br, sink.EmitAll)
	c.refreshRecords = 1 << 30
	const parts = 4
	mt := testsupport.UniqueName("proc-models")
	testsupport.CreateTopics(t, br, map[string]int{c.in: parts, c.out: parts, c.dlq: 1})
	createCompactedTopic(t, br, mt, 1)
	input := newInput(c.in, parts, makeSensorRecords(t, 6000, parts, 71, 0.01, 0.005))
	produceSensors(t, br, input)
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
	builderStart := time.Now()
	builder := startChild(t, bin, write("builder"), log, "builder")
	scorerCfg := write("scorer")
	scorers := []*child{startChild(t, bin, scorerCfg, log, "scorer 1"), startChild(t, bin, scorerCfg, log, "scorer 2")}
	valid := 0
	for _, r := range input.records {
		if !r.malformed {
			valid++
		}
	}
	waitCommittedBelow(t, br, c.group, input, len(input.records), 120*time.Second)
	waitCommittedBelow(t, br, BuilderGroup(c.group), input, len(input.records), 60*time.Second)
	for _, s := range append(scorers, builder) {
		if err := s.stop(t, 40*time.Second); err != nil {
			t.Fatalf("graceful stop: %v", err)
		}
	}
	byID, n := readVerdicts(t, br, c.out, parts)
	versions := map[uint64]int{}
	for _, rec := range input.records {
		if rec.malformed {
			continue
		}
		v, ok := byID[fmt.Sprintf("%s/%d/%d", c.in, rec.p, rec.off)]
		if !ok || v.Scores == nil {
			t.Fatalf("record %d/%d: output %v, want a scored verdict", rec.p, rec.off, v)
		}
		versions[v.ModelVersion]++
	}
	if len(versions) != 1 {
		t.Errorf("model versions of the outputs %v, want all %d from the builder's one model", versions, valid)
	}
	for v, k := range versions { // the builder's only model: one version, above the clock at its start
		if k != valid || v < uint64(builderStart.UnixMilli()) {
			t.Errorf("version %d scored %d records, want all %d by a version above the builder's start (%d ms)", v, k, valid, builderStart.UnixMilli())
		}
	}
	if got := len(log.grep(`"message":"model published"`)); got != 1 {
		t.Errorf("%d publications logged, want 1", got)
	}
	t.Logf("%d outputs for %d valid records, versions %v", n, valid, versions)
}
