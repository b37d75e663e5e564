package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// features21 is a flow list of 21 feature names, one more than exhaustive roll-up accepts.
var features21 = func() string {
	names := make([]string, density.MaxRollupDims+1)
	for i := range names {
		names[i] = fmt.Sprintf("f%02d", i+1)
	}
	return "[" + strings.Join(names, ", ") + "]"
}()

// sections of a valid config, to build the bad ones from (line numbers in the cases count them).
const (
	ingestOK = "ingest:\n  brokers: [\"localhost:9092\"]\n  topic: in\n  group_id: g\n  features: [a, b]\n" // lines 1-5
	sinkOK   = "sink:\n  brokers: [\"localhost:9092\"]\n  topic: out\n  dead_letter_topic: dl\n"            // 4 lines
)

// TestConfigErrorsNameKeyAndPosition: every problem of a config file is one line
// "file:line:column: key: message", the key with its full dotted path and the position of that
// key in the file (of its section when the key is left out); a config that cannot run (roll-up
// over more than 20 features) is refused here, by lint, not at the first batch.
func TestConfigErrorsNameKeyAndPosition(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		yaml string
		want []string // the exact lines of the error
	}{
		{"rollup over 21 features", "ingest:\n  brokers: [\"localhost:9092\"]\n  topic: in\n  group_id: g\n  features: " + features21 + "\ndetect:\n  density:\n    mode: rollup\n" + sinkOK,
			[]string{"c.yaml:8:5: detect.density.mode: rollup tests all 2^r - 1 subspaces of the r features and accepts at most r = 20, but ingest.features has 21 (use independent, restricted or averaging)"}},
		{"group_id empty", "ingest:\n  brokers: [\"localhost:9092\"]\n  topic: in\n  group_id: \"\"\n  features: [a, b]\n" + sinkOK,
			[]string{"c.yaml:4:3: ingest.group_id: required"}},
		{"topic left out: its section", "ingest:\n  brokers: [\"localhost:9092\"]\n  group_id: g\n  features: [a, b]\n" + sinkOK,
			[]string{"c.yaml:1:1: ingest.topic: required"}},
		{"feature reserved, and emit and eta", ingestOK + "detect:\n  density:\n    eta: 7\n" + sinkOK + "  emit: \"alll\"\n",
			[]string{"c.yaml:8:5: detect.density.eta: must be in (0, 1], got 7", `c.yaml:13:3: sink.emit: "alll", want "outliers" or "all"`}},
		{"feature element", "ingest:\n  brokers: [\"localhost:9092\"]\n  topic: in\n  group_id: g\n  features:\n    - a\n    - _b\n" + sinkOK,
			[]string{`c.yaml:7:7: ingest.features[1]: "_b" starts with "_", reserved for the coordinate columns`}},
		{"broker element", "ingest:\n  brokers: [\"localhost:9092\", nohost]\n  topic: in\n  group_id: g\n  features: [a, b]\n" + sinkOK,
			[]string{`c.yaml:2:31: ingest.brokers[1]: "nohost" is not host:port`}},
		// ${KAFKA_BROKERS} set to a comma-separated list (the usual form of the variable) in one
		// list item: the message says how to give several.
		{"brokers joined by a comma", "ingest:\n  brokers: [\"a:9092,b:9092\"]\n  topic: in\n  group_id: g\n  features: [a, b]\nsink:\n  brokers: [\"a:9092, b:9092\"]\n  topic: out\n  dead_letter_topic: dl\n",
			[]string{`c.yaml:2:13: ingest.brokers[0]: "a:9092,b:9092" is not host:port (one address per list item: [a:9092, b:9092])`,
				`c.yaml:7:13: sink.brokers[0]: "a:9092, b:9092" is not host:port (one address per list item: [a:9092, b:9092])`}},
		// sink.brokers and sink.security left out are ingest's: a problem of theirs is ingest's
		// alone. It was reported twice, the second time at the sink section's line as
		// "sink.brokers[0]" or "sink.security...", keys the file does not have.
		{"ingest's brokers and security, inherited by the sink", "ingest:\n  brokers: [\"h:99999\"]\n  topic: in\n  group_id: g\n  features: [a]\n" +
			"  security:\n    sasl: {mechanism: plain, username: u, password: p}\nsink:\n  topic: out\n  dead_letter_topic: dl\n",
			[]string{`c.yaml:2:13: ingest.brokers[0]: "h:99999" is not host:port`,
				"c.yaml:7:12: ingest.security.sasl.mechanism: plain sends the password to the broker as is: enable tls (or use scram-sha-256/scram-sha-512)"}},
		{"sink's own brokers judged", "ingest:\n  brokers: [\"h:99999\"]\n  topic: in\n  group_id: g\n  features: [a]\nsink:\n  brokers: [\"h:99999\"]\n  topic: out\n  dead_letter_topic: dl\n",
			[]string{`c.yaml:2:13: ingest.brokers[0]: "h:99999" is not host:port`, `c.yaml:7:13: sink.brokers[0]: "h:99999": port must be 1..65535`}},
		{"device, run, http", "device: gpu\n" + ingestOK + sinkOK + "run:\n  queue_batches: 0\nhttp:\n  lag_interval: 1ms\n",
			[]string{
				`c.yaml:1:1: device: must be auto, cpu or cuda, got "gpu"`,
				"c.yaml:12:3: run.queue_batches: must be >= 1, got 0",
				"c.yaml:14:3: http.lag_interval: must be >= 100ms (shorter only loads the brokers), got 1ms",
			}},
		// A bad window alone: min_records, clusters, k, n and proclus.k, left out, follow it
		// (Derive), and each was refused at the section for the window's value.
		{"window out of range, the keys that follow it left out", ingestOK + "detect:\n  window: -5\n" + sinkOK,
			[]string{"c.yaml:7:3: detect.window: must be in [2, 2147483647], got -5"}},
		{"min_records out of range, the keys that follow it left out", ingestOK + "detect:\n  min_records: 1\n" + sinkOK,
			[]string{"c.yaml:7:3: detect.min_records: must be in [2, window=50000], got 1"}},
		{"flag_clear out of [0, 1)", ingestOK + "detect:\n  flag_clear: 3.5\n" + sinkOK,
			[]string{"c.yaml:7:3: detect.flag_clear: must be in [0, 1) (a share of min_score; 0: off), got 3.5"}},
		{"min_records above the window", ingestOK + "detect:\n  window: 1000\n  min_records: 5000\n" + sinkOK,
			[]string{"c.yaml:8:3: detect.min_records: must be in [2, window=1000], got 5000"}},
		{"sink topic is the input topic", ingestOK + "sink:\n  brokers: [\"localhost:9092\"]\n  topic: in\n  dead_letter_topic: dl\n",
			[]string{`c.yaml:8:3: sink.topic: "in" is the input topic: outputs would be read back as input`}},
		// Accepted, each malformed record was dead-lettered onto the input, read again, failed
		// again: a loop that never ends, the topic growing by one copy a turn.
		{"dead-letter topic is the input topic", ingestOK + "sink:\n  brokers: [\"localhost:9092\"]\n  topic: out\n  dead_letter_topic: in\n",
			[]string{`c.yaml:9:3: sink.dead_letter_topic: "in" is the input topic: dead letters would be read back as input, fail again and be written again, without end`}},
		{"tls keys while tls is off", ingestOK + "  security:\n    tls:\n      ca_file: /x.pem\n" + sinkOK,
			[]string{"c.yaml:7:5: ingest.security.tls.enabled: false, but tls.ca_file set: set tls.enabled: true, or remove them"}},
		{"state_dir is a file", ingestOK + "detect:\n  state_dir: " + notDir + "\n" + sinkOK,
			[]string{fmt.Sprintf("c.yaml:7:3: detect.state_dir: %q is not a directory", notDir)}},
		// 1ns ran the commit loop flat out: a core at 100%, and 49.5M commits counted in 13 s.
		{"commit interval below its floor", ingestOK + sinkOK + "run:\n  commit_interval: 1ns\n",
			[]string{"c.yaml:11:3: run.commit_interval: must be >= 10ms (shorter only loads the brokers and a core), got 1ns"}},
		// 1ns rebuilt the model back to back while records arrived, and with detect.key_by and
		// state_dir saved the keys' state (1.27 GB at 100,000 keys) with each model.
		{"refresh interval below its floor", ingestOK + "detect:\n  refresh_interval: 1ns\n" + sinkOK,
			[]string{"c.yaml:7:3: detect.refresh_interval: must be >= 1s (shorter rebuilds the model back to back while records arrive, and with key_by and state_dir saves the keys' state with each model), got 1ns"}},
		// 1ns made the scorers unready at every rebuild, while the builder built and published.
		{"stale model age below its floor", ingestOK + sinkOK + "run:\n  stale_model_after: 1ns\n",
			[]string{"c.yaml:11:3: run.stale_model_after: must be 0 (off) or >= 10s (shorter than a rebuild, its publication and the scorers' read of it made the scorers unready at every rebuild), got 1ns"}},
		// Accepted, each record's value was read as its own uncertainty.
		{"a feature's uncertainty field is the feature", ingestOK + "  uncertainty:\n    fields: {a: a, b: eb}\n" + sinkOK,
			[]string{`c.yaml:7:14: ingest.uncertainty.fields["a"]: "a" is the feature's own field: name the field that holds its uncertainty (a standard deviation), or leave the feature out of fields`}},
		// 1ns: every produce timed out, and the sink waited for the broker as if it were down.
		{"write timeout below its floor", ingestOK + sinkOK + "  write_timeout: 1ns\n",
			[]string{"c.yaml:10:3: sink.write_timeout: 1ns, want >= 10ms (an acks=all produce waits for the replicas: shorter timed every write out, retried as for a broker outage without end)"}},
		// 1ns abandoned every stop's drain and final commit at once.
		{"shutdown timeout below its floor", ingestOK + sinkOK + "run:\n  shutdown_timeout: 1ns\n",
			[]string{"c.yaml:11:3: run.shutdown_timeout: must be >= 100ms (shorter cannot hold the drain's flush and the final commit: every stop's work was abandoned), got 1ns"}},
		{"log level", ingestOK + sinkOK + "run:\n  log_level: loud\n",
			[]string{`c.yaml:11:3: run.log_level: "loud", want debug, info, warn or error`}},
		{"input topic name Kafka refuses", "ingest:\n  brokers: [\"localhost:9092\"]\n  topic: \"in put\"\n  group_id: g\n  features: [a, b]\n" + sinkOK,
			[]string{`c.yaml:3:3: ingest.topic: "in put": Kafka topic names use only [a-zA-Z0-9._-]`}},
		{"key at its parent's level", ingestOK + "detect:\n  density:\n  eta: 0.3\n" + sinkOK,
			[]string{"c.yaml:8:3: unknown key `eta` in detect; `eta` is a key of detect.density: indent it under density"}},
		{"value of the wrong type", ingestOK + "detect:\n  distance:\n    k: many\n" + sinkOK,
			[]string{"c.yaml:8:8: detect.distance.k: expected a whole number (such as 1000), got `many`"}},
		{"key indented under the wrong parent", ingestOK + "sink:\n  brokers: [\"localhost:9092\"]\n  topic: out\n dead_letter_topic: dl\n",
			[]string{"c.yaml:9:2: YAML syntax: did not find expected key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfigBytes("c.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("config accepted, want:\n%s", strings.Join(tc.want, "\n"))
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// wideConfig is a pipeline over kfake reading a stream of 21 features f01..f21 (JSON), small
// enough to build its first model from a few hundred records.
func wideConfig(br testsupport.Broker, in, out, dlq, group string) Config {
	cfg := Default()
	cfg.Device = "cpu"
	cfg.Ingest.Brokers, cfg.Ingest.Topic, cfg.Ingest.GroupID = br.Addrs, in, group
	cfg.Ingest.Features = strings.Split(strings.Trim(strings.ReplaceAll(features21, " ", ""), "[]"), ",")
	cfg.Ingest.BatchSize, cfg.Ingest.MaxWait = 100, 20*time.Millisecond
	cfg.Sink.Brokers, cfg.Sink.Topic, cfg.Sink.DeadLetterTopic, cfg.Sink.Emit = br.Addrs, out, dlq, "all"
	d := &cfg.Detect
	d.Window, d.MinRecords, d.RefreshRecords, d.RecalibrateRecords, d.RefreshInterval = 600, 300, 1<<30, 1<<30, time.Hour
	d.Density.Clusters, d.Density.Iterations, d.Density.Samples = 20, 2, 50
	d.Distance.K, d.Distance.N, d.Distance.M = 5, 5, 20
	d.FlagBy = detect.FlagByVerdicts // the tests check the paper's verdicts and the combine rule
	cfg.HTTP.Listen = ""
	return cfg
}

// TestRollupOverTwentyFeaturesRefusedAtStart: pipeline.New refuses roll-up over 21 features
// (before, it started and stopped at the first scored batch); 20 features are accepted.
func TestRollupOverTwentyFeaturesRefusedAtStart(t *testing.T) {
	cfg := wideConfig(testsupport.Broker{Addrs: []string{"localhost:9092"}}, "in", "out", "dl", "g")
	cfg.Detect.Density.Mode = "rollup"
	_, err := New(context.Background(), cfg, zerolog.Nop())
	want := "detect.density.mode: rollup tests all 2^r - 1 subspaces of the r features and accepts at most r = 20, but ingest.features has 21"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: got %v, want an error containing %q", err, want)
	}
	cfg.Ingest.Features = cfg.Ingest.Features[:density.MaxRollupDims]
	if err := cfg.Validate(); err != nil {
		t.Fatalf("rollup over %d features refused: %v", density.MaxRollupDims, err)
	}
}

// TestReloadRefusesRollupOverTwentyFeatures: a running pipeline over 21 features is reloaded
// with detect.density.mode: rollup (a live key). The reload is refused naming the key at its
// file:line:column, the running configuration stays, and the pipeline keeps scoring (before,
// the reload applied and the pipeline stopped at the next batch). On kfake, and on the real
// broker of KAFKA_BOOTSTRAP (make test).
func TestReloadRefusesRollupOverTwentyFeatures(t *testing.T) {
	t.Run("kfake", func(t *testing.T) { reloadRefusesRollup(t, testsupport.KfakeBroker(t)) })
	t.Run("kafka", func(t *testing.T) { reloadRefusesRollup(t, testsupport.RealBroker(t)) })
}

func reloadRefusesRollup(t *testing.T, br testsupport.Broker) {
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	cfg := wideConfig(br, in, out, dlq, group)
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	saveConfig(t, path, cfg)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var rl *Reloader
	run := startPipeline(t, cfg, func(p *Pipeline) { rl = NewReloader(p, path, zerolog.Nop()) })
	cl := testsupport.NewProducer(t, br)
	defer cl.Close()
	rng := rand.New(rand.NewPCG(15, 4))
	produced := 0
	produce := func(n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			var b strings.Builder
			b.WriteByte('{')
			for j, f := range cfg.Ingest.Features {
				if j > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%q:%.4f", f, rng.NormFloat64())
			}
			b.WriteByte('}')
			recs[i] = &kgo.Record{Topic: in, Partition: 0, Value: []byte(b.String())}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced += n
		deadline := time.Now().Add(30 * time.Second)
		for run.p.Stats().RecordsOut.Load() < int64(produced) {
			select {
			case <-run.done:
				t.Fatalf("the pipeline stopped after %d of %d records: %v", run.p.Stats().RecordsOut.Load(), produced, run.err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d records out after 30 s", run.p.Stats().RecordsOut.Load(), produced)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	produce(400) // the first model is built from 300 and scores every record
	if run.p.Detect().Model() == nil {
		t.Fatal("no model after 400 records")
	}

	bad := cfg
	bad.Detect.Density.Mode = "rollup"
	text := saveConfig(t, path, bad)
	line, col := 0, 0
	for i, l := range strings.Split(string(text), "\n") {
		if k := strings.Index(l, "mode: rollup"); k >= 0 {
			line, col = i+1, k+1
		}
	}
	_, err = rl.Reload(context.Background())
	want := fmt.Sprintf("%s:%d:%d: detect.density.mode: rollup tests all 2^r - 1 subspaces", path, line, col)
	if !errors.Is(err, ErrReloadRejected) || !strings.Contains(err.Error(), want) {
		t.Fatalf("reload: got %v, want ErrReloadRejected containing %q", err, want)
	}
	if got := rl.Config().Detect.Density.Mode; got != "independent" {
		t.Errorf("running config's mode is %q after the refused reload, want independent", got)
	}
	produce(400) // still scoring with the running configuration
	if err := run.stop(t, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
