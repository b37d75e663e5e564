package ingest

import "math"

// The mean kind (ingest.derive, DeriveMean): the rolling level of a feature over its series'
// last `last` values, the current one included; with `trim: 2`, less the two values farthest
// from their mean (std's two: derive_std.go): the mean of the other last - 2. While the window
// fills (a series' first last - 1 values, its column warming: derive_warmup.go), the mean of
// all the values seen.
//
// Why an option to leave values out: a spike of height h in a window of `last` ordinary values
// lifts their mean by h / last, and it stays there for the `last` records the window holds it;
// at 0.1 % spikes that aftermath is last / 10 % of the records sharing one extreme tail of the
// column, which fills the distance calibration's top records, tips the agreement weights to
// the density and cost up to half of the spikes on generated streams (temp's mean over 16:
// recall 0.46-0.83 on 5 of 6 streams, docs/BENCHMARKS.md §12.61, §12.63). Left out, one or two
// spikes in a window do not move the mean at all (TestDeriveMeanSpikesLeftOut), and every
// spike was found on those streams (§12.66). Why not by default: the trimmed mean of noise
// varies more than the plain mean (the two farthest from the mean are often on one side, so
// leaving them out moves it: its sd is about 16 % larger at last 8 and 16, 12 % at 32, 8 % at
// 60), and small sustained shifts, what a mean is for, stand out that much less: generated
// shifts of 1 and 2 sd lost up to half of their recall, and configs/skab.yaml's slow plant
// (TestReplaySlowPlantConfig) raised 8.6 % false alarms before its fault against 0.5 % (§12.66).
// Why the same two as std, farthest from the window's mean, the oldest of a tie: the two kinds
// then agree on what a window holds, and the choice is std's (derive_std.go says why two, and
// why from the mean). A third spike within `last` records moves it as one spike moved the
// plain mean.
//
// How it is computed, in O(1) a record whatever `last`: the window's exact sum of x (and with
// uncertainty of sd^2) is a wide fixed-point integer (derive_wide.go), so a value that leaves
// is removed exactly (float64 running sums lost the small values beside a large one that then
// left, until the ring's next wrap: TestDeriveMeanMatchesExact); with trim the two farthest
// values are std's (stdFarthest, from the window's two largest and two smallest, which the
// series keeps as std's do: stdAggLen) and the kept sum is the window's less theirs, exactly.
// The sum is divided by m and rounded once to float64 (wideQuoFloat), then to float32: a
// function of the window's values and their order alone, the same bits in the pipeline and in
// replay, and in docs/bench/derive_mean_golden.py's exact rationals (TestDeriveMeanGolden).
//
// Uncertainty (ingest.uncertainty): first order, sqrt(sum of the kept values' sd^2) / m,
// independent errors (which values are left out is piecewise constant in the values, so it
// adds no first-order term); the exact sum divided by m^2 and rounded once, its sqrt.
//
// State: the values' ring (4 bytes a value, 8 with uncertainty), 40 bytes of sums (112 with
// uncertainty), and with trim std's extremes (16 bytes per stdBlock values and 16):
// StateBound.

// meanTrimFrom is the least `last` a trimmed mean takes: its full windows keep two values.
const meanTrimFrom = stdLeftOut + 2

// meanWideLen is the uint64 words of one mean's sums in a series: sum x, then with uncertainty
// sum sd^2.
func meanWideLen(withSD bool) int {
	if withSD {
		return wideS + wideQ
	}
	return wideS
}

// meanSumsAt is a mean's sums laid out in w as meanWideLen says.
func meanSumsAt(w []uint64, withSD bool) wideSums { return wideSums{w: w, sd: withSD} }

// mean is op's mean of the series' last op.last values, the current one included, less the two
// farthest from their mean once the window is full where op.trim (see above). k is op's index
// among d.ops (for fill and pos).
func (d *Deriver) mean(op *deriveOp, s *series, k int) {
	sums := meanSumsAt(s.wide[op.wide:op.wide+meanWideLen(d.withSD)], d.withSD)
	var agg []int32
	if op.trim {
		agg = s.agg[op.agg : op.agg+stdAggLen(op.last)]
	}
	w := d.window(op, s, k)
	d.roll(op, s, k, &w, sums, agg)
	kept, m := d.stdScr.keptIn(sums), w.n // (with trim a full window's less its two farthest)
	if op.trim && w.n == op.last {
		m = d.leaveOutFarthest(&w, sums, kept, agg)
	}
	sc := &d.stdScr
	neg := wideAbs(sc.absS[:], kept.s()) // sum x in units of 2^-149
	v := wideQuoFloat(sc.absS[:], uint64(m), -149)
	if neg {
		v = -v
	}
	d.out.Values[op.dst] = finite32(v)
	if d.withSD { // sum sd^2 in units of 2^-298, over m^2
		d.out.SD[op.dst] = finite32(math.Sqrt(wideQuoFloat(kept.a(), uint64(m)*uint64(m), -298)))
	}
}
