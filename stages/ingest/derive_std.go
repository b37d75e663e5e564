package ingest

import "math"

// The std kind (ingest.derive, DeriveStd): the rolling spread of a feature over its series'
// last `last` values, the current one included, less the two values farthest from their mean:
// the sample standard deviation of the other last - 2. While the window fills (a series' first
// last - 1 values, its column warming: derive_warmup.go, scored at the model's centre), the
// sample standard deviation of all the values seen, 0 for the first.
//
// Why values left out: a spike of +25 sd in a window of 32 otherwise ordinary values lifts
// their standard deviation to about 4.5 sd, and it stays there for the 32 records the window
// holds it; at 0.1 % spikes that aftermath is 3.2 % of the records, inside the band the models
// calibrate their tail from, and it cost most of the spikes on generated streams
// (docs/BENCHMARKS.md §12.61). Left out, a spike cannot move the spread at all: the window's
// other values give it (TestDeriveStdSpikesLeftOut). Why two and not one: with one left out, a
// window holding two spikes (0.05 % of the records at 0.1 % spikes and last = 32, the square
// of the share) reads about 4.6 sd and is then the rarest thing in the column: on the same
// streams it restored the spikes' recall but those windows were flagged, at a precision of
// 0.50-0.86 (§12.61's addendum, where the count was chosen, on generated data; three spikes in
// one window are about 0.0005 % of the records). Why the farthest from the mean and not from
// the median: a spike is always among the farthest from the mean once it is further out than
// the others' spread (at n values a single one is (n - 1)/n of its height from the mean, an
// ordinary value 1/n of it plus its own deviation), the mean is a pass the spread makes anyway,
// and a median would need a sorted copy. Both are taken from the whole window's mean, the
// farthest first; ties (a window of two levels, an oscillation's extremes) leave out the
// oldest, so the result is a function of the window's values and their order. What it costs:
// a third spike within `last` records moves it as one spike moved the plain standard
// deviation; a window of equal values but two reads 0 (two odd readings in a stuck stretch do
// not hide the stuck sensor); and the spread of ordinary noise reads lower by leaving out its
// largest deviations (for Gaussian noise, 14 % at last = 32, 9 % at 64, 5 % at 128; its
// record-to-record variation relative to its level hardly changes: 0.137 against 0.128 at 32),
// a scale the model learns like any other.
//
// Why the standard deviation of the rest and not a robust spread (a MAD): the faults it is for
// are a change of the spread itself, and a robust spread is built to ignore exactly that. A
// burst of oscillation that fills less than half of the window leaves the MAD where it was
// (its breakdown point is 50 %), while the variance grows by the burst's power times its share
// of the window from its first cycles on (two values left out of a burst of many change it
// little); and a quantised sensor has a MAD of 0 whenever more than half of its window reads
// one value, which would read as stuck when it is not (here only a window of one value but at
// most two others reads 0). The standard deviation is also what a vibration channel's RMS is
// (the RMS of its AC part) and what Elastic ML's varp functions take.
//
// Why the sample standard deviation (divided by m - 1 for the m values kept): its square is
// unbiased at every m. Why a filling window whole: leaving two out of a few values reads them
// as near 0 (of four values the middle two), and the warming records' values still enter the
// models' window: left out, a restart of 20 keys put 60 exact zeros in it, which moved the
// calibration so that a +12 sd spike on a warming key scored 4.93, unflagged
// (TestReplayRollingWarmupNotFlagged; 8.75 with all values kept while filling). `last` is at
// least 4 for std (deriveconfig.go), so a full window keeps two values or more.
//
// Why recomputed over the ring each record, in passes over it (the mean, the two farthest
// values, the mean of the rest, then the squared deviations from it), rather than
// kept as running sums: sum(x^2) - n mean^2 cancels when the spread is small against the level
// (16 readings at 1e6 with a spread of 0.1: both terms near 1.6e13, whose float64 spacing is
// 0.002, against a difference of 0.16: about two digits left), and running sums carry a
// residue of the values that left, rounded while large values were in them: a window that
// holds a stuck value alone after a wild stretch reads a small number, or a negative variance,
// not 0 (TestDeriveStdStuckAfterNoiseIsZero). The sum of the rest is summed afresh, not the
// whole sum less the values left out, for the same reason (a spike of 1e30 would leave nothing
// of the others in it). Passes over the float32 values in float64 are exact for a window of
// equal values (n copies of a float32 sum exactly in float64 up to n = 2^29, so the mean is
// the value and every deviation 0) and never drift, at O(last) a record (BenchmarkDeriveApply,
// docs/BENCHMARKS.md §12.59 and §12.61's addendum). The order of the sums is fixed (the oldest
// value first), so the pipeline and replay, one code, give the same bits for the same series;
// docs/bench/derive_std_golden.py computes the same definition independently
// (TestDeriveStdGolden). The values are the decoder's, always finite (NaN and Inf are dead
// letters; a missing value is a dead letter or ingest.fill's constant, which a run of missing
// readings then holds like a stuck sensor); their squares in float64 cannot overflow.
//
// Uncertainty (ingest.uncertainty): the first-order propagation of the kept values' sds (which
// values are left out is piecewise constant in the values, so it adds no first-order term),
// sqrt(sum((x_i - mean)^2 sd_i^2)) / ((m - 1) std) over the m kept; where the std is 0 that is
// 0/0, and the limit of the equal-sds case is taken: RMS(sd) / sqrt(m - 1) of the kept. For a
// series' first value, its sd.

// std is op's spread of the series' last op.last values, the current one included, less the
// two farthest from their mean once the window is full: the sample standard deviation of the
// others (see above). k is
// op's index among d.ops (for fill and pos).
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
	// The window oldest first, as ranges of ring indices: [p, last) then [0, p) when the ring
	// is full; [0, n) before.
	var buf, keptBuf [2 + 2*stdLeftOut]stdSpan
	win := append(buf[:0], stdSpan{0, n})
	if n == op.last {
		win = append(buf[:0], stdSpan{p, op.last}, stdSpan{0, p})
	}
	// A full window less the two values farthest from its mean; a window still filling (its
	// column warming: scored at the model's centre) whole.
	m, kept := n, win // the values kept
	if n == op.last {
		m = n - stdLeftOut
		all := stdSum(ring, win) / float64(n)
		kept = stdWithout(keptBuf[:0], win, stdFarthest(ring, win, all))
	}
	var sd, mean float64
	if m >= 2 {
		mean = stdSum(ring, kept) / float64(m)
		sd = math.Sqrt(stdSquares(ring, kept, mean) / float64(m-1))
	}
	d.out.Values[op.dst] = finite32(sd)
	if !d.withSD {
		return
	}
	var u float64
	if m < 2 {
		// A series' first value: no spread, and no propagation; its sd.
		var sum2 float64
		for _, e := range sds[:n] {
			sum2 += float64(float64(e) * float64(e))
		}
		u = math.Sqrt(sum2 / float64(n))
	} else {
		var prop, sum2 float64 // sum((x_i - mean)^2 sd_i^2), sum(sd_i^2) over the values kept
		for _, r := range kept {
			for i := r.from; i < r.to; i++ {
				dev, e := float64(ring[i])-mean, float64(sds[i])
				prop += float64(float64(dev*dev) * float64(e*e))
				sum2 += float64(e * e)
			}
		}
		if sd > 0 && !math.IsInf(sd, 0) {
			u = math.Sqrt(prop) / float64(float64(m-1)*sd)
		} else {
			u = math.Sqrt(sum2/float64(m)) / math.Sqrt(float64(m-1))
		}
	}
	d.out.SD[op.dst] = finite32(u)
}

// stdLeftOut is how many of its window's values the std leaves out: the farthest from their
// mean. std's `last` is at least stdLeftOut + 2 (deriveconfig.go), so that a full window keeps
// two values or more.
const stdLeftOut = 2

// stdSpan is a range of ring indices, [from, to).
type stdSpan struct{ from, to int }

// stdSum is the float64 sum of ring's values in spans, in their order.
func stdSum(ring []float32, spans []stdSpan) float64 {
	var sum float64
	for _, r := range spans {
		for _, v := range ring[r.from:r.to] {
			sum += float64(v)
		}
	}
	return sum
}

// stdFarthest is the ring indices of the two values in spans farthest from mean, in one pass
// in the spans' order: the farthest, then the farthest of the others, each the first (the
// oldest) of those equally far; spans hold three values or more.
func stdFarthest(ring []float32, spans []stdSpan, mean float64) [stdLeftOut]int {
	far0, far1, best0, best1 := -1, -1, -1.0, -1.0
	for _, r := range spans {
		for i := r.from; i < r.to; i++ {
			dist := math.Abs(float64(ring[i]) - mean)
			if dist > best1 { // rarely: most values are nearer than the second farthest so far
				if dist > best0 {
					far0, far1, best0, best1 = i, far0, dist, best0
				} else {
					far1, best1 = i, dist
				}
			}
		}
	}
	return [stdLeftOut]int{far0, far1}
}

// stdWithout appends to dst the spans less the ring indices out, in the spans' order.
func stdWithout(dst, spans []stdSpan, out [stdLeftOut]int) []stdSpan {
	if out[0] > out[1] {
		out[0], out[1] = out[1], out[0]
	}
	for _, r := range spans {
		from := r.from
		for _, o := range out {
			if o >= from && o < r.to {
				if o > from {
					dst = append(dst, stdSpan{from, o})
				}
				from = o + 1
			}
		}
		if from < r.to {
			dst = append(dst, stdSpan{from, r.to})
		}
	}
	return dst
}

// stdSquares is the float64 sum of the squared deviations from mean of ring's values in spans,
// in their order.
func stdSquares(ring []float32, spans []stdSpan, mean float64) float64 {
	var ss float64
	for _, r := range spans {
		for _, v := range ring[r.from:r.to] {
			dev := float64(v) - mean
			ss += float64(dev * dev) // (the product rounded first: no fused multiply-add)
		}
	}
	return ss
}
