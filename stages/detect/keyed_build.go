package detect

import (
	"math"
	"slices"
	"sync"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// A key's model build (keys.window records, 200 at the defaults) is the keyed stage's largest
// host cost: one build per keys.rebuild_records (keys.window/4) records of a key, about half the CPU at a million keys
// (docs/BENCHMARKS.md §13.1.1). buildRankerOn is written for the global window (50,000 records
// and more: a sample, goroutines, every value's order found by search); a key's window is small
// enough that its build is mostly overhead there. keyBuild computes the same model, bit for bit
// (TestKeyBuildMatchesGeneral), where the window fits the shortcuts below, in scratch reused
// build after build:
//   - the calibration records are the whole window (keys.window <= 4096 records, the fewest
//     calibration records), and every calibration score is sorted before use, so the window is
//     taken in its own order rather than sorted by a second salted key;
//   - the columns and the calibration scores are sorted with their rows (keyed_sort.go), so a
//     record's tail score and calibrated scores come from its places, without a search;
//   - the record keys are counted in one small table (recordKeysOn's 256 buckets and their
//     goroutine pass are for a million rows), and R's order is a bucket sort of uniform keys;
//   - the k-NN calibration is solvingset.KNNWeightsSelf of R against itself (R is the whole
//     window: the same weights as the window's against itself; one goroutine, a bitonic
//     selection on AVX-512), or, for a batch's many due keys with a device, every key's in one
//     launch (buildKeysBatched: gpukern's keyed_self, the same bits);
//   - no temporary is allocated: the model holds the same allocations as before, of the same
//     sizes (keyBytes), and nothing else.
// 192 µs a build before, 48 after (BenchmarkKeyBuild, docs/BENCHMARKS.md §13.1.2).
//
// Windows outside the shortcuts (a value not finite, or -0, whose place slices.Sort leaves to
// its algorithm; more than 4096 records) take buildRankerOn, as before.

// keyBuild is one goroutine's scratch for key builds.
type keyBuild struct {
	flat             []float32   // the window, oldest first, outcasts left out: d columns of n
	cols             [][]float32 // flat's columns
	hashes           []uint64
	tags             []uint64 // the copies' table: slots hold hash|1 (0 is empty)
	counts           []uint32
	order            []keyedRow // R's rows by salted key
	tmp              []keyedRow
	start            []int32 // sortSample's buckets
	dens             []float64
	dist             []float64
	self             []float64 // R's k-NN weights against itself, in R's order (build)
	rows             []int32   // R's rows in the window (build)
	packed           []uint64  // values' keys and rows (keyed_sort.go)
	radix            radixScratch
	posDens, posDist []int32   // each record's place in the density and distance calibrations
	bits, beyond     []bool    // the window's significant rows, and those far out (keepFarOutcasts)
	scratch          []float32 // keepFarOutcasts' sorted values
}

// keyBuilds keeps the builders' scratch: builds run on every core (buildKeys) and on the
// stage's goroutine (keyedScorer.build).
var keyBuilds = sync.Pool{New: func() any { return new(keyBuild) }}

// keyBuildMaxRows is the largest window keyBuild takes: the calibration records are then the
// whole window (calibrationRecords: at least 4096).
const keyBuildMaxRows = 4096

// buildKeyModel is the key's model from its window (build); it reads st only.
func buildKeyModel(st *keyState, cfg *Config) (*Ranker, error) {
	kb := keyBuilds.Get().(*keyBuild)
	defer keyBuilds.Put(kb)
	if r, ok := kb.build(st, cfg); ok {
		return r, nil
	}
	return buildKeyModelGeneral(st, cfg)
}

// modelHeaders are the headers of a key's model's d sorted columns and d columns of its sample R
// (whose values share one allocation, back), in one allocation of their own: 2 x 72 bytes at
// 3 features take the allocator's class of 144, where two took 2 x 80 (docs/BENCHMARKS.md
// §13.1.10).
func modelHeaders(d int) (sorted, ref [][]float32) {
	h := make([][]float32, 2*d)
	return h[:d:d], h[d:]
}

// buildKeyModelGeneral is buildKeyModel through buildRankerOn, for any window (its records that
// were warming left out, as keyBuild.window leaves them).
func buildKeyModelGeneral(st *keyState, cfg *Config) (*Ranker, error) {
	w, d := st.sig.len(), len(st.cols)
	cols := make([][]float32, d)
	first := (st.next - st.size + w) % w
	bits := make([]bool, 0, st.size)
	for i := range st.size {
		if p := (first + i) % w; !st.warmingAt(p) { // (its warming records left out: keyed_warmup.go)
			bits = append(bits, st.sig.at(p))
		}
	}
	for j := range cols {
		cols[j] = make([]float32, 0, len(bits))
		for i := range st.size {
			if p := (first + i) % w; !st.warmingAt(p) {
				cols[j] = append(cols[j], st.cols[j][p])
			}
		}
	}
	if slices.Contains(bits, true) {
		keepFarOutcasts(cols, bits, keyOutcastRule(cfg, w), nil, make([]bool, len(bits)))
	}
	cols, _, _ = withoutOutcasts(cols, nil, bits, w)
	// The model's sorted columns and its sample R in the distance space (the window after its
	// outcasts, n records, for both) in one allocation: 2dn float32 round up to the allocator's
	// next size once rather than 2d times (6 x 800 bytes: 4,864 bytes, not 5,376).
	n := len(cols[0])
	back := make([]float32, 2*d*n)
	sorted, ref := modelHeaders(d)
	for j, c := range cols {
		sorted[j] = back[j*n : j*n : (j+1)*n]
		sorted[j] = append(sorted[j], c...)
		slices.Sort(sorted[j])
		ref[j] = back[(d+j)*n : (d+j+1)*n : (d+j+1)*n]
	}
	kc := *cfg
	kc.Score.Sample, kc.Score.K = n, cfg.Keys.K
	// (A key's model is never whitened: whiten.go.)
	kc.DistanceSpace = SpaceStandardised
	r, err := buildRankerOn(cols, sorted, nil, kc, 1, ref) // (the caller's goroutine: keys build side by side)
	if err == nil {
		r.noteKey(st.key)
	}
	return r, err
}

// build is buildKeyModelGeneral's model where the window fits keyBuild's shortcuts (false: it
// does not, nothing built): prepare, the k-NN calibration of R against itself on this goroutine,
// finish. buildKeysBatched runs the same three steps with every due key's calibration in one
// device call.
func (kb *keyBuild) build(st *keyState, cfg *Config) (*Ranker, bool) {
	r, ok := kb.prepare(st, cfg)
	if !ok {
		return nil, false
	}
	n := len(kb.order)
	kb.rows, kb.self = grow(kb.rows, n), grow(kb.self, n)
	p := preparedBuild{rows: kb.rows, dens: kb.dens, self: kb.self}
	kb.rowsOfR(p.rows)
	solvingset.KNNWeightsSelf(r.Ref.Points, r.Ref.K, p.self)
	return kb.finish(r, cfg, p), true
}

// preparedBuild is what a build's finish reads of its prepare besides the model: R's rows in
// the window, the window's tail scores (row order), and R's k-NN weights against itself (R's
// order), the last computed in between. buildKeysBatched keeps them per key (about 4 KB) while
// the keyBuild scratch (tens of KB) goes back to its goroutine's next key.
type preparedBuild struct {
	rows       []int32
	dens, self []float64
}

// rowsOfR writes R's rows in the window (prepare's order) into rows.
func (kb *keyBuild) rowsOfR(rows []int32) {
	for t, o := range kb.order {
		rows[t] = o.row
	}
}

// prepare is a build's first part (false: the window does not fit the shortcuts, nothing
// built): the window, its sorted columns and tail scores (kb.dens), the standardisation and R
// (its rows in kb.order). The model's calibrations wait for R's k-NN weights against itself
// (finish).
func (kb *keyBuild) prepare(st *keyState, cfg *Config) (*Ranker, bool) {
	d := len(st.cols)
	if st.size > keyBuildMaxRows || d == 0 {
		return nil, false
	}
	n := kb.window(st, keyOutcastRule(cfg, st.sig.len()))
	k := min(cfg.Keys.K, n-1)
	if k < 1 || calibrationRecords(n, cfg.AlarmRate) != n {
		return nil, false // (buildRankerOn says why, or takes the calibration's sample)
	}
	for _, v := range kb.flat[:d*n] {
		if b := math.Float32bits(v); b == 1<<31 || b&0x7f800000 == 0x7f800000 {
			return nil, false // -0, or not finite
		}
	}
	cols := kb.cols

	// The model's allocations, as buildKeyModelGeneral makes them. Each column sorted with its
	// rows: a record's counts in its column (its run of equal values) give its tail score
	// (rank.TailSurprisal), summed over the features in order as Tail.Score sums them.
	back := make([]float32, 2*d*n)
	sorted, ref := modelHeaders(d)
	kb.packed, kb.dens = grow(kb.packed, n), grow(kb.dens, n)
	packed, dens := kb.packed, kb.dens
	clear(dens)
	for j, c := range cols {
		kb.radix.sortRows32(c, packed)
		sorted[j] = back[j*n : (j+1)*n : (j+1)*n]
		for t := 0; t < n; {
			e := t + 1
			for e < n && packed[e]>>32 == packed[t]>>32 {
				e++
			}
			v, term := c[rowOf(packed[t])], rank.TailSurprisal(n, t, e)
			for ; t < e; t++ {
				sorted[j][t] = v
				dens[rowOf(packed[t])] += term
			}
		}
		ref[j] = back[(d+j)*n : (d+j+1)*n : (d+j+1)*n]
	}
	params := cfg.Score
	params.Sample, params.K = n, cfg.Keys.K
	// The model's float64 arrays in one allocation: the center, unit and spread of each feature
	// here, the three calibrations and their indexes in finish (model, Center's capacity: the
	// whole allocation until then). The small arrays alone were three allocations of 24 bytes.
	m := rank.IndexLen(n)
	model := make([]float64, 3*d+3*n+3*m)
	r := &Ranker{Tail: rank.TailOfSortedIn(sorted, model[2*d:3*d]), Params: params}
	r.noteKey(st.key)
	r.Center, r.Unit = standardiseKey(sorted, model[:d], model[d:2*d:2*d])

	// R: every record, in the order of its salted key (smallestKeys of the whole window).
	kb.recordKeys(cfg.Seed)
	kb.sortSample(saltSample)
	for j, c := range cols {
		lo, unit := r.Center[j], r.Unit[j]
		for t, o := range kb.order {
			ref[j][t] = toDistanceSpace(c[o.row], lo, unit)
		}
	}
	r.Ref = &solvingset.Model{Points: ref, K: k, WStar: math.Inf(1)}
	return r, true
}

// finish is a build's last part, from prepare's r and p (R's k-NN weights included): the
// calibrations and the detectors' weights.
func (kb *keyBuild) finish(r *Ranker, cfg *Config, p preparedBuild) *Ranker {
	// The calibration: every record of the window in the window's order (each calibration's
	// scores are sorted, the pairs of density and distance kept: the order changes no bit). R is
	// every record of the window in the distance space, so a record's k-NN weight among the
	// others is its point's in R (the same multiset of distances: the calibration's
	// KNNWeightsSelf over the window, in any order of its points, gives the same bits).
	n, d := len(p.rows), len(r.Center)
	kb.dist = grow(kb.dist, n)
	kb.packed = grow(kb.packed, n)
	dist, dens := kb.dist, p.dens
	for t, row := range p.rows {
		dist[row] = p.self[t]
	}
	// The calibrations in one allocation (NewCalibrationIn's layout), each sorted with its rows:
	// a record's calibrated scores are then its scores' places (SurprisalOfMember).
	// Their indexes (the searches' first level, 312 bytes at n = 200) after them in the same
	// allocation, the one prepare made (Center's capacity until here): measured at 200,000 keys,
	// indexes in an allocation of their own (192 bytes less of the allocator's rounding) cost
	// the decisions 20% more, beside the Ranker 25% (docs/BENCHMARKS.md §13.1.9; likely the
	// other page's TLB miss, not measured).
	m := rank.IndexLen(n)
	model := r.Center[:cap(r.Center)]
	if len(model) < 3*d+3*n+3*m {
		model = make([]float64, 3*d+3*n+3*m) // (not prepare's: not sized for n)
	}
	r.Center = r.Center[:d:d]
	cal, idx := model[3*d:3*d+3*n], model[3*d+3*n:]
	kb.posDens, kb.posDist = grow(kb.posDens, n), grow(kb.posDist, n)
	r.Density = rank.CalibrationIn(kb.sortScores(dens, cal[:n:n], kb.posDens), idx[:m:m])
	r.Distance = rank.CalibrationIn(kb.sortScores(dist, cal[n:2*n:2*n], kb.posDist), idx[m:2*m:2*m])
	// The detectors' weights as buildRankerOn takes them, from the raw scores in the window's
	// order: rank.AgreementWeights depends on the records, not their order (its sums are of
	// half-integer ranks, exact far past 4096 records; a window of at most 10*rank.ConfirmTop
	// records, 200, gets equal weights without a sort).
	r.DensityWeight, r.DistanceWeight = 0.5, 0.5
	if cfg.Score.Weights == WeightsAgreement && cfg.Score.Detectors == DetectorsBoth && cfg.Score.Combine == CombineMean && d > 1 {
		r.DensityWeight, r.DistanceWeight = rank.AgreementWeights(dens, dist)
	}
	comb := kb.dist // (dist is read no more)
	for i := range n {
		comb[i] = r.meanOfMember(int(kb.posDens[i]), int(kb.posDist[i]))
	}
	r.Final = rank.CalibrationIn(kb.sortScores(comb, cal[2*n:3*n:3*n], kb.posDens), idx[2*m:3*m:3*m])
	return r
}

// sortScores writes scores ascending into dst and each score's place (the first of its run of
// equal scores) into pos, by the score's row; it returns dst.
func (kb *keyBuild) sortScores(scores, dst []float64, pos []int32) []float64 {
	kb.radix.sortRows64(scores, kb.packed)
	first := 0
	for t, p := range kb.packed {
		i := rowOf(p)
		dst[t] = scores[i]
		if dst[t] != dst[first] {
			first = t
		}
		pos[i] = int32(first)
	}
	return dst
}

// meanOfMember is mean of a calibration record's raw scores, given their places in the Density
// and Distance calibrations (SurprisalOfMember: the same bits as their Surprisal).
func (r *Ranker) meanOfMember(dens, dist int) float64 {
	switch r.Params.Detectors {
	case DetectorsDensity:
		return r.Density.SurprisalOfMember(dens)
	case DetectorsDistance:
		return r.Distance.SurprisalOfMember(dist)
	}
	return r.meanOf(r.Density.SurprisalOfMember(dens), r.Distance.SurprisalOfMember(dist))
}

// standardiseKey is standardisationOn(cols, sorted, 1) of a key's window (n >= 2 rows), the
// same bits: each feature's Welford recurrence over its clamped sorted values, the features'
// recurrences interleaved a value at a time (each step waits on a division: one feature after
// another, a third of a build's standardisation was waiting), written into center and unit
// (d each: the model's float64 allocation, prepare).
func standardiseKey(sorted [][]float32, center, unit []float64) ([]float64, []float64) {
	d := len(sorted)
	for j0 := 0; j0 < d; j0 += 4 {
		g := min(4, d-j0)
		var lo, hi, mean, m2 [4]float64
		n := len(sorted[j0])
		for j := range g {
			buf := sorted[j0+j]
			lo[j], hi[j] = float64(buf[int(0.005*float64(n-1))]), float64(buf[int(math.Ceil(0.995*float64(n-1)))])
			center[j0+j] = float64(buf[(n-1)/2])
		}
		for i := range n {
			for j := range g {
				x := min(max(float64(sorted[j0+j][i]), lo[j]), hi[j])
				dx := x - mean[j]
				mean[j] += dx / float64(i+1)
				m2[j] += float64(dx * (x - mean[j]))
			}
		}
		for j := range g {
			unit[j0+j] = 1
			if sd := math.Sqrt(m2[j] / float64(n)); sd > 0 && !math.IsInf(1/sd, 0) {
				unit[j0+j] = sd
			}
		}
	}
	return center, unit
}

// toDistanceSpace is distanceSpace's map of one value of a feature of centre lo and unit unit.
func toDistanceSpace(v float32, lo, unit float64) float32 {
	return float32(max(-distanceLimit, min(distanceLimit, (float64(v)-lo)/unit)))
}

// window copies st's window into kb.cols, oldest first, without its records that were warming
// (dropWarming) and those found significant and far out (keepFarOutcasts) as withoutOutcasts
// leaves them out, and returns its rows. The
// window's records are a run of its rings from first that may wrap past their end: two runs,
// each read in order (a remainder by the ring's length at every record was a division per
// value). rule is keyOutcastRule of the configuration.
func (kb *keyBuild) window(st *keyState, rule outcastRule) int {
	w, d, rows := st.sig.len(), len(st.cols), st.size
	first := (st.next - rows + w) % w
	a := min(rows, w-first) // the first run: [first, first+a); the second: [0, rows-a)
	kb.flat = grow(kb.flat, d*rows)
	kb.cols = grow(kb.cols, d)
	for j, ring := range st.cols {
		c := kb.flat[j*rows : (j+1)*rows : (j+1)*rows]
		copy(c[copy(c, ring[first:first+a]):], ring[:rows-a])
		kb.cols[j] = c
	}
	if st.warmingCount() > 0 { // (its warming records left out first, whatever the outcasts: keyed_warmup.go)
		rows = kb.dropWarming(st, first, rows)
		if !slices.Contains(kb.bits, true) {
			return rows
		}
	} else {
		if st.sig.count(first, first+a)+st.sig.count(0, rows-a) == 0 {
			return rows
		}
		kb.bits = grow(kb.bits, rows)
		for i := range a {
			kb.bits[i] = st.sig.at(first + i)
		}
		for i := range rows - a {
			kb.bits[a+i] = st.sig.at(i)
		}
	}
	kb.beyond = grow(kb.beyond, rows)
	var out int
	out, kb.scratch = keepFarOutcasts(kb.cols, kb.bits, rule, kb.scratch, kb.beyond)
	if !leavesOut(rows, out, w) {
		return rows // (withoutOutcasts: nothing left out)
	}
	// Compacted in place, column after column: each value moves to an index no larger than the
	// one it is read from, and a column's new place ends before the next column's old one.
	n := rows - out
	for j := range d {
		src, dst := kb.flat[j*rows:(j+1)*rows], kb.flat[j*n:(j+1)*n:(j+1)*n]
		t := 0
		for i, v := range src {
			if !kb.bits[i] {
				dst[t] = v
				t++
			}
		}
		kb.cols[j] = dst
	}
	return n
}

// recordKeys is recordKeysOn's keys of kb.cols, in row order (kb.order[i] is row i's): the same
// value hashes, and each copy's ordinal counted in one table in row order, as recordKeysOn's
// buckets count it (every copy of a value in one bucket, in row order).
func (kb *keyBuild) recordKeys(seed uint64) {
	n := len(kb.cols[0])
	kb.hashes = grow(kb.hashes, n)
	h := kb.hashes
	h0 := mix64(seed ^ 0x9e3779b97f4a7c15)
	for i := range h {
		h[i] = h0
	}
	for _, c := range kb.cols {
		for i, v := range c {
			h[i] = mix64(h[i] ^ uint64(math.Float32bits(v)))
		}
	}
	size := 1
	for size < 2*n {
		size <<= 1
	}
	kb.tags, kb.counts = grow(kb.tags, size), grow(kb.counts, size)
	tags, counts := kb.tags, kb.counts
	clear(tags)
	clear(counts)
	kb.order = grow(kb.order, n)
	for i, hv := range h {
		tag := hv | 1
		s := int(hv) & (size - 1)
		for tags[s] != 0 && tags[s] != tag {
			s = (s + 1) & (size - 1)
		}
		tags[s] = tag
		kb.order[i] = keyedRow{key: mix64(hv + uint64(counts[s])*0x9e3779b97f4a7c15), row: int32(i)}
		counts[s]++
	}
}

// sortSample turns kb.order (row i's key at i) into the rows in ascending order of their keys
// salted by salt, ties by row: smallestKeys of every row. The salted keys are uniform, so a
// counting sort by their top bits leaves about one key a bucket and an insertion sort finishes.
func (kb *keyBuild) sortSample(salt uint64) {
	n := len(kb.order)
	for i := range kb.order {
		kb.order[i].key = mix64(kb.order[i].key ^ salt)
	}
	bits := 1
	for 1<<bits < n {
		bits++
	}
	kb.start = grow(kb.start, 1<<bits+1)
	start := kb.start
	clear(start)
	shift := 64 - bits
	for _, o := range kb.order {
		start[o.key>>shift+1]++
	}
	for b := range 1 << bits {
		start[b+1] += start[b]
	}
	kb.tmp = grow(kb.tmp, n)
	for _, o := range kb.order {
		b := o.key >> shift
		kb.tmp[start[b]] = o
		start[b]++
	}
	kb.order, kb.tmp = kb.tmp, kb.order
	less := func(a, b keyedRow) bool { return a.key < b.key || a.key == b.key && a.row < b.row }
	o := kb.order
	for i := 1; i < n; i++ {
		v := o[i]
		j := i
		for j > 0 && less(v, o[j-1]) {
			o[j] = o[j-1]
			j--
		}
		o[j] = v
	}
}

// grow returns b resized to n, reallocated only when its capacity is short.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
