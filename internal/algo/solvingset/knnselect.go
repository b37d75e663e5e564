package solvingset

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// knnSelectMaxRefs bounds the reference sets that knnSelectWeights handles (one float32 of
// scratch per reference point per worker).
const knnSelectMaxRefs = 16 * 1024

// useKNNSelect picks the select path for prediction against a small reference set. With |S|
// a few times k, as in the pipeline's solving sets, the heap path spends its time inserting;
// computing every distance and selecting the k smallest (branch-free, on the bit patterns) is
// one pass. For |S| >> k the heap path's early rejection wins. Measured on one core, k = 50,
// 2026-11-21, quiet dev machine (BenchmarkKNNSelectVsHeap, us per query, heap vs select):
// |S| = 300 (8-D) 7.4 vs 3.5; 1000 (8-D) 12.2 vs 8.0; 2000 (10-D) 19.1 vs 17.0; 10000 (10-D)
// 60 vs 77. Hence the crossover at |S| = 64k (3200 for k = 50).
func useKNNSelect(refs, k int) bool { return refs <= knnSelectMaxRefs && refs <= 64*k }

// knnSelectWeights is knnWeights for queries that are not members of R: for each query it
// computes all |R| squared distances, selects the k smallest and sums their square roots in
// ascending order. Bit-identical to the heap path: the same float32 distance arithmetic
// (dimension order, rounding), and the k smallest squared distances have as square roots
// exactly the multiset of the k smallest distances (sqrt is monotonic), summed in the same
// canonical order. Returns the number of distances evaluated.
func knnSelectWeights(Q, R [][]float32, k, workers int, out []float64) int64 {
	return knnSelect(Q, R, k, workers, false, out)
}

// knnSelect computes, per query, all |R| squared distances, selects the k smallest and sums
// their square roots in ascending order. With skipSelf, one reference point at distance 0 is
// skipped first (the query itself, see KNNWeightsMembers).
//
// The work per query, as the drain of the pipeline needs it (|R| = 2048, k = 100, 8-D: about
// 6x less CPU than one dimension at a time in scalar float32, a full quickselect and a sort,
// BenchmarkKNNSelectDrain): the distances on their bit patterns with AVX2 or SSE (sqDistsBlock,
// sqDistCol), a threshold from a sample that leaves about 2.5k candidates for the selection
// (prefilterBits), and the ascending sum only where float64 could round it (sumSqrtBits). Each
// step gives bit-identical weights.
func knnSelect(Q, R [][]float32, k, workers int, skipSelf bool, out []float64) int64 {
	nq, nr := len(Q[0]), len(R[0])
	workers = workerCount(workers)
	scratch := make([]*selectScratch, workers)
	sorted16 := useSorted16(nr, k)
	for w := range scratch {
		scratch[w] = getSelectScratch(nr, k, len(R))
		if sorted16 {
			scratch[w].cand = grow(scratch[w].cand, nr+16)
		}
		defer selectScratchPool.Put(scratch[w])
	}
	parallelFor(workers, nq, knnTileSize, func(w, lo, hi int) {
		sc := scratch[w]
		b := sc.bits
		for i := lo; i < hi; i++ {
			q := sc.query
			for j := range q {
				q[j] = Q[j][i]
			}
			sqDists(b, R, q)
			n := nr
			if skipSelf {
				for s, v := range b[:n] {
					if v == 0 { // the query itself (or a duplicate of it): skip it once
						b[s], b[n-1] = b[n-1], b[s]
						n--
						break
					}
				}
			}
			out[i] = sc.weight(b[:n], k, sorted16, true)
		}
	})
	return int64(nq) * int64(nr)
}

// weight is the sum of the roots of the k smallest of the squared distances b (bit patterns),
// in ascending order; +Inf when b holds fewer than k. The k smallest: smallestSorted's where
// sorted16 (useSorted16) and b holds more than 48, else smallestK's, on prefilterBits'
// candidates where prefilter and b holds at least prefilterMin*k.
func (sc *selectScratch) weight(b []uint32, k int, sorted16, prefilter bool) float64 {
	n := len(b)
	if n < k {
		return math.Inf(1)
	}
	if sorted16 && n > 48 {
		if sel := sc.smallestSorted(b, k); sel != nil {
			return sumSqrtAscending(sel)
		}
	}
	cand := b
	if prefilter && n >= prefilterMin*k {
		if c := sc.prefilterBits(cand, k); c != nil {
			cand = c
		}
	}
	// Select on the bit patterns: for non-negative floats their integer order is the
	// float order, and the partitions run eight values at a time.
	return sumSqrtBits(sc.smallestK(cand, k), sc.roots)
}

// selectScratch is one worker's buffers for knnSelect.
type selectScratch struct {
	bits   []uint32    // squared distances (Float32bits), one per reference point
	cand   []uint32    // the candidates below the sample's threshold
	sample []uint32    // every prefilterStride-th distance
	roots  []float32   // the k selected distances
	query  []float32   // the query's coordinates
	part   [2][]uint32 // smallestK's partitions
	sel    []uint32    // smallestK's result
}

// selectScratchPool keeps the workers' buffers between calls: the pipeline scores every batch
// twice (the solving set, the ranking sample), and fresh buffers per call were most of what the
// scoring allocated.
var selectScratchPool = sync.Pool{New: func() any { return new(selectScratch) }}

// getSelectScratch returns buffers for nr reference points, k neighbours and dims coordinates.
func getSelectScratch(nr, k, dims int) *selectScratch {
	sc := selectScratchPool.Get().(*selectScratch)
	sc.bits, sc.cand = grow(sc.bits, nr), grow(sc.cand, nr)
	sc.sample = grow(sc.sample, nr/prefilterStride+1)
	sc.roots, sc.query = grow(sc.roots, k), grow(sc.query, dims)
	sc.part[0], sc.part[1], sc.sel = grow(sc.part[0], nr), grow(sc.part[1], nr), grow(sc.sel, max(k, nr/prefilterStride+1))
	return sc
}

// grow returns b resized to n, reallocated only when its capacity is short.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// The prefilter: a sample of every prefilterStride-th squared distance gives a threshold that
// about prefilterSlack*k of all the distances lie below; the selection then runs on those only.
// Below prefilterMin*k reference points the selection on all of them is as cheap. Stride 16
// (128 samples of 2048, threshold at the 16th: about 250 candidates for k = 100; fewer than k,
// the fallback, has a probability near 1e-4 for random distances) measured 14% faster per
// query than 8 and as fast as 32 (BenchmarkKNNSelectDrain, 2026-11-23).
const (
	prefilterStride = 16
	prefilterSlack  = 2
	prefilterMin    = 8
)

// prefilterBits returns the squared distances (bit patterns) of b that are <= a threshold
// taken from a sample of b, in sc.cand, when there are at least k of them (then the k smallest
// of b are among them: the k-th smallest of b is <= the threshold); nil otherwise (the caller
// selects from all of b).
func (sc *selectScratch) prefilterBits(b []uint32, k int) []uint32 {
	m := 0
	smp := sc.sample
	for s := 0; s < len(b); s += prefilterStride {
		smp[m] = b[s]
		m++
	}
	j := min(m, prefilterSlack*k*m/len(b)+4)
	n := packLE(sc.cand, b, slices.Max(sc.smallestK(smp[:m], j)))
	if n < k {
		return nil
	}
	return sc.cand[:n]
}

// sumSqrtBits is the sum in float64 of the square roots of the squared distances sel (bit
// patterns), in ascending order of the roots. When the roots span less than 2^28/k (all nonzero
// roots within that ratio of each other, finite), every partial sum is a multiple of the
// smallest nonzero root's float32 ulp u (>= root * 2^-24) below k * max < 2^52 u, so float64
// adds them exactly in any order and the sort is skipped; otherwise they are sorted (roots is
// scratch of len >= len(sel)).
func sumSqrtBits(sel []uint32, roots []float32) float64 {
	roots = roots[:len(sel)]
	var sum float64
	minNZ, top := uint32(math.MaxUint32), uint32(0) // smallest nonzero and largest pattern
	for t, v := range sel {
		x := sqrt32(math.Float32frombits(v))
		roots[t] = x
		sum += float64(x)
		minNZ = min(minNZ, v-1) // 0 wraps to the largest value
		top = max(top, v)
	}
	if top == 0 {
		return sum // all zero
	}
	lo := float64(sqrt32(math.Float32frombits(minNZ + 1)))
	hi := float64(sqrt32(math.Float32frombits(top)))
	if hi*float64(len(sel)) < lo*(1<<28) { // false for +Inf and NaN: those sort
		return sum
	}
	slices.Sort(roots)
	sum = 0
	for _, v := range roots {
		sum += float64(v)
	}
	return sum
}

// smallestKMin is the size below which smallestK hands the rest to selectSmallestBits: a few
// values cost less there than another partition and its pivot.
const smallestKMin = 16

// smallestK returns the k smallest values of a (bit patterns of non-negative floats; 1 <= k <=
// len(a)), in no order, in sc.sel; a and sc.part are clobbered (len(sc.part[i]) >= len(a),
// cap(sc.sel) >= k). A quickselect whose partitions split the range with partition (eight
// values per AVX2 step into two buffers, instead of one branch-free swap per value, which
// waits on the previous one's store: 1,400 ns per drained record in the profile before it):
// each round keeps the side that holds the k-th value and, when that is the upper side, moves
// the lower one to the result. The pivot is one of three spread samples, the one nearest the
// quantile k/len of the range; a round that keeps everything (the pivot is the maximum) ends
// the partitioning, and selectSmallestBits finishes the last few or many-equal values.
func (sc *selectScratch) smallestK(a []uint32, k int) []uint32 {
	out := sc.sel[:0]
	bufs := [3][]uint32{a, sc.part[0], sc.part[1]}
	ci := 0 // cur lies in bufs[ci]
	cur := a
	for len(cur) > smallestKMin && k < len(cur) {
		n := len(cur)
		x, y, z := cur[n/4], cur[n/2], cur[n-1-n/4]
		x, y = min(x, y), max(x, y)
		y, z = min(y, z), max(y, z)
		x, y = min(x, y), max(x, y) // x <= y <= z
		p := y
		switch {
		case 3*k < n:
			p = x
		case 3*k > 2*n:
			p = z
		}
		d1, d2 := (ci+1)%3, (ci+2)%3
		nle := partition(bufs[d1], bufs[d2], cur, p)
		if nle == n {
			break // p is the maximum: no progress
		}
		if nle >= k {
			ci, cur = d1, bufs[d1][:nle]
			continue
		}
		out = append(out, bufs[d1][:nle]...)
		k -= nle
		ci, cur = d2, bufs[d2][:n-nle]
	}
	selectSmallestBits(cur, k)
	return append(out, cur[:k]...)
}

// partitionGo is partition's loop in Go from src[i] on, n values of src[:i] already in le and
// the other i-n in gt: branch-free, each value is written to both and one end advances.
func partitionGo(le, gt, src []uint32, t uint32, i, n int) int {
	le, gt = le[:len(src)], gt[:len(src)]
	g := i - n
	for _, v := range src[i:] {
		in := int(uint64(int64(t)-int64(v))>>63) ^ 1 // v <= t
		le[n] = v
		gt[g] = v
		n += in
		g += in ^ 1
	}
	return n
}

// packLEGo is packLE's loop in Go from src[i] on, n values already in dst: branch-free, the
// value is always written and n advances when v <= t.
func packLEGo(dst, src []uint32, t uint32, i, n int) int {
	dst = dst[:len(src)]
	for _, v := range src[i:] {
		dst[n] = v
		n += int(uint64(int64(t)-int64(v))>>63) ^ 1 // v <= t
	}
	return n
}

// sqDists writes the squared distances (bit patterns) of the point q to every point of R into
// dst: the first points 32 at a time (sqDistsBlock, AVX2), else each dimension 4 at a time
// (sqDistCol, SSE), the rest in Go (sqDistColGo).
func sqDists(dst []uint32, R [][]float32, q []float32) {
	nr := len(R[0])
	done := sqDistsBlock(dst, R, q)
	for j, col := range R {
		col = col[:nr]
		from := done
		if done == 0 {
			from = sqDistCol(dst, col, q[j], j > 0)
		}
		sqDistColGo(dst, col, q[j], j > 0, from)
	}
}

// sqDistColGo is sqDistCol's loop in Go, from index from on (the tail the SSE loop leaves).
func sqDistColGo(dst []uint32, col []float32, x float32, add bool, from int) {
	dst = dst[:len(col)]
	for s := from; s < len(col); s++ {
		t := x - col[s]
		d := float32(t * t)
		if add {
			d = math.Float32frombits(dst[s]) + d
		}
		dst[s] = math.Float32bits(d)
	}
}

// KNNWeightsMembers is KNNWeights for queries that are members of the data set S was drawn
// from (a record scored by a model whose window holds it). Such a query must not count itself:
// one point of S at distance 0 from the query is skipped. When that point is a duplicate of the
// query rather than the query itself, skipping it only raises the weight, so the prediction
// rule still misses no outlier: for every member q, the result is >= w_k(q, D \ {q}). The
// weight is +Inf when fewer than k points remain. Shapes as for KNNWeights (it panics on
// mismatches, which are programming errors).
func KNNWeightsMembers(S, Q [][]float32, k, workers int, out []float64) {
	if len(S) == 0 || len(S) != len(Q) || k < 1 || len(out) != len(Q[0]) {
		panic(fmt.Sprintf("solvingset.KNNWeightsMembers: S has %d columns, Q %d, k=%d, len(out)=%d for %d queries", len(S), len(Q), k, len(out), len(Q[0])))
	}
	knnSelect(Q, S, k, workers, true, out)
}

// selectSmallestBits reorders a so that a[:k] holds its k smallest values, for the bit patterns
// (math.Float32bits) of non-negative float32 values, +0 to +Inf, and it also leaves the largest
// of the k selected at a[k-1] (the last round sorts the range holding position k-1; a[:lo] is no
// larger). For these values the unsigned integer order is the float order, so the partition can
// count with integer arithmetic instead of a branch. The comparisons of a quickselect on random
// distances are unpredictable; this partition (Lomuto, with the element always swapped and the
// boundary advanced by the sign of v-p) has none, which makes it about 3.7x faster than a float32
// quickselect (order.SelectNth) on 100 to 150 values (BenchmarkSelectSmallestBits).
func selectSmallestBits(a []uint32, k int) {
	lo, hi := 0, len(a)
	// Invariant: a[:lo] <= a[lo:hi] <= a[hi:] elementwise, and lo < k <= hi.
	for hi-lo > 4 {
		x, y, z := a[lo], a[lo+(hi-lo)/2], a[hi-1]
		if x > y {
			x, y = y, x
		}
		if y > z {
			y = z
		}
		p := int64(max(x, y)) // median of three
		// a[lo:j] < p <= a[j:i]; j advances when v < p, i.e. when int64(v)-p is negative.
		j := lo
		b := a[lo:hi]
		for i, v := range b {
			b[i] = a[j]
			a[j] = v
			j += int(uint64(int64(v)-p) >> 63)
		}
		if k <= j {
			hi = j
			continue
		}
		if j == lo {
			// Nothing is below p, which is then the range's minimum: split off the values
			// equal to it (v < p+1) instead, so every round shrinks the range.
			p++
			for i, v := range b {
				b[i] = a[j]
				a[j] = v
				j += int(uint64(int64(v)-p) >> 63)
			}
			if k <= j {
				return
			}
		}
		lo = j
	}
	slices.Sort(a[lo:hi])
}
