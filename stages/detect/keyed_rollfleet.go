package detect

import (
	"math"
	"slices"
)

// A key's rolling column judged against the fleet (keyroll28, defect 2 of docs/BENCHMARKS.md
// §12.59.1; the rule: docs/bench/notes/keyroll28_rule.md).
//
// A key's window holds about n / last independent values of a rolling column (keyed_rolling.go),
// so its median and robust sd of the column are a short stretch's, and the column wanders away
// from them before the key's next build: the key's in-sample calibration calls ordinary values of
// it rare. How far it wanders is not the key's to learn from its 200 records, but every record a
// key's model scores is out of that model's sample (the model was built before it came), and the
// fleet scores thousands of them. So the stage pools, over the fleet, each scored record's
// deviation |x_j - median_j| / robust sd_j of each rolling column j in its scoring model's own
// units (rank.Tail.Deviation: not widened), and of the columns that are not rolling (one
// reference pool): the records the key's model did not find significant (a fault's records would
// fatten the tail that is to find them: keys.tail: fleet's rule), by the scoring model's age
// (young: its rows below 3/4 keys.window, fleetWeight < 1; full). Each pool keeps its last
// rollPool values and, once it holds rollReady, is fitted (and after every rollRefit more): its
// rollQuantile q. A key's build from n records widens rolling column j by
//
//	w_j = max(1, q_j / q_ref)      (of n's age class; q_ref: the non-rolling columns' pool, or
//	                                the normal's two-sided point at rollQuantile where there is
//	                                none or it is not fitted)
//
// and, while q_j is not fitted (a cold fleet, a restart: the pools are not saved), by
// rollingWidth, the t-width of n / last independent values (the prior). The widths widen what
// keyed_rolling.go's widen and the outcast rule widen. The pools' fits change at a pass's start
// only (begin), from the last pass's deviations in record order: the serial, parallel and device
// paths build every key of a pass with the same widths, and a key's deferred builds (startBuilds)
// finish before the next pass begins.

const (
	rollPool     = 8192  // deviations a pool keeps
	rollReady    = 2048  // a pool's deviations before its first fit
	rollRefit    = 1024  // a pool's deviations between its fits
	rollQuantile = 0.999 // the pools' fitted quantile
	rollNormalQ  = 3.2905267314919255
	rollClasses  = 2 // the scoring model's age: 0 young (fleetWeight < 1), 1 full
)

// rollFleet is the fleet's pools of a stage whose features include rolling columns: created with
// the stage (Config.roll), kept across a Reconfigure.
type rollFleet struct {
	last []int // per feature, its `last` (0: not rolling; Deps.Rolling)
	// pools[c][j] is class c's pool of feature j's deviations (rolling j only); pools[c][d]
	// the reference (every column that is not rolling).
	pools [rollClasses][]rollPoolOf
	// fit is the pools' fitted quantiles, replaced whole at a refit (a build reads it: never
	// written in place).
	fit *rollFit
	// obs are the current pass's deviations, d a record (NaN: none), class their records' (255:
	// nothing noted).
	obs   []float32
	class []uint8
}

// rollPoolOf is one pool: ring its deviations, next where the next goes, size how many it holds,
// fresh how many came since its last fit, q its fit (ok: fitted).
type rollPoolOf struct {
	ring              []float32
	next, size, fresh int
	q                 float64
	ok                bool
}

// rollFit is the pools' fits at a pass: q[c][j] and ok[c][j] as rollPoolOf's (j = d: the reference).
type rollFit struct {
	q  [rollClasses][]float64
	ok [rollClasses][]bool
}

// newRollFleet is the pools of a stage whose features' `last` is rolling (nil where none is
// rolling).
func newRollFleet(rolling []int) *rollFleet {
	if len(rolling) == 0 {
		return nil
	}
	f := &rollFleet{last: rolling}
	for c := range f.pools {
		f.pools[c] = make([]rollPoolOf, len(rolling)+1)
	}
	return f
}

// begin starts a pass of n records: the last pass's deviations are pooled and the pools refitted
// where due.
func (f *rollFleet) begin(n int) {
	f.fold()
	d := len(f.last)
	f.obs, f.class = grow(f.obs, n*d), grow(f.class, n)
	for i := range f.class {
		f.class[i] = 255
	}
}

// fold pools the pass's deviations in record order, refits the pools that are due and, if any
// was, makes a new fit.
func (f *rollFleet) fold() {
	d := len(f.last)
	refit := false
	var scratch []float32
	for i, c := range f.class {
		if c == 255 {
			continue
		}
		for j, v := range f.obs[i*d : (i+1)*d] {
			if v != v {
				continue
			}
			p := j
			if f.last[j] <= 1 {
				p = d
			}
			pl := &f.pools[c][p]
			if pl.ring == nil {
				pl.ring = make([]float32, rollPool)
			}
			pl.ring[pl.next] = v
			pl.next = (pl.next + 1) % rollPool
			pl.size = min(pl.size+1, rollPool)
			pl.fresh++
			if pl.size >= rollReady && (!pl.ok || pl.fresh >= rollRefit) {
				scratch = append(scratch[:0], pl.ring[:pl.size]...)
				slices.Sort(scratch)
				pl.q = float64(scratch[int(math.Round(rollQuantile*float64(pl.size-1)))])
				pl.ok, pl.fresh, refit = true, 0, true
			}
		}
	}
	f.obs, f.class = f.obs[:0], f.class[:0]
	if refit || f.fit == nil {
		fit := &rollFit{}
		for c := range f.pools {
			fit.q[c], fit.ok[c] = make([]float64, d+1), make([]bool, d+1)
			for p := range f.pools[c] {
				fit.q[c][p], fit.ok[c][p] = f.pools[c][p].q, f.pools[c][p].ok
			}
		}
		f.fit = fit
	}
}

// note notes record i's deviations from its key's model r (raw: its values, one each) for the
// pools; the caller notes only records r did not find significant.
func (f *rollFleet) note(r *Ranker, raw [][]float32, window, i int) {
	d := len(f.last)
	if i >= len(f.class) || len(raw) != d {
		return
	}
	f.class[i] = rollClassOf(int(r.fleetRows), window)
	obs := f.obs[i*d : (i+1)*d]
	for j := range raw {
		obs[j] = float32(math.NaN())
		if j < 16 && r.fleetUnscaled&(1<<j) != 0 || j >= 16 && !r.Tail.Scaled(j) {
			continue // (a spread-made sd: not a location-scale deviation; keyed_fleet.go's deviation)
		}
		if v := raw[j][0]; v == v {
			obs[j] = float32(min(math.Abs(r.Tail.Deviation(j, v)), fleetMaxDeviation))
		}
	}
}

// rollClassOf is the age class of a key's model of rows records in a window of `window`.
func rollClassOf(rows, window int) uint8 {
	if fleetWeight(rows, window) < 1 {
		return 0
	}
	return 1
}

// width is rolling column j's width for a key's build from n records (a window of `window`,
// min_score s): the fleet's ratio where its pool of n's class is fitted, else the prior.
func (f *rollFleet) width(j, n, window int, s float64) float64 {
	c := rollClassOf(n, window)
	if fit := f.fit; fit != nil && fit.ok[c][j] {
		ref := rollNormalQ
		if d := len(f.last); fit.ok[c][d] && fit.q[c][d] > 0 {
			ref = fit.q[c][d]
		}
		return max(1, min(fit.q[c][j]/ref, math.MaxFloat32))
	}
	return rollingWidth(n, f.last[j], s)
}
