package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// fleetFeatures are the fleet tests' columns: two sensors' readings and their rolling means.
var fleetFeatures = []string{"a", "b", "a_mean", "b_mean"}

// baselines is a generated fleet of keys, each with two sensors at baselines of its own.
type baselines struct {
	r    *rand.Rand
	base [][2]float64
}

// newBaselines is a fleet of keys sensors' pairs with baselines uniform in [0, 1000] (gen --kind
// sensors' fleet), drawn from seed.
func newBaselines(keys int, seed uint64) *baselines {
	f := &baselines{r: rand.New(rand.NewPCG(27, seed)), base: make([][2]float64, keys)}
	for k := range f.base {
		f.base[k] = [2]float64{1000 * f.r.Float64(), 1000 * f.r.Float64()}
	}
	return f
}

// rows are n records of the fleet round robin from offset lo: each sensor at its key's baseline
// plus N(0, 5), its rolling mean over 32 at the baseline plus N(0, 5/sqrt(32)) (the mean of 32
// such readings), as a full window's.
func (f *baselines) rows(lo, n int) []testbatch.Row {
	rs := make([]testbatch.Row, n)
	for i := range rs {
		k := (lo + i) % len(f.base)
		b := f.base[k]
		sd, msd := 5.0, 5/math.Sqrt(32)
		rs[i] = testbatch.Row{Offset: int64(lo + i), Time: time.Unix(int64(lo+i), 0), Key: []byte(fmt.Sprintf("k%03d", k)),
			Features: []float32{float32(b[0] + sd*f.r.NormFloat64()), float32(b[1] + sd*f.r.NormFloat64()),
				float32(b[0] + msd*f.r.NormFloat64()), float32(b[1] + msd*f.r.NormFloat64())}}
	}
	return rs
}

// newBaselineStage is a stage of cfg over fleetFeatures holding a model of 4,000 full-window
// records of f (batches of 1,000), closed at the test's end.
func newBaselineStage(t testing.TB, f *baselines) *Stage {
	t.Helper()
	cfg := Default()
	// Built once, from the whole window, and nothing after: with min_records below the window a
	// first model of 2,000 records served, and the recalibrations due each quarter of the window
	// ran beside the batches, installed before the test's batch by one stage and not by another
	// (TestWarmingImputedOnTheDevicePath's two stages differed 7 times in 180 runs).
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 4000, 4000, 50
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	s, err := NewStage(cfg, fleetFeatures, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	mem := memory.NewGoAllocator()
	for lo := 0; lo < 4000; lo += 1000 {
		out, err := s.Process(context.Background(), testbatch.New(t, mem, "in", fleetFeatures, false, false, f.rows(lo, 1000)))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			o.Record.Release()
		}
	}
	s.AwaitBuild(context.Background())
	if s.model == nil || s.model.Ranker == nil {
		t.Fatal("no model after 4,000 records")
	}
	if s.model.WindowRecords != 4000 {
		t.Fatalf("the model holds %d records, want 4,000", s.model.WindowRecords)
	}
	return s
}

// meansWarming is a batch of rs with both rolling means warming on every record (a fleet's cold
// start, or every key after a restart: the derive's series are in memory only), each at the
// value of a window of one reading (the reading itself).
func meansWarming(t testing.TB, rs []testbatch.Row) *batch.Batch {
	t.Helper()
	for i := range rs {
		rs[i].Features[2], rs[i].Features[3] = rs[i].Features[0], rs[i].Features[1]
	}
	b := testbatch.New(t, memory.NewGoAllocator(), "in", fleetFeatures, false, false, rs)
	all := func(int) bool { return true }
	return withWarmingWhere(t, withWarmingWhere(t, b, 2, all), 3, all)
}

// scoreAlone scores b with s's model as it is (not pushed) and returns its scores; b is released.
func scoreAlone(t *testing.T, s *Stage, b *batch.Batch) []batch.Score {
	t.Helper()
	defer b.Record.Release()
	if b.Scores == nil {
		b.Scores = make([]batch.Score, b.Len())
	}
	if err := s.score(b); err != nil {
		t.Fatal(err)
	}
	return b.Scores
}

// TestWarmingMeanOnAFleetNotFlagged (coldmean27, the defect of docs/BENCHMARKS.md §12.62's
// "open" note): a fleet of 50 keys whose sensors' baselines differ, each with its rolling mean
// as a column, restarts (every series warming at once). The global model must read a warming
// record as its fleet's ordinary records are read. warm26 set each warming mean to the model's
// centre, the fleet's median: a pair (reading at its key's baseline, mean at the fleet's
// median) that no record of the window has, flagged wholesale (the replay of §12.62: 1,085 of
// the first 1,852 rows). Limit: a clean stream's records flag at most 0.1 % (the issue's
// target, keyroll27_rule.md), at most 1 of the 1,000 warming records here; the same records with
// their full-window means (the case's own check that they are clean) are held to it too.
func TestWarmingMeanOnAFleetNotFlagged(t *testing.T) {
	f := newBaselines(50, 1)
	s := newBaselineStage(t, f)
	rs := f.rows(4000, 1000)
	full := make([]testbatch.Row, len(rs))
	for i := range rs {
		full[i] = rs[i]
		full[i].Features = append([]float32(nil), rs[i].Features...)
	}
	count := func(sc []batch.Score) (n int, first string) {
		for i := range sc {
			if sc[i].Outlier {
				if n == 0 {
					first = fmt.Sprintf("record %d score %.3f: %s", i, sc[i].Score, batch.DeviationsText(&sc[i]))
				}
				n++
			}
		}
		return n, first
	}
	clean, first := count(scoreAlone(t, s, testbatch.New(t, memory.NewGoAllocator(), "in", fleetFeatures, false, true, full)))
	if clean > 1 {
		t.Fatalf("%d of the 1,000 clean records with full-window means flagged (first %s): the case is not clean", clean, first)
	}
	warming, first := count(scoreAlone(t, s, meansWarming(t, rs)))
	if warming > 1 {
		t.Errorf("%d of the 1,000 clean records whose means are warming flagged by the global model, at most 1 (0.1 %%); first %s", warming, first)
	}
	// A spike on a warming record's reading beyond the fleet's range (+1,500: every key's b is
	// below 1,000) is still found, and its reason names the reading alone, never the mean made
	// up for it. (A spike that lands where another key's readings are is not told apart from
	// that key while the mean is warming: its neighbours are that key's records.)
	spiked := f.rows(5000, 100)
	for i := 0; i < 100; i += 10 {
		spiked[i].Features[1] += 1500
	}
	sc := scoreAlone(t, s, meansWarming(t, spiked))
	for i := 0; i < 100; i += 10 {
		text := batch.DeviationsText(&sc[i])
		if !sc[i].Outlier || !strings.HasPrefix(text, "b ") || strings.Contains(text, "_mean") {
			t.Errorf("the spike on warming record %d: flagged %v (score %.3f), reason %q", i, sc[i].Outlier, sc[i].Score, text)
		}
	}
}

// TestWarmingImputedFromItsNeighbours: imputedColumns gives a warming value the mean of the
// column over the imputeK records of the model's sample R nearest to the record in its other
// columns (standardised by the model's Center and Unit), against a brute-force reference (a sort
// of R), to float32 rounding; a record whose every column is warming is at the centre; the
// columns without a warming value are untouched.
func TestWarmingImputedFromItsNeighbours(t *testing.T) {
	f := newBaselines(50, 2)
	s := newBaselineStage(t, f)
	r := s.model.Ranker
	rs := f.rows(4000, 200)
	b := meansWarming(t, rs)
	defer b.Record.Release()
	means := make([][]float32, len(fleetFeatures))
	for j := range means {
		means[j] = b.Feature(j)
	}
	got := imputedColumns(s.model, b, means, nil, nil)
	ref := r.Ref.Points
	m := len(ref[0])
	for i := range rs {
		idx := make([]int, m)
		dist := make([]float64, m)
		for p := range idx {
			idx[p] = p
			for _, j := range []int{0, 1} {
				e := (float64(means[j][i])-r.Center[j])/r.Unit[j] - float64(ref[j][p])
				dist[p] += e * e
			}
		}
		sort.SliceStable(idx, func(x, y int) bool { return dist[idx[x]] < dist[idx[y]] })
		for _, j := range []int{2, 3} {
			var sum float64
			for _, p := range idx[:imputeK] {
				sum += float64(ref[j][p])
			}
			want := r.Center[j] + r.Unit[j]*sum/imputeK
			// (float32 output: within 2 of its ulps at the value, the sums' order and the product's
			// rounding apart)
			if ulp := float64(math.Nextafter32(float32(math.Abs(want)), math.MaxFloat32)) - math.Abs(float64(float32(want))); math.Abs(float64(got[j][i])-want) > 2*ulp {
				t.Fatalf("record %d column %d: imputed %v, the %d nearest records' mean %v", i, j, got[j][i], imputeK, want)
			}
		}
		if got[0][i] != means[0][i] || got[1][i] != means[1][i] {
			t.Fatalf("record %d: a column without a warming value changed", i)
		}
		// The key's level, not the fleet's: within 15 (3 readings' sd) of the key's baseline.
		if k := i % 50; math.Abs(float64(got[2][i])-f.base[k][0]) > 15 || math.Abs(float64(got[3][i])-f.base[k][1]) > 15 {
			t.Errorf("record %d (key %d, baselines %.1f, %.1f): imputed means %v, %v", i, k, f.base[k][0], f.base[k][1], got[2][i], got[3][i])
		}
	}
	// Every column warming: nothing to condition on, the centre.
	all := func(int) bool { return true }
	allWarm := withWarmingWhere(t, withWarmingWhere(t, testbatch.New(t, memory.NewGoAllocator(), "in", fleetFeatures, false, false, f.rows(4200, 3)), 0, all), 1, all)
	allWarm = withWarmingWhere(t, withWarmingWhere(t, allWarm, 2, all), 3, all)
	defer allWarm.Record.Release()
	cols := make([][]float32, len(fleetFeatures))
	for j := range cols {
		cols[j] = allWarm.Feature(j)
	}
	for j, c := range imputedColumns(s.model, allWarm, cols, nil, nil) {
		for i, v := range c {
			if v != float32(r.Center[j]) {
				t.Fatalf("every column warming, record %d column %d: %v, want the centre %v", i, j, v, r.Center[j])
			}
		}
	}
}

// TestWarmingImputedInTheWhitenedSpace: under detect.distance_space: whitened R is held whitened;
// the imputation reads it back in the standardised space (W's inverse), so it finds what the
// standardised model finds: the same window and seed give the same sample R, whose standardised
// points agree to float32 rounding of the whitening and its inverse (1e-4 of a unit).
func TestWarmingImputedInTheWhitenedSpace(t *testing.T) {
	f := newBaselines(50, 3)
	cols := make([][]float32, len(fleetFeatures))
	for _, row := range f.rows(0, 3000) {
		for j, v := range row.Features {
			cols[j] = append(cols[j], v)
		}
	}
	cfg := Default()
	std, err := buildRanker(cols, sortedColumns(cols), fleetFeatures, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DistanceSpace = SpaceWhitened
	wh, err := buildRanker(cols, sortedColumns(cols), fleetFeatures, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(wh.Whiten) != 16 || reflect.DeepEqual(wh.Ref.Points, std.Ref.Points) {
		t.Fatal("the whitened ranker is not whitened: the case misses its point")
	}
	back := wh.standardisedRef()
	for j := range back {
		for p := range back[j] {
			if e := math.Abs(float64(back[j][p]) - float64(std.Ref.Points[j][p])); e > 1e-4*max(1, math.Abs(float64(std.Ref.Points[j][p]))) {
				t.Fatalf("R's record %d column %d: %v read back from the whitened space, %v standardised", p, j, back[j][p], std.Ref.Points[j][p])
			}
		}
	}
}

// TestWarmingImputedOnTheDevicePath: the imputation is made on the host before the batch goes to
// a device, so the stage with an accelerator (its kernels' CPU twins) scores a warming fleet's
// batch field for field as the CPU stage does.
func TestWarmingImputedOnTheDevicePath(t *testing.T) {
	f, g := newBaselines(50, 4), newBaselines(50, 4)
	cpu, dev := newBaselineStage(t, f), newBaselineStage(t, g)
	fa := &fakeAccel{exact: true}
	useAccelerator(dev, fa)
	want := scoreAlone(t, cpu, meansWarming(t, f.rows(4000, 500)))
	got := scoreAlone(t, dev, meansWarming(t, g.rows(4000, 500)))
	if fa.batches != 1 {
		t.Fatalf("%d device calls, want 1", fa.batches)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the warming batch's scores with the accelerator differ from the CPU stage's")
	}
}
