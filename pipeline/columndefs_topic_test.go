package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestModelTopicCarriesDerivedDefinitions: a builder and its scorers must derive the same
// columns, and during a rollout of a derive change they do not: the builder (restarted first)
// publishes models of a column d = diff of hum while the scorers still compute d = diff of
// temp, or the other way round. The scorers matched the models by the columns' names alone and
// served them, scoring their own d against a model of another d, silently. Now the global
// model's chunks and every key's model carry the derived columns' definitions (header
// outlierd-columns), and a scorer that derives them otherwise skips the model, logged with both
// definitions (it keeps the model it has until it is restarted with the builder's derive); one
// that derives them alike takes it.
func TestModelTopicCarriesDerivedDefinitions(t *testing.T) {
	br, mt, cfg := derivedDefsTopic(t, "cd-models")
	cfg.Ingest.Features = []string{"temp", "hum"}
	derive := func(of string) *ingest.Derive {
		return &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: of, Name: "d"}}}
	}
	builder, same, other := cfg, cfg, cfg
	builder.Ingest.Derive, same.Ingest.Derive, other.Ingest.Derive = derive("hum"), derive("hum"), derive("temp")
	cols := builder.Ingest.Columns()

	// The global model.
	ctx := publishGlobalModel(t, builder, cols)
	for _, c := range []derivedCase{{"same derive", same, true}, {"other derive", other, false}} {
		var logs testsupport.LogBuffer
		got := newestModel(t, ctx, c.cfg, &logs)
		if (got != nil) != c.taken {
			t.Errorf("%s: the builder's global model taken %v, want %v; log: %s", c.name, got != nil, c.taken, logs.String())
		}
		if !c.taken && (!strings.Contains(logs.String(), "d: diff of hum") || !strings.Contains(logs.String(), "d: diff of temp")) {
			t.Errorf("%s: the skip does not name both definitions: %s", c.name, logs.String())
		}
	}

	// A key's model.
	publishKeyModel(t, ctx, builder, cols)
	var keyMsgs int
	for _, c := range []derivedCase{{"same derive", same, true}, {"other derive", other, false}} {
		var logs testsupport.LogBuffer
		read, taken := keysTaken(c.cfg, modelTopicMessages(t, br, mt), &logs)
		keyMsgs += read
		if (taken == 1) != c.taken {
			t.Errorf("%s: the key's model taken %v, want %v; log: %s", c.name, taken == 1, c.taken, logs.String())
		}
		if !c.taken && !strings.Contains(logs.String(), "d: diff of temp") {
			t.Errorf("%s: the skip does not name the definitions: %s", c.name, logs.String())
		}
	}
	if keyMsgs != 2 {
		t.Fatalf("%d key model messages read, want 1 per reader", keyMsgs)
	}
}

// TestModelTopicBuilderWithoutDerive: a builder without ingest.derive wrote no outlierd-columns
// header, and a scorer took a message without it as one of a release before the header,
// matched by the columns' names alone. A builder reading a field d as a feature (the producer
// now sends its own d) and a scorer still deriving d = diff of temp have the same column names,
// so the scorer served the builder's models of the field for its differences (failed before
// the fix: the global model and the key's model taken). A builder now always writes the
// header, empty without derive, and a scorer that derives refuses an empty one; the header's
// absence (a builder of an earlier release) still tells nothing, and an empty one is taken by a
// scorer without derive.
func TestModelTopicBuilderWithoutDerive(t *testing.T) {
	br, mt, cfg := derivedDefsTopic(t, "cd-nodrv")
	builder, deriving, plain := cfg, cfg, cfg
	builder.Ingest.Features, builder.Ingest.Derive = []string{"temp", "hum", "d"}, nil
	plain.Ingest.Features, plain.Ingest.Derive = []string{"temp", "hum", "d"}, nil
	deriving.Ingest.Features = []string{"temp", "hum"}
	deriving.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
	cols := builder.Ingest.Columns()
	if !slices.Equal(cols, deriving.Ingest.Columns()) {
		t.Fatalf("(the columns' names differ: %v, %v)", cols, deriving.Ingest.Columns())
	}
	ctx := publishGlobalModel(t, builder, cols)
	publishKeyModel(t, ctx, builder, cols)
	msgs := modelTopicMessages(t, br, mt)
	for _, c := range []derivedCase{{"a scorer deriving d", deriving, false}, {"a scorer reading d", plain, true}} {
		var logs testsupport.LogBuffer
		got := newestModel(t, ctx, c.cfg, &logs)
		if (got != nil) != c.taken {
			t.Errorf("%s: the global model of a builder without derive taken %v, want %v; log: %s", c.name, got != nil, c.taken, logs.String())
		}
		if _, taken := keysTaken(c.cfg, msgs, &logs); (taken == 1) != c.taken {
			t.Errorf("%s: the key's model of a builder without derive taken %v, want %v; log: %s", c.name, taken == 1, c.taken, logs.String())
		}
	}
	// A message without the header (an earlier release's builder) tells nothing.
	if err := derivedMismatch("", false, derivedDefs(deriving.Ingest)); err != nil {
		t.Errorf("a message without the header refused: %v", err)
	}
}

// derivedCase is a scorer's configuration and whether it takes the builder's models.
type derivedCase struct {
	name  string
	cfg   Config
	taken bool
}

// derivedDefsTopic is a kfake broker, a model topic of 2 partitions named from prefix, and the
// role configuration of the derived columns' tests over them (no uncertainty, flagged by
// significance, a model per key).
func derivedDefsTopic(t *testing.T, prefix string) (testsupport.Broker, string, Config) {
	t.Helper()
	br := testsupport.KfakeBroker(t)
	mt := testsupport.UniqueName(prefix)
	createCompactedTopic(t, br, mt, 2)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	cfg.Ingest.Uncertainty = nil
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	return br, mt, cfg
}

// publishGlobalModel publishes on builder's model topic a global model of version 7 over cols
// (600 synthetic rows of seed 1, window 600, 20 clusters, k = n = 10) and returns the context
// (30 s, ended with the test) the test reads it with.
func publishGlobalModel(t *testing.T, builder Config, cols []string) context.Context {
	t.Helper()
	dc := detect.Default()
	dc.Window, dc.MinRecords = 600, 600
	dc.Density.Clusters, dc.Distance.K, dc.Distance.N = 20, 10, 10
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims, p.Seed = 600, len(cols), 1
	d := synth.One(p)
	m, err := detect.Build(d.Cols, d.SD, cols, dc, 7)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := newModelPublisher(builder.modelTopic(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := pub.write(ctx, publication{model: m}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// publishKeyModel publishes on builder's model topic key k's model (version 9, input partition 0;
// warmKeyModel's).
func publishKeyModel(t *testing.T, ctx context.Context, builder Config, cols []string) {
	t.Helper()
	kp, err := newKeyPublisher(builder.modelTopic(), cols, builder.Detect, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kp.w.Close() })
	kp.version = 9
	if _, err := kp.publish(ctx, map[string]detect.KeyModel{"k": {Key: "k", Version: 9, Partition: 0, Model: warmKeyModel(t, builder)}}); err != nil {
		t.Fatal(err)
	}
}

// newestModel is the newest model a follower of cfg's model topic takes (nil: none), its skips
// logged to logs.
func newestModel(t *testing.T, ctx context.Context, cfg Config, logs *testsupport.LogBuffer) *followed {
	t.Helper()
	f, err := newModelFollower(cfg.modelTopic(), cfg.Ingest.Columns(), zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.newest(ctx)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// keysTaken hands msgs' key model messages to a scorer of cfg (every partition its own), its
// skips logged to logs: how many it read and how many keys' models it took.
func keysTaken(cfg Config, msgs []kafka.Message, logs *testsupport.LogBuffer) (read, taken int) {
	sp := &Pipeline{cfg: cfg, keys: newKeyInbox()}
	readKey := sp.keyReader(func(int32) bool { return true }, zerolog.New(logs))
	for _, msg := range msgs {
		if isKeyModel(msg) {
			read++
			readKey(msg)
		}
	}
	return read, len(sp.keys.take(func(int32) bool { return true }))
}
