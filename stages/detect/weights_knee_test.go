package detect

import (
	"math"
	"math/rand/v2"
	"testing"
)

// skewedWindow is n records of three right-skewed sensors (lognormal of sigma 0.5 about their
// levels, scaled to sds 2, 1.5 and 3: probe_targets.py's lognorm family), the streams on which
// the agreement weights favour the distance and its calibration's fitted tail over-scores the
// clean right tail (docs/BENCHMARKS.md §12.37).
func skewedWindow(n int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	level, sd := [3]float64{70, 1013, 45}, [3]float64{2, 1.5, 3}
	cols := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		for j := range cols {
			cols[j][i] = float32(level[j] + (math.Exp(0.5*rng.NormFloat64())-1)*sd[j]/0.6)
		}
	}
	return cols
}

// skewedRanker is the default config's ranking part of skewedWindow(20000, seed).
func skewedRanker(t *testing.T, seed uint64) (*Ranker, [][]float32) {
	t.Helper()
	cols := skewedWindow(20000, seed)
	r, err := buildRanker(cols, sortedColumns(cols), []string{"temp", "pressure", "humidity"}, Default())
	if err != nil {
		t.Fatal(err)
	}
	return r, cols
}

// TestMeanPastDistanceKneeAtEqualWeight: where the agreement weights favour the distance (a
// skewed window: 0.7-0.8 of the mean), the part of the distance's calibrated score past its
// calibration's knee counts at 0.5, the rest at its weight: mean = wd a + wk knee + 0.5 (b -
// knee). Below the knee the plain weighted mean. Failed on main (the plain weighted mean past
// the knee too: 0.25 (b - knee) higher at weights 0.25 / 0.75).
func TestMeanPastDistanceKneeAtEqualWeight(t *testing.T) {
	r, _ := skewedRanker(t, 1)
	wd, wk, knee := r.DensityWeight, r.DistanceWeight, r.Distance.KneeBase()
	t.Logf("weights density %.3f, distance %.3f; the distance's knee %.3f", wd, wk, knee)
	if !(wk > 0.5) {
		t.Fatalf("distance weight %v on a skewed window: want above 0.5 (the case this rule is for)", wk)
	}
	if !(knee > 1.5 && knee < 2.5) { // the 99th percentile of 4,096: -log10 of about 0.01
		t.Fatalf("the distance's knee %v: want about 2", knee)
	}
	for _, c := range []struct{ a, b float64 }{{2.5, 7.1}, {1.5, 9}, {4, 2.5}, {0.3, knee + 1e-9}} {
		want := float64(wd*c.a) + float64(wk*knee) + float64(0.5*(c.b-knee))
		if got := r.meanOf(c.a, c.b); got != want {
			t.Errorf("a %v, b %v past the knee: mean %v, want %v", c.a, c.b, got, want)
		}
		if plain := float64(wd*c.a) + float64(wk*c.b); !(r.meanOf(c.a, c.b) < plain) {
			t.Errorf("a %v, b %v: mean %v not below the plain weighted mean %v", c.a, c.b, r.meanOf(c.a, c.b), plain)
		}
	}
	for _, c := range []struct{ a, b float64 }{{2.5, 1.2}, {6, knee}, {0, 0}} {
		if got, want := r.meanOf(c.a, c.b), float64(wd*c.a)+float64(wk*c.b); got != want {
			t.Errorf("a %v, b %v at or below the knee: mean %v, want the weighted mean's bits %v", c.a, c.b, got, want)
		}
	}
}

// TestMeanPastKneeContinuousMonotone: the mean is continuous at the knee and never falls as
// either calibrated score rises (a record farther out on either detector scores no lower).
func TestMeanPastKneeContinuousMonotone(t *testing.T) {
	r, _ := skewedRanker(t, 2)
	knee := r.Distance.KneeBase()
	for _, a := range []float64{0, 1.7, 5} {
		prev := math.Inf(-1)
		for b := 0.0; b <= 20; b += 1.0 / 64 {
			m := r.meanOf(a, b)
			if m < prev {
				t.Fatalf("a %v: mean %v at b %v below %v just before", a, m, b, prev)
			}
			prev = m
		}
		// (the two sides of the knee differ by the slopes' worth of 1e-9 and rounding)
		if lo, hi := r.meanOf(a, knee), r.meanOf(a, math.Nextafter(knee, 20)); hi-lo > 1e-12 {
			t.Errorf("a %v: mean %v at the knee, %v just past it: not continuous", a, lo, hi)
		}
	}
	for _, b := range []float64{1, knee + 3} {
		prev := math.Inf(-1)
		for a := 0.0; a <= 20; a += 1.0 / 64 {
			if m := r.meanOf(a, b); m < prev {
				t.Fatalf("b %v: mean %v at a %v below %v just before", b, m, a, prev)
			} else {
				prev = m
			}
		}
	}
}

// TestMeanPastKneeUnchangedWhereDistanceNotFavoured: where the distance's weight is at most 0.5
// (the distance's top records unconfirmed: jointViewWindow; or equal weights) the mean past the
// knee is the weighted mean, bit for bit, as before.
func TestMeanPastKneeUnchangedWhereDistanceNotFavoured(t *testing.T) {
	cols := jointViewWindow(5000, 1)
	features := []string{"a", "b", "c"}
	eq := testConfig()
	eq.Score.Weights = WeightsEqual
	for name, cfg := range map[string]Config{"agreement": testConfig(), "equal": eq} {
		r, err := buildRanker(cols, sortedColumns(cols), features, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.DistanceWeight > 0.5 {
			t.Fatalf("%s: distance weight %v, want at most 0.5", name, r.DistanceWeight)
		}
		knee := r.Distance.KneeBase()
		for _, b := range []float64{knee + 0.5, knee + 4, 30} {
			if got, want := r.meanOf(2, b), float64(r.DensityWeight*2)+float64(r.DistanceWeight*b); got != want {
				t.Errorf("%s, b %v past the knee: mean %v, want the weighted mean's bits %v", name, b, got, want)
			}
		}
	}
}
