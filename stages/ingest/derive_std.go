package ingest

import "math"

// The std kind (ingest.derive, DeriveStd): the rolling spread of a feature over its series'
// last `last` values, the current one included, less the two values farthest from their mean:
// the sample standard deviation of the other last - 2. While the window fills (a series' first
// last - 1 values, its column warming: derive_warmup.go, scored as the detect stage imputes it), the
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
// ordinary value 1/n of it plus its own deviation), the mean is a sum the spread keeps anyway,
// and a median would need a sorted copy. Both are taken from the whole window's exact mean,
// the farthest first; ties (a window of two levels, an oscillation's extremes) leave out the
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
// How it is computed, in O(1) a record whatever `last` (docs/BENCHMARKS.md §12.59.3; the two
// float64 passes over the ring it replaced cost 6.65 us a record at last = 1440, §12.59.2):
// from exact sums. The window's sums of x and x^2 (with uncertainty also of sd^2, x sd^2 and
// x^2 sd^2) are wide fixed-point integers (derive_wide.go): a float32 is an integer in units of
// 2^-149, so adding the new value and removing the one that leaves is exact. Nothing is rounded
// while values are in them, so nothing of a value that left remains (a window of one stuck
// value after a wild stretch reads exactly 0, TestDeriveStdStuckAfterNoiseIsZero, where float64
// running sums keep a residue), and nothing cancels (float64 sums of x and x^2 lose the spread
// against the level: 16 readings at 1e6 with a spread of 0.1 leave about two digits of
// sum(x^2) - n mean^2). The sums of the values kept are the window's less the two left out,
// exactly (a spike of 1e30 leaves the others intact), and the variance's numerator
// m sum(x^2) - (sum x)^2 = m (m - 1) var is an exact integer, divided and rounded once to
// float64 (wideQuoFloat, to nearest), then its float64 sqrt, then float32: the std is a
// function of the window's values and their order alone, the same bits in the pipeline and in
// replay (one code) and in docs/bench/derive_std_golden.py, which computes the definition
// independently in exact rationals (TestDeriveStdGolden; TestDeriveStdMatchesExact checks random
// streams against an exact math/big reference in Go). Which two values are farthest from the
// mean is decided exactly too (of two values a != b, by the sign of the integer n (a + b) -
// 2 sum x: (a - mean)^2 - (b - mean)^2 = (a - b)(a + b - 2 mean)). They are among the window's
// two largest and two smallest values (the farthest is its largest or its smallest, the second
// the largest or smallest of the rest; the oldest of equals), which the series keeps in O(1) a
// record: at each wrap of the ring the two largest and smallest of each of its suffixes from a
// multiple of stdBlock on, and those of the values written since the wrap, updated with each; a
// window is the last pass's suffix from its oldest value on (a part block scanned, under
// stdBlock values, then a stored suffix) followed by the values since the wrap. State: the
// values' ring as before (4 bytes a value, 8 with uncertainty), plus 16 bytes of those indices
// per stdBlock values and 16 for the values since the wrap, plus 112 bytes of sums (440 with
// uncertainty): StateBound.
//
// The two float64 passes over the ring it replaced (trimstd26's) rounded each sum in order.
// Their float32 result can differ by one step where that rounding (of the order of last
// float64 ulps of the variance) crosses a float32 rounding boundary: none of 345,000 records
// of noise at last 64-10080 (TestDeriveStdAgainstTwoPass) nor of the golden file's 600. And
// where a window spans more decades than float64 holds (a value of 1e23 among values near 1),
// their rounded mean could not tell the small values' distances apart and left out the oldest
// of them, not the farthest: a different value kept (13 % of the records of a stream spanning
// 60 decades at last 5, 0.6 % at 16, none at 64; TestDeriveStdMatchesExact failed on it first).
// The values are the decoder's, always finite (NaN and Inf are dead letters; a missing value is
// a dead letter or ingest.fill's constant, which a run of missing readings then holds like a
// stuck sensor).
//
// Uncertainty (ingest.uncertainty): the first-order propagation of the kept values' sds (which
// values are left out is piecewise constant in the values, so it adds no first-order term),
// sqrt(sum((x_i - mean)^2 sd_i^2)) / ((m - 1) std) over the m kept; where the std is 0 that is
// 0/0, and the limit of the equal-sds case is taken: RMS(sd) / sqrt(m - 1) of the kept. For a
// series' first value, its sd. The sum is m^-2 (m^2 sum(x^2 sd^2) - 2 m sum(x) sum(x sd^2) +
// sum(x)^2 sum(sd^2)) over the kept, an exact integer divided and rounded once, as the
// variance's numerator.

// stdLeftOut is how many of its window's values the std leaves out: the farthest from their
// mean. std's `last` is at least stdLeftOut + 2 (deriveconfig.go), so that a full window keeps
// two values or more.
const stdLeftOut = 2

// stdBlock is the stride of the stored suffixes' extremes (stdTop): a window's oldest part block
// is scanned, at most stdBlock - 1 values a record, for 16 bytes of state per stdBlock values.
const stdBlock = 16

// stdWideLen is the uint64 words of one std's sums in a series (derive_wide.go): sum x and
// sum x^2, then with uncertainty sum sd^2, sum x sd^2 and sum x^2 sd^2.
func stdWideLen(withSD bool) int {
	if withSD {
		return wideS + wideQ + wideQ + wideB + wideC
	}
	return wideS + wideQ
}

// stdAggLen is the int32s of one std's extremes in a series: those of the values written since
// the ring's last wrap, then those of each suffix of the ring from a multiple of stdBlock.
func stdAggLen(last int) int { return 4 * (1 + (last+stdBlock-1)/stdBlock) }

// sumsAt is a std's sums laid out in w as stdWideLen says.
func sumsAt(w []uint64, withSD bool) wideSums { return wideSums{w: w, std: true, sd: withSD} }

// stdScratch is the Deriver's working space for std (one record at a time).
type stdScratch struct {
	kept           [wideS + 2*wideQ + wideB + wideC]uint64 // the kept values' sums (keptIn)
	absS           [wideS]uint64
	absB           [wideB]uint64
	sq             [wideSq]uint64
	t              [wideT]uint64
	p, prod, prod2 [wideP]uint64
	dist           [1][wideS]uint64
}

// stdTop is the ring indices + 1 (0: none) of a run of a window's values' two largest (the
// first two) and two smallest (the last two), in that order, the oldest first among equal
// values: as stored in a series (stdExt works on them).
type stdTop [4]int32

// stdExt is a stdTop with the values of its indices, to put values in from the oldest on.
type stdExt struct {
	id [4]int32
	v  [4]float32 // -Inf where no largest is held yet, +Inf where no smallest (values are finite)
}

// newExt is the extremes of no values.
func newExt() stdExt {
	inf := float32(math.Inf(1))
	return stdExt{v: [4]float32{-inf, -inf, inf, inf}}
}

// put takes in the value v of ring index id - 1, newer than those held.
func (x *stdExt) put(id int32, v float32) {
	if v > x.v[1] { // strictly: of equal values the older stays
		if v > x.v[0] {
			x.id[1], x.v[1], x.id[0], x.v[0] = x.id[0], x.v[0], id, v
		} else {
			x.id[1], x.v[1] = id, v
		}
	}
	if v < x.v[3] {
		if v < x.v[2] {
			x.id[3], x.v[3], x.id[2], x.v[2] = x.id[2], x.v[2], id, v
		} else {
			x.id[3], x.v[3] = id, v
		}
	}
}

// scan takes in ring[from:to], oldest first.
func (x *stdExt) scan(ring []float32, from, to int) {
	for i := from; i < to; i++ {
		if v := ring[i]; v > x.v[1] || v < x.v[3] {
			x.put(int32(i+1), v)
		}
	}
}

// then takes in newer's extremes, whose values are all newer than x's: its largest among the
// largest, its smallest among the smallest.
func (x *stdExt) then(newer *stdExt) {
	for k := range 2 {
		if id, v := newer.id[k], newer.v[k]; id != 0 && v > x.v[1] {
			if v > x.v[0] {
				x.id[1], x.v[1], x.id[0], x.v[0] = x.id[0], x.v[0], id, v
			} else {
				x.id[1], x.v[1] = id, v
			}
		}
		if id, v := newer.id[2+k], newer.v[2+k]; id != 0 && v < x.v[3] {
			if v < x.v[2] {
				x.id[3], x.v[3], x.id[2], x.v[2] = x.id[2], x.v[2], id, v
			} else {
				x.id[3], x.v[3] = id, v
			}
		}
	}
}

// extOf is the stored t with its values from ring.
func extOf(ring []float32, t *stdTop) stdExt {
	x := newExt()
	for k, id := range t {
		if id != 0 {
			x.id[k], x.v[k] = id, ring[id-1]
		}
	}
	return x
}

// std is op's spread of the series' last op.last values, the current one included, less the
// two farthest from their mean once the window is full: the sample standard deviation of the
// others (see above). k is op's index among d.ops (for fill and pos).
func (d *Deriver) std(op *deriveOp, s *series, k int) {
	sums := sumsAt(s.wide[op.wide:op.wide+stdWideLen(d.withSD)], d.withSD)
	agg := s.agg[op.agg : op.agg+stdAggLen(op.last)]
	w := d.window(op, s, k)
	d.roll(op, s, k, &w, sums, agg)
	// The sums of the values kept: a full window's less its two farthest from their mean.
	kept, m := d.stdScr.keptIn(sums), w.n
	if w.n == op.last {
		m = d.leaveOutFarthest(&w, sums, kept, agg)
	}
	sc := &d.stdScr
	var sd float64
	if m >= 2 { // m (m - 1) var = m sum(x^2) - (sum x)^2, in units of 2^-298
		negS := wideAbs(sc.absS[:], kept.s())
		spS := spanOf(sc.absS[:])
		spSq := wideMul(sc.sq[:], sc.absS[:], spS, sc.absS[:], spS)
		wideMulSmall(sc.t[:], kept.q(), spanOf(kept.q()), uint64(m))
		wideSubFrom(sc.t[:], sc.sq[:], spSq)
		sd = math.Sqrt(wideQuoFloat(sc.t[:], uint64(m)*uint64(m-1), -298))
		if d.withSD {
			d.out.SD[op.dst] = finite32(d.stdUncertainty(kept, m, sd, negS, spS, spSq))
		}
	} else if d.withSD { // a series' first value: no spread, and no propagation; its sd
		d.out.SD[op.dst] = finite32(math.Abs(float64(d.out.SD[op.src])))
	}
	d.out.Values[op.dst] = finite32(sd)
}

// stdUncertainty is the propagation of the kept values' sds to their std sd (m >= 2 of them;
// d.stdScr's absS and sq hold |sum x| and its square, of spans spS and spSq, negS its sign).
func (d *Deriver) stdUncertainty(kept wideSums, m int, sd float64, negS bool, spS, spSq wideSpan) float64 {
	sc := &d.stdScr
	if sd == 0 { // 0/0: the equal-sds limit, RMS(sd) / sqrt(m - 1)
		return math.Sqrt(wideQuoFloat(kept.a(), uint64(m), -298)) / math.Sqrt(float64(m-1))
	}
	// m^2 sum((x - mean)^2 sd^2) = m^2 sum(x^2 sd^2) - 2 m sum(x) sum(x sd^2) +
	// sum(x)^2 sum(sd^2), in units of 2^-596; >= 0, each term below 2^1162.
	wideMulSmall(sc.p[:], kept.c(), spanOf(kept.c()), uint64(m)*uint64(m))
	wideAddTo(sc.p[:], sc.prod[:], wideMul(sc.prod[:], sc.sq[:], spSq, kept.a(), spanOf(kept.a())))
	negB := wideAbs(sc.absB[:], kept.b())
	sp := wideMul(sc.prod2[:], sc.absS[:], spS, sc.absB[:], spanOf(sc.absB[:]))
	if sp.hi > sp.lo {
		sp = wideMulSmall(sc.prod2[:sp.hi+1], sc.prod2[:sp.hi], sp, 2*uint64(m))
	}
	if negS == negB {
		wideSubFrom(sc.p[:], sc.prod2[:], sp)
	} else {
		wideAddTo(sc.p[:], sc.prod2[:], sp)
	}
	prop := wideQuoFloat(sc.p[:], uint64(m)*uint64(m), -596)
	return math.Sqrt(prop) / float64(float64(m-1)*sd)
}

// stdSuffixes sets agg's stored extremes after a wrap of ring: those of each suffix of the pass
// just written from a multiple of stdBlock on, and none yet since the wrap.
func stdSuffixes(ring []float32, agg []int32) {
	cur := newExt()
	for j := len(agg)/4 - 2; j >= 0; j-- {
		blk := newExt()
		blk.scan(ring, j*stdBlock, min((j+1)*stdBlock, len(ring)))
		blk.then(&cur)
		cur = blk
		*(*stdTop)(agg[4*(j+1) : 4*(j+2)]) = cur.id
	}
	*(*stdTop)(agg[:4]) = stdTop{}
}

// stdFarthest is the ring indices of the two values of the full window farthest from its mean
// (sum x / n, sum the exact sum of the window's values: two's complement in units of 2^-149),
// the farthest first, each the oldest of those equally far; p is the oldest value's index.
func (d *Deriver) stdFarthest(ring []float32, agg []int32, sum []uint64, p int) [stdLeftOut]int {
	n := len(ring)
	// The window's extremes: its oldest part block's, the stored suffix's after it, the values'
	// since the wrap.
	var win stdExt
	if j := (p + stdBlock - 1) / stdBlock; p > 0 {
		win = newExt()
		win.scan(ring, p, min(j*stdBlock, n))
		if 4*(j+1) < len(agg) {
			suf := extOf(ring, (*stdTop)(agg[4*(j+1):4*(j+2)]))
			win.then(&suf)
		}
		since := extOf(ring, (*stdTop)(agg[:4]))
		win.then(&since)
	} else {
		win = extOf(ring, (*stdTop)(agg[4:8]))
	}
	// The farthest is the largest or the smallest (the oldest of equals); the second, the
	// largest or the smallest of the others.
	sc := &d.stdScr
	neg2S := sc.absS[:] // -2 sum x
	sc.absS = [wideS]uint64(sum)
	wideNeg(neg2S)
	wideDouble(neg2S)
	age := func(i int) int { return (i - p + n) % n }
	// farther is whether ring[a] is farther from the mean than ring[b] (the older where equally
	// far): (a - mean)^2 - (b - mean)^2 = (a - b)(a + b - 2 mean), whose second factor has the
	// sign of n (a + b) - 2 sum x, exactly.
	farther := func(a, b int) bool {
		va, vb := ring[a], ring[b]
		if va != vb {
			sc.dist[0] = sc.absS
			z := sc.dist[0][:]
			ma, sa, na := f32Fixed(va)
			mb, sb, nb := f32Fixed(vb)
			wideAdd64(z, uint64(n)*ma, sa, na)
			wideAdd64(z, uint64(n)*mb, sb, nb)
			if !wideIsZero(z) {
				return (va > vb) != wideIsNeg(z)
			}
		}
		return age(a) < age(b)
	}
	t0, t1, b0, b1 := int(win.id[0]-1), int(win.id[1]-1), int(win.id[2]-1), int(win.id[3]-1)
	first := t0
	if t0 != b0 && farther(b0, t0) {
		first = b0
	}
	hi, lo := t0, b0
	if first == t0 {
		hi = t1
	}
	if first == b0 {
		lo = b1
	}
	second := hi
	if hi != lo && farther(lo, hi) {
		second = lo
	}
	return [stdLeftOut]int{first, second}
}
