package ingest

import "math"

// The std kind (ingest.derive, DeriveStd): the rolling spread of a feature over its series'
// last `last` values, the current one included.
//
// Why the standard deviation and not a robust spread (a MAD): the faults it is for are a
// change of the spread itself, and a robust spread is built to ignore exactly that. A burst of
// oscillation that fills less than half of the window leaves the MAD where it was (its
// breakdown point is 50 %), while the variance grows by the burst's power times its share of
// the window from its first cycle on; and a quantised sensor has a MAD of 0 whenever more
// than half of its window reads one value, which would read as stuck when it is not. The
// standard deviation is also what a vibration channel's RMS is (the RMS of its AC part) and
// what Elastic ML's varp functions take.
//
// Why the sample standard deviation (divided by n - 1): its square is unbiased at every n, so
// a series' first few values are not read as a smaller spread than the full window's more than
// chance makes them; at last = 64 it differs from the RMS about the mean (divided by n) by
// 0.8 %. With one value there is no spread: 0 (the mean kind's convention, "of those seen").
//
// Why recomputed over the ring each record, in two passes (the mean, then the squared
// deviations from it), rather than kept as running sums: sum(x^2) - n mean^2 cancels when the
// spread is small against the level (16 readings at 1e6 with a spread of 0.1: both terms near
// 1.6e13, whose float64 spacing is 0.002, against a difference of 0.16: about two digits
// left), and running sums carry a residue of the values that left, rounded while large values
// were in them: a window that holds a stuck value alone after a wild stretch reads a small
// number, or a negative variance, not 0 (TestDeriveStdStuckAfterNoiseIsZero). Two passes over the float32 values in float64 are exact for a window of
// equal values (n copies of a float32 sum exactly in float64 up to n = 2^29, so the mean is
// the value and every deviation 0) and never drift, at O(last) a record (about 2 ns a value:
// 0.20 us a record at last = 64, 2.4 us at last = 1440, beside a diff's 0.08 us:
// BenchmarkDeriveApply, docs/BENCHMARKS.md §12.59). The order of the sums is fixed (the oldest
// value first), so the pipeline and replay, one code, give the same bits for the same series;
// docs/bench/derive_std_golden.py computes the same definition independently
// (TestDeriveStdGolden). The values are the decoder's, always finite (NaN and Inf are dead
// letters; a missing value is a dead letter or ingest.fill's constant, which a run of missing
// readings then holds like a stuck sensor); their squares in float64 cannot overflow.
//
// Uncertainty (ingest.uncertainty): the first-order propagation of the values' sds,
// sqrt(sum((x_i - mean)^2 sd_i^2)) / ((n - 1) std); where the std is 0 (and for a series'
// first value) that is 0/0, and the limit of the equal-sds case is taken: RMS(sd) /
// sqrt(max(n - 1, 1)).

// std is op's sample standard deviation of the series' last op.last values, the current one
// included. k is op's index among d.ops (for fill and pos).
func (d *Deriver) std(op *deriveOp, s *series, k int) {
	half := len(s.mring) / 2 // withSD: the sds' rings start here
	ring := s.mring[op.slot : op.slot+op.last]
	n, p := int(s.fill[k]), int(s.pos[k])
	ring[p] = d.out.Values[op.src]
	var sds []float32
	if d.withSD {
		sds = s.mring[half+op.slot : half+op.slot+op.last]
		sds[p] = d.out.SD[op.src]
	}
	n = min(n+1, op.last)
	p = (p + 1) % op.last
	s.fill[k], s.pos[k] = int32(n), int32(p)
	// The window oldest first: ring[p:], then ring[:p] when the ring is full; ring[:n] before.
	older, newer := ring[:n], ring[:0]
	if n == op.last {
		older, newer = ring[p:], ring[:p]
	}
	var sum float64
	for _, v := range older {
		sum += float64(v)
	}
	for _, v := range newer {
		sum += float64(v)
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range older {
		dev := float64(v) - mean
		ss += float64(dev * dev) // (the product rounded first: no fused multiply-add)
	}
	for _, v := range newer {
		dev := float64(v) - mean
		ss += float64(dev * dev)
	}
	var sd float64
	if n > 1 {
		sd = math.Sqrt(ss / float64(n-1))
	}
	d.out.Values[op.dst] = finite32(sd)
	if !d.withSD {
		return
	}
	var prop, sum2 float64 // sum((x_i - mean)^2 sd_i^2), sum(sd_i^2); positions as the values'
	if n == op.last {
		for i, v := range ring {
			dev, e := float64(v)-mean, float64(sds[i])
			prop += float64(float64(dev*dev) * float64(e*e))
			sum2 += float64(e * e)
		}
	} else {
		for i, v := range ring[:n] {
			dev, e := float64(v)-mean, float64(sds[i])
			prop += float64(float64(dev*dev) * float64(e*e))
			sum2 += float64(e * e)
		}
	}
	var u float64
	if sd > 0 && !math.IsInf(sd, 0) {
		u = math.Sqrt(prop) / float64(float64(n-1)*sd)
	} else {
		u = math.Sqrt(sum2/float64(n)) / math.Sqrt(float64(max(n-1, 1)))
	}
	d.out.SD[op.dst] = finite32(u)
}
