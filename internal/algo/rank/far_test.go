package rank

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSurprisalFar: SurprisalFar is Surprisal, bit for bit, up to the largest calibration score;
// beyond it, it is continuous there with Surprisal's slope, rises monotonically, and is the
// Pareto tail of index 1 of that slope: -log10 of p0 / (1 + λx) for the exponential tail p0 e^(-λx)
// that Surprisal extrapolates, so 10 decades of Surprisal's excess are log10(1 + 10 ln 10) = 1.38
// of SurprisalFar's (a linear extrapolation fails it). On a calibration of 171 records (SKAB's
// first model, docs/BENCHMARKS.md §12.16), one whose knee rules its far side (a few outliers at
// its top), and one of equal scores.
func TestSurprisalFar(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	normal := make([]float64, 171)
	for i := range normal {
		normal[i] = math.Abs(r.NormFloat64())
	}
	knee := make([]float64, 1000)
	for i := range knee {
		knee[i] = r.ExpFloat64()
	}
	knee[999], knee[998] = 40, 35 // (the top squeezed: the knee's line rules beyond)
	for name, scores := range map[string][]float64{"171 normal": normal, "knee": knee, "equal": {2, 2, 2, 2}} {
		c := NewCalibration(scores)
		top := c.Sorted[len(c.Sorted)-1]
		for _, v := range append([]float64{-1, 0, top}, c.Sorted...) {
			if c.SurprisalFar(v) != c.Surprisal(v) {
				t.Fatalf("%s: at %v (not beyond the largest %v): %v, Surprisal %v", name, v, top, c.SurprisalFar(v), c.Surprisal(v))
			}
		}
		s0, h := c.Surprisal(math.Nextafter(top, math.Inf(1))), 1e-7*max(1, top)                       // (Surprisal's limit above the largest)
		if d := c.SurprisalFar(top+h) - s0; math.Abs(d-(c.Surprisal(top+h)-s0)) > 1e-4*max(d, 1e-12) { // (the log's curvature over h: about ln(10)/2 x the excess, relative)
			t.Fatalf("%s: the slope just beyond the largest: %v against Surprisal's %v", name, d/h, (c.Surprisal(top+h)-s0)/h)
		}
		prev := c.Surprisal(top)
		for k := 1; k <= 2000; k++ {
			v := top + float64(k)*max(1, top)/20
			far, lin := c.SurprisalFar(v), c.Surprisal(v)
			if !(far > prev) || !(far < lin) {
				t.Fatalf("%s: at %v: %v after %v (Surprisal %v): not rising, or not below the linear extrapolation", name, v, far, prev, lin)
			}
			if want := s0 + math.Log10(1+math.Ln10*(lin-s0)); math.Abs(far-want) > 1e-12*want {
				t.Fatalf("%s: at %v: %v, the Pareto tail of Surprisal's excess %v gives %v", name, v, far, lin-s0, want)
			}
			prev = far
		}
		// Where Surprisal's excess is 10 decades, SurprisalFar's is log10(1 + 10 ln 10).
		lo, hi := top, top+1
		for c.Surprisal(hi)-s0 < 10 {
			hi = top + 2*(hi-top)
		}
		for range 200 {
			if mid := (lo + hi) / 2; c.Surprisal(mid)-s0 < 10 {
				lo = mid
			} else {
				hi = mid
			}
		}
		if got, want := c.SurprisalFar(hi)-s0, math.Log10(1+10*math.Ln10); math.Abs(got-want) > 1e-9 {
			t.Fatalf("%s: 10 decades of Surprisal's excess: %v of SurprisalFar's, want %v", name, got, want)
		}
	}
}

// TestSurprisalFarFinite: SurprisalFar is finite wherever Surprisal is (the largest float64s
// included: Surprisal's excess times ln 10 overflowed to +Inf there, issue 20 item 1's finite
// scores), rises with the score up to the largest float64, and agrees with Surprisal on NaN (0)
// and the infinities; on calibrations of one score, of equal scores, of negative scores, of
// several, and on an empty one (Surprisal's 0 everywhere).
func TestSurprisalFarFinite(t *testing.T) {
	for name, scores := range map[string][]float64{"empty": nil, "one": {0}, "equal": {2, 2, 2}, "negative": {-5, -4, -3}, "ten": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}} {
		c := NewCalibration(scores)
		for _, r := range []float64{math.NaN(), math.Inf(-1), math.Inf(1)} {
			if got, want := c.SurprisalFar(r), c.Surprisal(r); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Errorf("%s: at %v: %v, Surprisal %v", name, r, got, want)
			}
		}
		prev := math.Inf(-1)
		for _, r := range []float64{-math.MaxFloat64, -1, 0, 11, 1e20, math.MaxFloat32, 1e300, math.MaxFloat64 / 4, math.MaxFloat64 / 2, math.MaxFloat64} {
			far := c.SurprisalFar(r)
			if s := c.Surprisal(r); !math.IsInf(s, 0) && (math.IsInf(far, 0) || math.IsNaN(far)) {
				t.Fatalf("%s: at %v: %v where Surprisal is %v", name, r, far, s)
			}
			if far < prev {
				t.Fatalf("%s: at %v: %v, below %v at a smaller score", name, r, far, prev)
			}
			prev = far
		}
	}
}
