package rank

import (
	"math"
	"slices"
)

// Calibration maps a detector's raw score (higher = more outlying) to the surprisal of its
// tail probability among the window's own scores: -log10 P(S >= score), with P estimated
// from the sorted calibration scores, interpolated between them so that it ranks exactly as
// the raw score does, and beyond the largest extended at the rate of the top decile. A window
// that holds a few outliers (fewer than TailQuantile of it) makes their scores the top of its
// calibration and would squeeze every record beyond the bulk, near or far, into the same few
// hundredths of a decade; so the surprisal is also never below an exponential tail fitted from
// the calibration's 1 - 10*TailQuantile to its 1 - TailQuantile quantile (the knee: one decade
// of probability), which those outliers do not move and which keeps rising with the score.
type Calibration struct {
	// Sorted are the calibration scores, ascending (finite).
	Sorted []float64
	// Slope is the surprisal added per unit of raw score beyond the largest calibration score:
	// the rate at which it rose from the 90th percentile to the largest.
	Slope float64
	// knee is the fitted tail's rate per unit of raw score beyond the knee (0: none), kneeAt
	// and kneeBase the knee's score and its surprisal; derived from Sorted, as Slope is
	// (CalibrationOf), once rather than per record.
	knee, kneeAt, kneeBase float64
	// index is the search's first level: Sorted[IndexStride*k] for every k (derived from
	// Sorted, as Slope is). A search reads it and then one leaf of at most IndexStride scores,
	// so that a caller can prefetch just those lines (Index, Leaf) rather than all of Sorted:
	// at a million keys' models, each calibration a cache miss (docs/BENCHMARKS.md §13.1.9).
	index []float64
}

// TailQuantile is where a calibration hands over to its fitted tail (see Calibration).
const TailQuantile = 0.01

// NewCalibration sorts a copy of the calibration scores (non-finite ones are dropped).
func NewCalibration(scores []float64) Calibration {
	return NewCalibrationIn(make([]float64, 0, len(scores)), scores)
}

// NewCalibrationIn is NewCalibration with the copy in dst's storage (dst[:0], capacity at least
// len(scores)): calibrations of one model in one allocation save the allocator's rounding of
// each (a key's model, detect.key_by: 192 bytes a calibration of 200 scores).
func NewCalibrationIn(dst, scores []float64) Calibration {
	s := dst[:0]
	for _, v := range scores {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			s = append(s, v)
		}
	}
	slices.Sort(s)
	return CalibrationOf(s)
}

// CalibrationOf is the Calibration of finite scores already in ascending order (shared, not
// copied), with its slopes derived from them (a snapshot stores the scores and the slope).
func CalibrationOf(s []float64) Calibration {
	return CalibrationIn(s, nil)
}

// CalibrationIn is CalibrationOf with the index in idx's storage when its capacity is at least
// IndexLen(len(s)) (a key's model: its three indexes in one allocation), else in its own.
func CalibrationIn(s, idx []float64) Calibration {
	c := Calibration{Sorted: s}
	n := len(s)
	if n == 0 {
		return c
	}
	m := IndexLen(n)
	if cap(idx) < m {
		idx = make([]float64, m)
	}
	c.index = idx[:m:m]
	for k := range c.index {
		c.index[k] = s[IndexStride*k]
	}
	top := log10Int(n + 1)
	r90 := s[(9*(n-1))/10]
	switch {
	case s[n-1] > r90:
		c.Slope = (top - c.empirical(r90)) / (s[n-1] - r90)
	case s[n-1] > s[0]:
		c.Slope = (top - c.empirical(s[0])) / (s[n-1] - s[0])
	default:
		c.Slope = 1 / max(math.Abs(s[0]), 1)
	}
	ki := int(math.Round((1 - TailQuantile) * float64(n-1)))
	c.kneeAt, c.kneeBase = s[ki], c.empirical(s[ki])
	if lo := s[int(math.Round((1-10*TailQuantile)*float64(n-1)))]; c.kneeAt > lo {
		c.knee = (c.kneeBase - c.empirical(lo)) / (c.kneeAt - lo)
	}
	return c
}

// empirical is -log10 of the interpolated tail probability (n - pos(r))/(n + 1) of r among the
// calibration scores (r at most the largest).
func (c *Calibration) empirical(r float64) float64 {
	s := c.Sorted
	n := len(s)
	i := c.search(r) // first index with s[i] >= r
	if s[i] > r && i > 0 {
		pos := float64(i-1) + (r-s[i-1])/(s[i]-s[i-1])
		return log10Int(n+1) - float64(math.Log10(float64(n)-pos))
	}
	return log10Int(n+1) - log10Int(n-i) // (float64(n) - float64(i) is n-i exactly)
}

// SearchFloat64s is sort.SearchFloat64s(s, r) for r not NaN (len(s) when every value is below
// r): a binary search whose halving does not branch on the data (a conditional move), as counts
// (random values mispredict a branch half the time). Also the detect stage's sorted rings'.
func SearchFloat64s(s []float64, r float64) int {
	n := len(s)
	if n == 0 {
		return 0
	}
	// Invariant: the answer lies in [a, a+n]; s[a-1] < r.
	a := 0
	for n > 1 {
		half := n >> 1
		if s[a+half-1] < r {
			a += half
		}
		n -= half
	}
	if s[a] < r {
		a++
	}
	return a
}

// SurprisalOfMember is Surprisal(c.Sorted[i]) where i is the first index of that score's run
// of equal scores (a model's calibration scores scored against their own calibration, as a build
// scores them: no search). The same bits: Surprisal's search finds i, where no interpolation is
// needed.
func (c *Calibration) SurprisalOfMember(i int) float64 {
	s := c.Sorted
	n, r := len(s), s[i]
	e := log10Int(n+1) - log10Int(n-i)
	if r > c.kneeAt && c.knee > 0 {
		return max(e, c.kneeBase+float64(c.knee*(r-c.kneeAt)))
	}
	return e
}

// SurprisalFar is Surprisal up to the largest calibration score; beyond it, the exponential
// tail that Surprisal extrapolates (p0 e^(-λx) past the largest, -log10 rising by λx/ln 10) is
// replaced by a Pareto tail of index 1 with the same density there, p0 / (1 + λx): S0 + log10(1
// + ln(10) e), e Surprisal's excess over S0, its value just beyond the largest (continuous with
// it there, with its slope, monotone, finite wherever Surprisal is; NaN and the infinities as
// Surprisal). A calibration of a few hundred records says little of its
// tail decades beyond them; for a raw score that is a length (a k-NN distance), a polynomial
// tail (index 1: Cauchy's, the law the recent past's decades assume in detect's recent_past.go)
// grows by the log of the length, so a record far out is not moved by decades by ordinary
// noise on its other features (detect's recent_far_side, docs/BENCHMARKS.md §12.23).
func (c *Calibration) SurprisalFar(r float64) float64 {
	e := c.Surprisal(r)
	n := len(c.Sorted)
	if n == 0 || !(r > c.Sorted[n-1]) {
		return e
	}
	// S0 is Surprisal's limit from above at the largest (Surprisal(largest) unless it is tied)
	s0, top := log10Int(n+1), c.Sorted[n-1]
	if top > c.kneeAt && c.knee > 0 {
		s0 = max(s0, c.kneeBase+float64(c.knee*(top-c.kneeAt)))
	}
	if y := float64(math.Ln10 * (e - s0)); !math.IsInf(y, 1) || math.IsInf(e, 1) {
		return s0 + float64(math.Log10(1+y)) // (rounded: Log10's inlined product is not fused into the sum)
	}
	// (an excess past MaxFloat64 / ln 10: the 1 is below its last bit, and ln 10 is factored
	// out, so that it stays finite where Surprisal is)
	return s0 + float64(math.Log10(e-s0)) + float64(math.Log10(math.Ln10))
}

// Surprisal is -log10 of the tail probability of score r among the calibration scores, never
// below the fitted tail beyond the knee (see Calibration); 0 for an empty calibration or a NaN
// score. Monotone in r, continuous, and finite for every finite r.
func (c *Calibration) Surprisal(r float64) float64 {
	s := c.Sorted
	n := len(s)
	if n == 0 || math.IsNaN(r) {
		return 0
	}
	var e float64
	if r > s[n-1] {
		e = log10Int(n+1) + float64(c.Slope*(r-s[n-1]))
	} else {
		e = c.empirical(r)
	}
	if r > c.kneeAt && c.knee > 0 {
		return max(e, c.kneeBase+float64(c.knee*(r-c.kneeAt)))
	}
	return e
}
