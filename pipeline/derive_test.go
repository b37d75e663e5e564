package pipeline

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestPipelineDerivedFeatures: with ingest.derive the pipeline scores the derived columns as
// features and writes them to the Arrow output: three keys interleaved in one partition, each
// key's temp rising by 1 a record, so temp.diff is 0 for a key's first record and 1 after.
func TestPipelineDerivedFeatures(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	const n = 1500
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := i % 3
		recs[i] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", k),
			Value: fmt.Appendf(nil, `{"temp":%d,"hum":%g}`, 100*k+i/3, 40+float64(i%17)/4)}
	}
	testsupport.Produce(t, br, recs...)

	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{
		{Kind: ingest.DeriveDiff, Of: "temp"}, {Kind: ingest.DeriveRobustZ, Of: "temp", Last: 10},
		{Kind: ingest.DeriveStd, Of: "temp", Last: 10}}}
	cfg.Sink.Format = sink.FormatArrow
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 1000, 500, 50
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	runUntilOut(t, cfg, n)
	rows, scored := 0, 0
	for _, m := range testsupport.ReadTopic(t, br, out, 1) {
		rd, err := ipc.NewReader(bytes.NewReader(m.Value))
		if err != nil {
			t.Fatal(err)
		}
		sch := rd.Schema()
		idx := func(name string) int {
			f := sch.FieldIndices(name)
			if len(f) != 1 {
				t.Fatalf("Arrow output: column %q appears %d times (schema %v)", name, len(f), sch)
			}
			return f[0]
		}
		diff, rz, std, off, sc := idx("temp.diff"), idx("temp.rz10"), idx("temp.std10"), idx("_offset"), idx(sink.ColScored)
		for rd.Next() {
			rec := rd.Record()
			for k := range int(rec.NumRows()) {
				o := rec.Column(off).(*array.Int64).Value(k)
				want := float32(1)
				if o < 3 {
					want = 0
				}
				if got := rec.Column(diff).(*array.Float32).Value(k); got != want {
					t.Fatalf("offset %d: temp.diff %v, want %v", o, got, want)
				}
				// A key's previous 10 temps are t-10..t-1: median t-5.5, MAD 2.5: z = 5.5/3.7065.
				if z := rec.Column(rz).(*array.Float32).Value(k); o >= 33 && z != float32(5.5/(1.4826*2.5)) {
					t.Fatalf("offset %d: temp.rz10 %v", o, z)
				}
				// A key's last 10 temps are t-9..t: t-9 and t, the farthest from their mean,
				// left out, the sample sd of the eight consecutive integers t-8..t-1, sqrt(6)
				// (exact in float64: the sums are of integers and halves).
				if s := rec.Column(std).(*array.Float32).Value(k); o >= 30 && s != float32(math.Sqrt(6)) {
					t.Fatalf("offset %d: temp.std10 %v, want %v", o, s, float32(math.Sqrt(6)))
				}
				if rec.Column(sc).(*array.Boolean).Value(k) {
					scored++
				}
				rows++
			}
		}
		rd.Release()
	}
	if rows != n || scored != n {
		t.Fatalf("%d rows out, %d scored; want %d each", rows, scored, n)
	}
}

// TestReloadDerive: a reload of the same ingest.derive (its defaults filled by validation in
// both) changes nothing; another derive needs a restart (it changes the features).
func TestReloadDerive(t *testing.T) {
	load := func(derive string) Config {
		c := Default()
		doc := "ingest:\n  topic: in\n  group_id: g\n  features: [temp]\n  derive:\n    features: [" + derive + "]\n" +
			"sink:\n  brokers: [\"localhost:9092\"]\n  topic: out\n  dead_letter_topic: dl\n"
		if err := config.LoadBytes("c.yaml", []byte(doc), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := load("{kind: robust_z, of: temp, last: 30}")
	if ch := ClassifyChanges(a, load("{kind: robust_z, of: temp, last: 30}")); len(ch.Restart)+len(ch.Live)+len(ch.Rebuild) != 0 {
		t.Fatalf("the same derive reloaded: %+v", ch)
	}
	if ch := ClassifyChanges(a, load("{kind: robust_z, of: temp, last: 30, min_values: 5}")); !slices.Equal(ch.Restart, []string{"ingest.derive"}) {
		t.Fatalf("another derive: %+v, want a restart for ingest.derive", ch)
	}
}

// TestColumnDefsOfMean: a mean with trim says it leaves two values out (trimmean27): another
// column than the plain mean's of the same name, which columns.txt and the model topic's
// header tell apart; without trim its text is as before (models of it stay valid).
func TestColumnDefsOfMean(t *testing.T) {
	c := ingest.Config{Features: []string{"temp"}, Derive: &ingest.Derive{Features: []ingest.DerivedFeature{
		{Kind: ingest.DeriveMean, Of: "temp", Last: 16, Trim: 2}, {Kind: ingest.DeriveMean, Of: "temp", Last: 16, Name: "p"}}}}
	if got, want := derivedDefs(c), "temp.mean16: mean of temp, last 16, less its 2 farthest; p: mean of temp, last 16"; got != want {
		t.Fatalf("definitions %q, want %q", got, want)
	}
}

// TestColumnDefsOfStd: a std column's definition names its kind, source and window (the model
// topic's header and columns.txt compare them): a std of temp over 64 and one over 32 under
// the same name are different columns, as are a std and a mean.
func TestColumnDefsOfStd(t *testing.T) {
	c := ingest.Config{Features: []string{"temp"}, Derive: &ingest.Derive{Features: []ingest.DerivedFeature{
		{Kind: ingest.DeriveStd, Of: "temp", Last: 64}, {Kind: ingest.DeriveStd, Of: "temp", Last: 32, Name: "s"},
		{Kind: ingest.DeriveMean, Of: "temp", Last: 64}}}}
	if got, want := derivedDefs(c), "temp.std64: std of temp, last 64, less its 2 farthest; s: std of temp, last 32, less its 2 farthest; temp.mean64: mean of temp, last 64"; got != want {
		t.Fatalf("definitions %q, want %q", got, want)
	}
}
