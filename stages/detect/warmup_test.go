package detect

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/rs/zerolog"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// withWarming is b with feature column j's every every-th record warming (a null whose value is
// kept, as ingest's builder writes a derived column still filling), its scores allocated; b is
// released.
func withWarming(t testing.TB, b *batch.Batch, j, every int) *batch.Batch {
	t.Helper()
	n := b.Len()
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = i%every != 0
	}
	bld := array.NewFloat32Builder(memory.NewGoAllocator())
	defer bld.Release()
	bld.AppendValues(b.Feature(j), valid)
	col := bld.NewArray()
	defer col.Release()
	cols := make([]arrow.Array, b.Record.NumCols())
	for c := range cols {
		cols[c] = b.Record.Column(c)
	}
	cols[j] = col
	rec := array.NewRecord(b.Record.Schema(), cols, int64(n))
	out, err := batch.New(b.Topic, b.Features, rec, b.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	out.Scores = make([]batch.Score, n)
	return out
}

// TestWarmingScoredAtTheCentre: the global model scores a record whose column is warming
// exactly as the same record with that column at the model's centre (Ranker.Center): score,
// flag and explanation, bit for bit; and a record far out on the warming column alone is not
// flagged where, read as a value, it is. Two stages with the same history hold the same model.
func TestWarmingScoredAtTheCentre(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 2000, 1000, 50
	features := []string{"a", "b", "c"}
	mk := func() *Stage {
		s, err := NewStage(cfg, features, false, Deps{Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	warmed, centred, plain := mk(), mk(), mk()
	r := rand.New(rand.NewPCG(26, 1))
	mem := memory.NewGoAllocator()
	rows := func(lo, n int) []testbatch.Row {
		out := make([]testbatch.Row, n)
		for i := range out {
			out[i] = testbatch.Row{Offset: int64(lo + i), Time: time.Unix(int64(lo+i), 0),
				Features: []float32{float32(r.NormFloat64()), float32(r.NormFloat64()), float32(1 + 0.1*r.NormFloat64())}}
		}
		return out
	}
	process := func(s *Stage, b *batch.Batch) []batch.Score {
		out, err := s.Process(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		var sc []batch.Score
		for _, o := range out {
			sc = append(sc, o.Scores...)
			o.Record.Release()
		}
		return sc
	}
	for lo := 0; lo < 1500; lo += 500 {
		rs := rows(lo, 500)
		for _, s := range []*Stage{warmed, centred, plain} {
			process(s, testbatch.New(t, mem, "in", features, false, false, rs))
		}
	}
	if warmed.model == nil || centred.model == nil {
		t.Fatal("no model after 1500 records")
	}
	c := float32(centred.model.Ranker.Center[2])
	rs := rows(1500, 100)
	for i := range rs {
		if i%4 == 0 { // column c's window "filling": 0, the stuck sensor's value (10 sd out)
			rs[i].Features[2] = 0
		}
	}
	rs[8].Features[0] = 12 // a spike on a raw column of a warming record: still found
	at := slices.Clone(rs)
	for i := range at {
		at[i].Features = slices.Clone(rs[i].Features)
		if i%4 == 0 {
			at[i].Features[2] = c
		}
	}
	score := func(s *Stage, b *batch.Batch) []batch.Score { // (scored alone: not pushed, the model as it is)
		defer b.Record.Release()
		if err := s.score(b); err != nil {
			t.Fatal(err)
		}
		return b.Scores
	}
	w := score(warmed, withWarming(t, testbatch.New(t, mem, "in", features, false, false, rs), 2, 4))
	a := score(centred, testbatch.New(t, mem, "in", features, false, false, at))
	p := score(plain, testbatch.New(t, mem, "in", features, false, false, rs))
	if len(w) != 100 || len(a) != 100 || len(p) != 100 {
		t.Fatalf("%d / %d / %d scores, want 100", len(w), len(a), len(p))
	}
	flaggedPlain := 0
	for i := range w {
		if math.Float64bits(w[i].Score) != math.Float64bits(a[i].Score) || w[i].Outlier != a[i].Outlier || batch.DeviationsText(&w[i]) != batch.DeviationsText(&a[i]) {
			t.Fatalf("record %d: warming scored %v (%v, %q), at the centre %v (%v, %q)", i, w[i].Score, w[i].Outlier, batch.DeviationsText(&w[i]), a[i].Score, a[i].Outlier, batch.DeviationsText(&a[i]))
		}
		if i%4 == 0 && i != 8 {
			if w[i].Outlier {
				t.Errorf("record %d: warming and clean, flagged (score %v)", i, w[i].Score)
			}
			if p[i].Outlier {
				flaggedPlain++
			}
		}
	}
	if !w[8].Outlier || strings.Contains(batch.DeviationsText(&w[8]), "c ") {
		t.Errorf("the spike on a warming record: flagged %v, %q", w[8].Outlier, batch.DeviationsText(&w[8]))
	}
	if flaggedPlain == 0 {
		t.Fatal("no record at 0 on column c flagged when read as a value: the case misses its point")
	}
}
