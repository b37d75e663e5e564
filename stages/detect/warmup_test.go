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

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// withWarming is b with feature column j's every every-th record warming (a null whose value is
// kept, as ingest's builder writes a derived column still filling), its scores allocated; b is
// released.
func withWarming(t testing.TB, b *batch.Batch, j, every int) *batch.Batch {
	t.Helper()
	return withWarmingWhere(t, b, j, func(i int) bool { return i%every == 0 })
}

// newWarmStage is a stage of cfg over the warm-up tests' features a, b, c, closed at the test's
// end.
func newWarmStage(t *testing.T, cfg Config) *Stage {
	t.Helper()
	s, err := NewStage(cfg, []string{"a", "b", "c"}, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// warmRows are the warm-up tests' n rows from offset lo (time lo+i s): a and b standard normal,
// c at 1 ± 0.1 (a rolling std's level), drawn in that order from r; c is 0 (a warming std's
// value) on every every-th row (0: none).
func warmRows(r *rand.Rand, lo, n, every int) []testbatch.Row {
	rs := make([]testbatch.Row, n)
	for i := range rs {
		rs[i] = testbatch.Row{Offset: int64(lo + i), Time: time.Unix(int64(lo+i), 0),
			Features: []float32{float32(r.NormFloat64()), float32(r.NormFloat64()), float32(1 + 0.1*r.NormFloat64())}}
		if every > 0 && i%every == 0 {
			rs[i].Features[2] = 0
		}
	}
	return rs
}

// TestWarmingScoredAtItsImputation: the global model scores a record whose column is warming
// exactly as the same record with that column at its imputation (imputedColumns: the column's
// mean over the record's nearest records of the model's sample in its other columns), score and
// flag bit for bit, and explains it as the same record with that column at the model's centre
// (a warming column is never named); a column unrelated to the others (c, a std's level beside
// two independent readings) is imputed near the centre where warm26 put it; and a record far out
// on the warming column alone is not flagged where, read as a value, it is. Two stages with the
// same history hold the same model.
func TestWarmingScoredAtItsImputation(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 2000, 1000, 50
	features := []string{"a", "b", "c"}
	mk := func() *Stage { return newWarmStage(t, cfg) }
	warmed, centred, plain := mk(), mk(), mk()
	r := rand.New(rand.NewPCG(26, 1))
	mem := memory.NewGoAllocator()
	rows := func(lo, n int) []testbatch.Row { return warmRows(r, lo, n, 0) }
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
	wb := withWarming(t, testbatch.New(t, mem, "in", features, false, false, rs), 2, 4)
	imputed := imputedColumns(warmed.model, wb, [][]float32{wb.Feature(0), wb.Feature(1), wb.Feature(2)}, nil, nil)[2]
	at, mid := slices.Clone(rs), slices.Clone(rs)
	for i := range at {
		at[i].Features, mid[i].Features = slices.Clone(rs[i].Features), slices.Clone(rs[i].Features)
		if i%4 == 0 {
			at[i].Features[2], mid[i].Features[2] = imputed[i], c
			// c is 1 ± 0.1 drawn apart from a and b: the mean of imputeK of its values is within
			// 4 of their sd (0.1 / sqrt(imputeK)) of its mean, and its mean within 0.01 of its
			// median (a sample of 1,000: the two differ by about 0.1 x 1.25 / sqrt(1000))
			if d := math.Abs(float64(imputed[i] - c)); d > 4*0.1/math.Sqrt(imputeK)+0.01 {
				t.Errorf("record %d: c imputed at %v, %v from the centre %v", i, imputed[i], d, c)
			}
		}
	}
	score := func(s *Stage, b *batch.Batch) []batch.Score { // (scored alone: not pushed, the model as it is)
		defer b.Record.Release()
		if err := s.score(b); err != nil {
			t.Fatal(err)
		}
		return b.Scores
	}
	w := score(warmed, wb)
	a := score(centred, testbatch.New(t, mem, "in", features, false, false, at))
	p := score(plain, testbatch.New(t, mem, "in", features, false, false, rs))
	if len(w) != 100 || len(a) != 100 || len(p) != 100 {
		t.Fatalf("%d / %d / %d scores, want 100", len(w), len(a), len(p))
	}
	flaggedPlain := 0
	for i := range w {
		if math.Float64bits(w[i].Score) != math.Float64bits(a[i].Score) || w[i].Outlier != a[i].Outlier {
			t.Fatalf("record %d: warming scored %v (%v), at its imputation %v (%v)", i, w[i].Score, w[i].Outlier, a[i].Score, a[i].Outlier)
		}
		if w[i].Outlier || w[i].Suppressed { // (explained as at the centre: the rows a stage explains)
			e := []batch.Score{w[i]}
			e[0].Deviations = nil // (its own: explainDeviations appends to the slice it finds)
			explainDeviations(warmed.model.Ranker, features, [][]float32{{mid[i].Features[0]}, {mid[i].Features[1]}, {mid[i].Features[2]}}, e, false)
			if batch.DeviationsText(&w[i]) != batch.DeviationsText(&e[0]) {
				t.Fatalf("record %d: warming explained %q, at the centre %q", i, batch.DeviationsText(&w[i]), batch.DeviationsText(&e[0]))
			}
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

// TestRecentPastSkipsWarming: the recent past (recent_past.go) reads a warming value as it
// reads a missing one: it adds nothing to its record's decades and does not join the past, so
// a stream whose column c is warming on every fourth record (at 0, a window of one value's std,
// 10 sd below the column's level) gets, record by record, the decades of the same stream with
// those values NaN, bit for bit. Read as values, those records score decades against the past
// (the case's point). Not the model's centre: the recent past measures a record against the
// stream's last records, not the model (a drifted stream is its reason to exist, §12.19), and
// the centre of a model built before a drift is itself far out against them; nor is there a
// centre before the first model (beforeModel still feeds the past).
func TestRecentPastSkipsWarming(t *testing.T) {
	cfg := Default()
	cfg.RecentPast = 50
	features := []string{"a", "b", "c"}
	mk := func() *Stage { return newWarmStage(t, cfg) }
	warmed, missing, plain := mk(), mk(), mk()
	r := rand.New(rand.NewPCG(26, 2))
	mem := memory.NewGoAllocator()
	rs := warmRows(r, 0, 400, 4)
	nan := slices.Clone(rs)
	for i := range nan {
		nan[i].Features = slices.Clone(rs[i].Features)
		if i%4 == 0 {
			nan[i].Features[2] = float32(math.NaN())
		}
	}
	past := func(s *Stage, b *batch.Batch) []float64 {
		defer b.Record.Release()
		return s.pastDecades(b)
	}
	var w, m, p []float64
	for lo := 0; lo < len(rs); lo += 100 { // (batches of 100: the ring carries across them)
		w = append(w, past(warmed, withWarming(t, testbatch.New(t, mem, "in", features, false, false, rs[lo:lo+100]), 2, 4))...)
		m = append(m, past(missing, testbatch.New(t, mem, "in", features, false, false, nan[lo:lo+100]))...)
		p = append(p, past(plain, testbatch.New(t, mem, "in", features, false, false, rs[lo:lo+100]))...)
	}
	if len(w) != len(rs) || len(m) != len(rs) {
		t.Fatalf("%d / %d decades, want %d", len(w), len(m), len(rs))
	}
	for i := range w {
		if math.Float64bits(w[i]) != math.Float64bits(m[i]) {
			t.Fatalf("record %d: warming %v decades, missing %v", i, w[i], m[i])
		}
	}
	// (a record at 0 against a past of 1 ± 0.1 with a quarter of it at 0: median 1, MAD about
	// 0.1, z about 7, 0.9 decades; the raw columns of a normal record stay below 0.6 at 50)
	if p[200] < 0.7 || w[200] > 0.7 {
		t.Fatalf("record 200 (c at 0): %v decades read as a value, %v warming; the case misses its point", p[200], w[200])
	}
}

// TestWarmingKeptOutOfTheReference: a record with a warming column joins the window (the
// stream's record count, the members) but not the reference the next builds and
// recalibrations read (Stage.reference), as a significant record does not: a restart of many
// keys would otherwise put their partial windows (a std near 0, a mean too spread) into the
// global model's reference, which widens it and costs the next models spikes (BENCHMARKS
// §12.59, warm26b's addendum: AP 0.758-0.917 against 0.762-0.924 kept out, five generated
// fleets of 1000 keys). The outcast floor holds: a window of warming records alone is read whole.
func TestWarmingKeptOutOfTheReference(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 2000, 1000, 50
	features := []string{"a", "b", "c"}
	s := newWarmStage(t, cfg)
	r := rand.New(rand.NewPCG(26, 3))
	mem := memory.NewGoAllocator()
	push := func(lo, n, every int) {
		rs := warmRows(r, lo, n, every)
		b := testbatch.New(t, mem, "in", features, false, false, rs)
		if every > 0 {
			b = withWarming(t, b, 2, every)
		}
		out, err := s.Process(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			o.Record.Release()
		}
	}
	for lo := 0; lo < 2000; lo += 500 {
		push(lo, 500, 4)
	}
	cols, _ := s.reference()
	if s.win.Len() != 2000 || len(cols[2]) != 1500 {
		t.Fatalf("window %d records, reference %d; want 2000 and 1500 (the 500 warming left out)", s.win.Len(), len(cols[2]))
	}
	if slices.Min(cols[2]) < 0.3 { // (1 ± 0.1: 0.3 is 7 sd below; only a warming 0 is there)
		t.Fatalf("the reference holds a warming value (%v)", slices.Min(cols[2]))
	}
	for lo := 2000; lo < 4000; lo += 500 {
		push(lo, 500, 1) // every record warming: nothing would remain
	}
	if cols, _ = s.reference(); len(cols[2]) != 2000 {
		t.Fatalf("a window of warming records alone: reference %d records, want the whole 2000 (outcastFloor)", len(cols[2]))
	}
}
