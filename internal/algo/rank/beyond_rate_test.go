package rank

import (
	"math"
	"testing"
)

// lowTopCalibration is a calibration of 4096 scores of an exponential law (the quantiles of
// Exp(1) at (i + 0.5)/n) whose largest score came out low: the top one pulled to just above the
// next (as a young window's largest often is, docs/BENCHMARKS.md §12.34 finding 4), so that the
// rate from the 90th percentile to the largest (Slope) is steeper than the knee's.
func lowTopCalibration() Calibration {
	n := 4096
	s := make([]float64, n)
	for i := range s {
		s[i] = -math.Log(1 - (float64(i)+0.5)/float64(n))
	}
	s[n-1] = s[n-2] + 0.01
	return NewCalibration(s)
}

// TestSurprisalBeyondLargestAtKneeRate: past the largest calibration score the surprisal rises
// at the knee's rate where the top decile's (Slope) is steeper: a record d past a low largest
// score gains knee x d decades, not Slope x d (main's: 0.13 decades more at d = 4 here, 0.65 at
// d = 20; the diagnosed young models' Final calibration, Slope 1.17 against a knee of 0.98, made a
// mean of 5.15 a score of 5.87 rather than 5.50).
func TestSurprisalBeyondLargestAtKneeRate(t *testing.T) {
	c := lowTopCalibration()
	n := len(c.Sorted)
	if !(c.knee > 0 && c.Slope > c.knee) {
		t.Fatalf("the calibration's Slope %v is not steeper than its knee %v", c.Slope, c.knee)
	}
	// An exponential law's surprisal rises 1/ln 10 decades a unit: the knee's estimate of it.
	if math.Abs(c.knee-1/math.Ln10) > 0.05 {
		t.Errorf("knee %v, want about %v", c.knee, 1/math.Ln10)
	}
	top, last := math.Log10(float64(n+1)), c.Sorted[n-1]
	for _, d := range []float64{0.5, 1, 4, 20} {
		got := c.Surprisal(last + d)
		want := max(top+c.knee*d, c.kneeBase+c.knee*(last+d-c.kneeAt))
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("Surprisal(largest + %v) = %v, want %v (at the knee's rate %v; Slope %v)", d, got, want, c.knee, c.Slope)
		}
		if over := top + c.Slope*d; !(got < over) {
			t.Errorf("Surprisal(largest + %v) = %v: not below the top decile's extrapolation %v", d, got, over)
		}
	}
}

// TestSurprisalBeyondLargestMonotoneFinite: with the knee's rate past the largest the surprisal
// stays continuous at the largest, monotone, and finite up to float32's and float64's largest
// values.
func TestSurprisalBeyondLargestMonotoneFinite(t *testing.T) {
	c := lowTopCalibration()
	last := c.Sorted[len(c.Sorted)-1]
	below, at := c.Surprisal(math.Nextafter(last, 0)), c.Surprisal(last)
	if above := c.Surprisal(math.Nextafter(last, math.Inf(1))); !(below <= at && at <= above && above-below < 1e-9) {
		t.Errorf("not continuous at the largest: %v, %v, %v", below, at, above)
	}
	prev := math.Inf(-1)
	for r := c.Sorted[0] - 1; r < last+50; r += 0.003 {
		s := c.Surprisal(r)
		if s < prev {
			t.Fatalf("Surprisal not monotone at %v: %v < %v", r, s, prev)
		}
		prev = s
	}
	for _, r := range []float64{math.MaxFloat32, math.MaxFloat64 / 4} {
		if s := c.Surprisal(r); !(s > prev) || math.IsInf(s, 0) || math.IsNaN(s) {
			t.Errorf("Surprisal(%g) = %v: want finite and above %v", r, s, prev)
		}
	}
	if s, f := c.Surprisal(math.MaxFloat32), c.SurprisalFar(math.MaxFloat32); !(f <= s) || math.IsInf(f, 0) {
		t.Errorf("SurprisalFar(FLT_MAX) = %v, Surprisal %v", f, s)
	}
}

// TestSurprisalBeyondLargestSmallKeepsSlope: a calibration too small for a steady knee (a key's
// 200 scores: 18 between the 90th and 99th percentiles) extrapolates past its largest at Slope,
// as before (a key's +12 sd spike in its first model, TestKeyWarmupSpikeLeftOut, rests on it).
func TestSurprisalBeyondLargestSmallKeepsSlope(t *testing.T) {
	n := 200
	s := make([]float64, n)
	for i := range s {
		s[i] = -math.Log(1 - (float64(i)+0.5)/float64(n))
	}
	s[n-1] = s[n-2] + 0.01
	c := NewCalibration(s)
	if !(c.knee > 0 && c.Slope > c.knee) {
		t.Fatalf("the calibration's Slope %v is not steeper than its knee %v", c.Slope, c.knee)
	}
	last, top := c.Sorted[n-1], math.Log10(float64(n+1))
	if got, want := c.Surprisal(last+3), max(top+c.Slope*3, c.kneeBase+c.knee*(last+3-c.kneeAt)); got != want {
		t.Errorf("Surprisal(largest + 3) = %v, want %v (Slope %v)", got, want, c.Slope)
	}
}
