package detect

import (
	"math"
	"slices"
)

// A key's tail fitted from the fleet (detect.keys.tail: fleet; docs/BENCHMARKS.md §13.4.2). A
// key's model calibrates against at most keys.window (200) of its own readings: its empirical
// tail ends near 2.3 decades and beyond that it extrapolates, which puts a +6 robust sd reading
// near min_score, so half of a +6 sd shift is not significant and joins the key's next build
// (§13.4). Partial pooling: each key keeps its own location and scale (its model's median and
// robust sd per feature, rank.Tail.Deviation), and the significance of a record's largest
// standardised deviation is read from a tail fitted on the pooled deviations of the whole
// fleet's records (thousands of them), not from the key's 200. Only the tail's shape is pooled,
// so a fleet of unlike sensors (units 1 and 1000) still works; the pooled state is the fleet's,
// so a key's accounted bytes do not grow.
//
// The pool is the last deviations of the warm keys' records that were not significant (a
// fault's records would fatten the tail that is to find them), from keys whose model is built
// built from at least three quarters of a window (fleetWeight), each key's in one of fleetShards
// shards by its key's hash. Each shard's tail is fitted between its 99th and 99.9th
// percentiles, and the fleet's tail is the median of the shards' fits: a fault that one key's
// model learns puts its not-significant records into that key's shard only (a +6 sd shift of 300
// records was 4 % of one pool of the five-key fleet's records, beyond its 99th percentile, and
// fattened the tail that then let more of it in), and the median does not follow one shard.
// -log10 P rises linearly in the deviation from 2 decades at the 99th percentile to 3 at the
// 99.9th, and on beyond (an exponential tail: conservative for a normal sensor's, exact for a
// Laplace one's). A record's score is its key's own, raised to the fleet's where that is larger,
// by a weight that grows with the key's model's rows from half a window to three quarters
// (shrinkage towards the key's own tail while it is young: fleetWeight).
//
// The fleet's fit changes between the keys' passes only, from the pass's records in batch order:
// every path (serial, parallel, device) decides a batch's records against the same fit, and
// gives them the same scores. A key's verdicts then depend on the fleet's other records (the
// property that a warm key scores as when replayed alone holds under keys.tail: own only).
type fleetTail struct {
	shards [fleetShards]fleetShard
	// lo and hi are the medians of the fitted shards' 99th and 99.9th percentiles (ok: at
	// least one shard is fitted and hi > lo).
	lo, hi float64
	ok     bool
	// obs are the current pass's deviations to pool, by record of the batch (NaN: none), shard
	// their keys' shards.
	obs   []float32
	shard []uint8
	// scratch is the fits' (a shard's top values, the shards' quantiles).
	scratch []float32
}

// fleetShard is one shard's pool: ring holds its deviations, next is where the next one goes,
// size how many it holds, fresh how many came since its last fit, lo and hi its fit (ok: fitted).
type fleetShard struct {
	ring              []float32
	next, size, fresh int
	lo, hi            float32
	ok                bool
}

const (
	fleetShards = 16   // the pool's shards (a key's deviations go to one)
	fleetPool   = 2048 // deviations a shard holds: its 99.9th percentile is its third largest
	fleetReady  = 1024 // a shard's deviations before its first fit
	fleetRefit  = 512  // a shard's deviations between its fits
)

// begin starts a pass of n records: the previous pass's deviations are pooled in record order
// and the tails refitted where due.
func (f *fleetTail) begin(n int) {
	f.fold()
	if cap(f.obs) < n {
		f.obs, f.shard = make([]float32, n), make([]uint8, n)
	}
	f.obs, f.shard = f.obs[:n], f.shard[:n]
	for i := range f.obs {
		f.obs[i] = float32(math.NaN())
	}
}

// fold pools the pass's deviations, refits each shard that fleetRefit came to since its last
// fit (once it holds fleetReady), and the fleet's tail from the shards' fits.
func (f *fleetTail) fold() {
	refit := false
	for i, v := range f.obs {
		if v != v {
			continue
		}
		sh := &f.shards[f.shard[i]]
		if sh.ring == nil {
			sh.ring = make([]float32, fleetPool)
		}
		sh.ring[sh.next] = v
		sh.next = (sh.next + 1) % fleetPool
		sh.size = min(sh.size+1, fleetPool)
		sh.fresh++
		if sh.size >= fleetReady && (!sh.ok || sh.fresh >= fleetRefit) {
			sh.lo, sh.hi, f.scratch = topQuantiles(sh.ring[:sh.size], f.scratch)
			sh.ok, sh.fresh, refit = true, 0, true
		}
	}
	f.obs, f.shard = f.obs[:0], f.shard[:0]
	if refit {
		f.fitFleet()
	}
}

// fitFleet fits the fleet's tail from the shards' fits (none fitted: no tail). It is made at each
// refit of a shard, so it is always the shards' fits' (decodeFleet makes it again from them).
func (f *fleetTail) fitFleet() {
	var lo, hi []float32
	for s := range f.shards {
		if sh := &f.shards[s]; sh.ok {
			lo, hi = append(lo, sh.lo), append(hi, sh.hi)
		}
	}
	if len(lo) == 0 {
		f.lo, f.hi, f.ok = 0, 0, false
		return
	}
	f.lo, f.hi = medianOf(lo), medianOf(hi)
	f.ok = f.hi > f.lo // (shards of ties have no tail to fit: the keys' own scores stand)
}

// topQuantiles are the 0.99 and 0.999 quantiles of a (the values of ranks round(p (n-1)) in a's
// ascending order), from its top n - round(0.99 (n-1)) values kept in order in top (its storage
// reused, returned): one pass, a comparison a value once top is full (a selection among a
// shard's 2,048 was 30 ns a record of the fits at a refit every 512).
func topQuantiles(a, top []float32) (q99, q999 float32, _ []float32) {
	n := len(a)
	k, m := int(math.Round(0.99*float64(n-1))), int(math.Round(0.999*float64(n-1)))
	size := n - k // top holds the values of ranks k .. n-1, ascending
	top = top[:0]
	for _, v := range a {
		switch {
		case len(top) < size:
			top = append(top, v)
			for i := len(top) - 1; i > 0 && top[i] < top[i-1]; i-- {
				top[i], top[i-1] = top[i-1], top[i]
			}
		case v > top[0]:
			top[0] = v
			for i := 1; i < size && top[i] < top[i-1]; i++ {
				top[i], top[i-1] = top[i-1], top[i]
			}
		}
	}
	return top[0], top[m-k], top
}

// medianOf is the median of a (the mean of the middle two of an even count; a is reordered).
func medianOf(a []float32) float64 {
	n := len(a)
	slices.Sort(a)
	if n%2 == 1 {
		return float64(a[n/2])
	}
	return (float64(a[n/2-1]) + float64(a[n/2])) / 2
}

// fleetShardOf is a key's shard: 32-bit FNV-1a of its bytes, folded (not keyHash, the workers'
// 64-bit hash). Saved pools hold their shards by it: another hash would move a key's
// deviations to another shard than its saved ones.
func fleetShardOf(key string) uint8 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return uint8((h ^ h>>16) % fleetShards)
}

// deviation is a record's largest absolute deviation over its features from its key's model, in
// the model's robust sd (rank.Tail.Deviation); NaN values are left out (0 when every one is),
// and it is at most fleetMaxDeviation (a scale of a few ulps cannot make it infinite). Features
// without an interquartile range (rank.Tail.Scaled; fleetUnscaled marks them, j < 16: r is
// noted) are left out too: a count's 1 among its 0s is thousands of its spread-made sd out, against
// a fleet's tail of location-scale readings significant for good, where its own tail learns it
// (TestKeyRecurringEventsLearnt, TestKeyZeroInflatedLearnt). Their own tails judge them. scaled
// is false where every feature was left out so: nothing for the pool (its 0s would thin the
// fleet's tail for the other keys).
func deviation(r *Ranker, raw [][]float32) (z float64, scaled bool) {
	m := 0.0
	for j := range raw {
		if j < 16 && r.fleetUnscaled&(1<<j) != 0 || j >= 16 && !r.Tail.Scaled(j) {
			continue
		}
		scaled = true
		if z := math.Abs(r.Tail.Deviation(j, raw[j][0])); z > m {
			m = z
		}
	}
	return min(m, fleetMaxDeviation), scaled
}

// fleetMaxDeviation bounds a deviation: a record a million robust sd out is as significant as
// any verdict needs (distanceLimit's bound in the distance space).
const fleetMaxDeviation = 1e6

// score is the fleet's surprisal of a largest deviation z (0 below the fit's 99th percentile,
// where the keys' own scores decide).
func (f *fleetTail) score(z float64) float64 {
	if !f.ok || !(z > f.lo) {
		return 0
	}
	return 2 + (z-f.lo)/(f.hi-f.lo)
}

// lift is a record's combined score own (its key's model r's, noted: noteKey) under keys.tail:
// fleet, and notes the record's deviation for the pool (record i of the pass, in r's shard)
// when it is not significant at minScore, the key is fully weighted and a feature of it has a
// scale (deviation).
func (f *fleetTail) lift(r *Ranker, raw [][]float32, own, minScore float64, window, i int) float64 {
	z, scaled := deviation(r, raw)
	w := fleetWeight(int(r.fleetRows), window)
	s := own
	if fs := f.score(z); fs > own {
		s = own + float64(w*(fs-own)) // (rounded: not fused into the sum)
	}
	if s < minScore && w == 1 && scaled && i < len(f.obs) {
		f.obs[i], f.shard[i] = float32(z), r.fleetShard-1
	}
	return s
}

// noteKey notes on key's model r what keys.tail: fleet reads of it at every record: the key's
// shard of the fleet's pool and the model's rows (fleetWeight), so that a decision reads neither
// the key's bytes nor the model's columns' headers (each a cache miss at many keys). Every key
// model is noted where it is built or read back.
func (r *Ranker) noteKey(key string) {
	r.fleetShard = fleetShardOf(key) + 1
	if len(r.Tail.Sorted) > 0 {
		r.fleetRows = int32(len(r.Tail.Sorted[0]))
	}
	r.fleetUnscaled = 0
	for j := range min(len(r.Tail.Sorted), 16) {
		if !r.Tail.Scaled(j) {
			r.fleetUnscaled |= 1 << j
		}
	}
}

// fleetWeight is the share of the fleet's score over the key's own for a key whose model is built
// from rows records (its window's, less its outcasts) of window: none up to half a window, all
// from three quarters on, linear between. (The model's rows, not the key's window: a record is
// decided after later records of its key joined the window on the parallel path, and a scorer's
// key keeps no window.)
// A young key's model may have learnt a fault its warm-up held (joinfleet.py: a sensor joining
// with a fault under way); its own tail, which is the young window's, lets its return to normal
// join its builds and unlearn the fault, where the fleet's would find the return far out and keep
// it out (docs/BENCHMARKS.md §13.4.2: with the weight 2 rows / window the joining fleet's flags
// went 18 -> 450 on seed 3).
func fleetWeight(rows, window int) float64 {
	return min(1, max(0, float64(4*rows-2*window)/float64(window)))
}

// fleetPass is the fleet's tail for a pass of n records under cfg (nil under keys.tail: own).
func (k *keyedScorer) fleetPass(cfg *Config, n int) *fleetTail {
	if cfg.Keys.Tail != TailFleet {
		return nil
	}
	k.fleet.begin(n)
	return &k.fleet
}
