package rank

import "math"

// LengthReach is how far a calibration of a length extrapolates its exponential tail: to
// LengthReach times its largest score (SurprisalLength).
const LengthReach = 10

// SurprisalLength is Surprisal for a raw score that is a length (detect's distance score, w_k:
// a sum of k distances), up to LengthReach times the largest calibration score; beyond that
// reach, the exponential tail that Surprisal extrapolates becomes a Pareto tail of index 1 with
// the same density there: e_a + log10(1 + ln(10) (e - e_a)), e Surprisal's value and e_a its
// value at the reach (continuous there with its slope, strictly monotone, finite wherever
// Surprisal is and for every finite score; NaN and the infinities as Surprisal).
//
// Why (docs/BENCHMARKS.md §12.57): a tail score's raw value is in nats, each feature's already
// growing by the logarithm of its excess past the window's range (beyond), so its calibration
// grows with the log of how far out a record is; a length grows linearly with it, and so did its
// calibrated score, to thousands of decades for a record whose one feature, constant in the
// window, moved by 10^4 units, where the weighted mean of the two then followed the distance
// alone. Past the reach the distance's calibration takes the tail score's law: a decade of
// probability per decade of length, about 0.43 decades per e-fold. The reach is scale-free
// (no n in it): the top decile's rate is fitted over a factor of about 1.5-3 in length, and a
// record ten times farther than the farthest calibration record is past any shape those records
// support. Calibration records lie within it, so a model's build is unchanged by it.
func (c *Calibration) SurprisalLength(r float64) float64 {
	e := c.Surprisal(r)
	n := len(c.Sorted)
	if n == 0 {
		return e
	}
	top := c.Sorted[n-1]
	reach := float64(LengthReach * top)
	if !(top > 0) || !(r > reach) {
		return e // (a reach past MaxFloat64 is +Inf: no score is beyond it)
	}
	ea := c.Surprisal(reach)
	if y := float64(math.Ln10 * (e - ea)); !math.IsInf(y, 1) {
		return ea + float64(math.Log10(1+y)) // (rounded: Log10's inlined product is not fused into the sum)
	}
	if math.IsInf(r, 1) {
		return e
	}
	// Surprisal's excess, or its product by ln 10, overflowed at a finite score: the 1 is far below
	// the last bit, so the log of the excess is taken from its parts, the rate of the line that
	// rules at r (the steeper: both are lines past the reach) times the score's distance past the
	// reach (finite: both are).
	rate := c.Slope
	if c.knee > rate && r > c.kneeAt {
		rate = c.knee
	}
	return ea + float64(math.Log10(math.Ln10)) + float64(math.Log10(rate)) + float64(math.Log10(r-reach))
}
