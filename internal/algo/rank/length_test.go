package rank

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lengthCalibrations are calibrations of lengths of several shapes: 4,096 |normal| (the global
// model's size), a key's 200, one whose knee rules its far side (a few outliers squeezed at its
// top), one of equal scores, and one of zeros (no reach: a length without a scale).
func lengthCalibrations() map[string]Calibration {
	r := rand.New(rand.NewPCG(26, 26))
	normal, key := make([]float64, 4096), make([]float64, 200)
	for i := range normal {
		normal[i] = 20 + 5*math.Abs(r.NormFloat64())
	}
	for i := range key {
		key[i] = math.Abs(r.NormFloat64())
	}
	knee := make([]float64, 1000)
	for i := range knee {
		knee[i] = r.ExpFloat64()
	}
	knee[999], knee[998] = 40, 35 // (the top squeezed: the knee's line rules beyond)
	return map[string]Calibration{"4096 normal": NewCalibration(normal), "200 key": NewCalibration(key),
		"knee": NewCalibration(knee), "equal": NewCalibration([]float64{2, 2, 2, 2}), "zeros": NewCalibration([]float64{0, 0, 0})}
}

// TestSurprisalLengthWithinReach: up to LengthReach times the largest calibration score
// SurprisalLength is Surprisal bit for bit (the calibration records, the flags' band: a model's
// build and every record that is not far out score as before); NaN and the infinities as
// Surprisal; a calibration of zeros has no reach and is Surprisal everywhere.
func TestSurprisalLengthWithinReach(t *testing.T) {
	for name, c := range lengthCalibrations() {
		top := c.Sorted[len(c.Sorted)-1]
		vs := append([]float64{-1, 0, top, LengthReach * top, math.NaN(), math.Inf(1), math.Inf(-1)}, c.Sorted...)
		for k := range 1000 {
			vs = append(vs, float64(k)*LengthReach*top/999)
		}
		if top == 0 {
			vs = append(vs, 1, 1e6, math.MaxFloat32)
		}
		for _, v := range vs {
			got, want := c.SurprisalLength(v), c.Surprisal(v)
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s: at %v (within %v x the largest %v): %v, Surprisal %v", name, v, LengthReach, top, got, want)
			}
		}
	}
}

// TestSurprisalLengthBeyondReach: past the reach, SurprisalLength is the Pareto tail of index 1
// of Surprisal's excess over its value there (e_a + log10(1 + ln 10 (e - e_a))): continuous at
// the reach with Surprisal's slope, strictly rising, below Surprisal, finite at FLT_MAX and
// MaxFloat64, and 10 decades of Surprisal's excess past the reach are log10(1 + 10 ln 10) = 1.38.
// A linear extrapolation (main's: SurprisalLength = Surprisal) fails the form and the 1.38.
func TestSurprisalLengthBeyondReach(t *testing.T) {
	for name, c := range lengthCalibrations() {
		top := c.Sorted[len(c.Sorted)-1]
		if top == 0 {
			continue
		}
		reach := LengthReach * top
		ea := c.Surprisal(reach)
		if got := c.SurprisalLength(math.Nextafter(reach, math.Inf(1))); math.Abs(got-ea) > 1e-9*ea {
			t.Fatalf("%s: just past the reach %v: %v, want continuity with %v", name, reach, got, ea)
		}
		h := 1e-6 * reach
		if d, lin := c.SurprisalLength(reach+h)-ea, c.Surprisal(reach+h)-ea; math.Abs(d-lin) > math.Ln10*lin*lin { // (the log's curvature over h: about ln(10)/2 x the excess, relative; twice that allowed)
			t.Fatalf("%s: slope just past the reach %v against Surprisal's %v", name, d/h, lin/h)
		}
		prev := ea
		for k := 1; k <= 3000; k++ {
			v := reach * math.Pow(1.01, float64(k)) // up to 3e13 x the reach
			got, lin := c.SurprisalLength(v), c.Surprisal(v)
			if !(got > prev) || !(got < lin) {
				t.Fatalf("%s: at %v: %v after %v (Surprisal %v): not rising, or not below the linear extrapolation", name, v, got, prev, lin)
			}
			if want := ea + math.Log10(1+math.Ln10*(lin-ea)); math.Abs(got-want) > 1e-12*want {
				t.Fatalf("%s: at %v: %v, the Pareto tail of Surprisal's excess %v gives %v", name, v, got, lin-ea, want)
			}
			prev = got
		}
		for _, v := range []float64{math.MaxFloat32, math.MaxFloat64 / 4, math.MaxFloat64} {
			got := c.SurprisalLength(v)
			if math.IsInf(got, 0) || math.IsNaN(got) || !(got > prev) {
				t.Fatalf("%s: at %v: %v (after %v): not finite, or not above the scores below it", name, v, got, prev)
			}
			prev = got
		}
		lo, hi := reach, 2*reach
		for c.Surprisal(hi)-ea < 10 {
			hi = reach + 2*(hi-reach)
		}
		for range 200 {
			if mid := (lo + hi) / 2; c.Surprisal(mid)-ea < 10 {
				lo = mid
			} else {
				hi = mid
			}
		}
		if got, want := c.SurprisalLength(hi)-ea, math.Log10(1+10*math.Ln10); math.Abs(got-want) > 1e-6 {
			t.Fatalf("%s: 10 decades of Surprisal's excess past the reach are %v decades, want %v", name, got, want)
		}
	}
}

// TestSurprisalLengthOrderFree: the calibration records in any order give the same bits (a
// function of the sorted scores: the reach is the largest's, derived at load as at a build).
func TestSurprisalLengthOrderFree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	scores := make([]float64, 4096)
	for i := range scores {
		scores[i] = math.Abs(r.NormFloat64()) * 7
	}
	a := NewCalibration(scores)
	r.Shuffle(len(scores), func(i, j int) { scores[i], scores[j] = scores[j], scores[i] })
	b := NewCalibration(scores)
	top := a.Sorted[len(a.Sorted)-1]
	for k := range 2000 {
		v := top * math.Pow(1.02, float64(k))
		if x, y := a.SurprisalLength(v), b.SurprisalLength(v); math.Float64bits(x) != math.Float64bits(y) {
			t.Fatalf("at %v: %v in one order, %v in another", v, x, y)
		}
	}
}
