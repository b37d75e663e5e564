package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

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
	br := testsupport.KfakeBroker(t)
	mt := testsupport.UniqueName("cd-models")
	createCompactedTopic(t, br, mt, 2)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	derive := func(of string) *ingest.Derive {
		return &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: of, Name: "d"}}}
	}
	builder, same, other := cfg, cfg, cfg
	builder.Ingest.Derive, same.Ingest.Derive, other.Ingest.Derive = derive("hum"), derive("hum"), derive("temp")
	cols := builder.Ingest.Columns()

	// The global model.
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
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.write(ctx, publication{model: m}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		cfg   Config
		taken bool
	}{{"same derive", same, true}, {"other derive", other, false}} {
		var logs testsupport.LogBuffer
		f, err := newModelFollower(c.cfg.modelTopic(), c.cfg.Ingest.Columns(), zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.newest(ctx)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != c.taken {
			t.Errorf("%s: the builder's global model taken %v, want %v; log: %s", c.name, got != nil, c.taken, logs.String())
		}
		if !c.taken && (!strings.Contains(logs.String(), "d: diff of hum") || !strings.Contains(logs.String(), "d: diff of temp")) {
			t.Errorf("%s: the skip does not name both definitions: %s", c.name, logs.String())
		}
	}

	// A key's model.
	kp, err := newKeyPublisher(builder.modelTopic(), cols, builder.Detect, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer kp.w.Close()
	kp.version = 9
	if _, err := kp.publish(ctx, map[string]detect.KeyModel{"k": {Key: "k", Version: 9, Partition: 0, Model: warmKeyModel(t, builder)}}); err != nil {
		t.Fatal(err)
	}
	var keyMsgs int
	for _, c := range []struct {
		name  string
		cfg   Config
		taken bool
	}{{"same derive", same, true}, {"other derive", other, false}} {
		var logs testsupport.LogBuffer
		sp := &Pipeline{cfg: c.cfg, keys: newKeyInbox()}
		read := sp.keyReader(func(int32) bool { return true }, zerolog.New(&logs))
		for _, msg := range modelTopicMessages(t, br, mt) {
			if isKeyModel(msg) {
				keyMsgs++
				read(msg)
			}
		}
		got := sp.keys.take(func(int32) bool { return true })
		if (len(got) == 1) != c.taken {
			t.Errorf("%s: the key's model taken %v, want %v; log: %s", c.name, len(got) == 1, c.taken, logs.String())
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
	br := testsupport.KfakeBroker(t)
	mt := testsupport.UniqueName("cd-nodrv")
	createCompactedTopic(t, br, mt, 2)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	cfg.Ingest.Uncertainty = nil
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	builder, deriving, plain := cfg, cfg, cfg
	builder.Ingest.Features, builder.Ingest.Derive = []string{"temp", "hum", "d"}, nil
	plain.Ingest.Features, plain.Ingest.Derive = []string{"temp", "hum", "d"}, nil
	deriving.Ingest.Features = []string{"temp", "hum"}
	deriving.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
	cols := builder.Ingest.Columns()
	if !slices.Equal(cols, deriving.Ingest.Columns()) {
		t.Fatalf("(the columns' names differ: %v, %v)", cols, deriving.Ingest.Columns())
	}
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
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.write(ctx, publication{model: m}); err != nil {
		t.Fatal(err)
	}
	kp, err := newKeyPublisher(builder.modelTopic(), cols, builder.Detect, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer kp.w.Close()
	kp.version = 9
	if _, err := kp.publish(ctx, map[string]detect.KeyModel{"k": {Key: "k", Version: 9, Partition: 0, Model: warmKeyModel(t, builder)}}); err != nil {
		t.Fatal(err)
	}
	msgs := modelTopicMessages(t, br, mt)
	for _, c := range []struct {
		name  string
		cfg   Config
		taken bool
	}{{"a scorer deriving d", deriving, false}, {"a scorer reading d", plain, true}} {
		var logs testsupport.LogBuffer
		f, err := newModelFollower(c.cfg.modelTopic(), c.cfg.Ingest.Columns(), zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.newest(ctx)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != c.taken {
			t.Errorf("%s: the global model of a builder without derive taken %v, want %v; log: %s", c.name, got != nil, c.taken, logs.String())
		}
		sp := &Pipeline{cfg: c.cfg, keys: newKeyInbox()}
		read := sp.keyReader(func(int32) bool { return true }, zerolog.New(&logs))
		for _, msg := range msgs {
			if isKeyModel(msg) {
				read(msg)
			}
		}
		if keys := sp.keys.take(func(int32) bool { return true }); (len(keys) == 1) != c.taken {
			t.Errorf("%s: the key's model of a builder without derive taken %v, want %v; log: %s", c.name, len(keys) == 1, c.taken, logs.String())
		}
	}
	// A message without the header (an earlier release's builder) tells nothing.
	if err := derivedMismatch("", false, derivedDefs(deriving.Ingest)); err != nil {
		t.Errorf("a message without the header refused: %v", err)
	}
}
