package solvingset

import (
	"fmt"
	"math"
	"slices"
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
func knnSelect(Q, R [][]float32, k, workers int, skipSelf bool, out []float64) int64 {
	nq, nr, dims := len(Q[0]), len(R[0]), len(R)
	workers = workerCount(workers)
	bufs := make([][]float32, workers)
	bits := make([][]uint32, workers)
	for w := range bufs {
		bufs[w], bits[w] = make([]float32, nr), make([]uint32, nr)
	}
	parallelFor(workers, nq, knnTileSize, func(w, lo, hi int) {
		d2, b := bufs[w], bits[w]
		for i := lo; i < hi; i++ {
			x := Q[0][i]
			r0 := R[0][:nr]
			for s, c := range r0 {
				t := x - c
				d2[s] = float32(t * t)
			}
			for j := 1; j < dims; j++ {
				x := Q[j][i]
				rj := R[j][:nr]
				for s, c := range rj {
					t := x - c
					d2[s] += float32(t * t)
				}
			}
			n := nr
			if skipSelf {
				for s := range n {
					if d2[s] == 0 { // the query itself (or a duplicate of it): skip it once
						d2[s], d2[n-1] = d2[n-1], d2[s]
						n--
						break
					}
				}
			}
			if n < k {
				out[i] = math.Inf(1)
				continue
			}
			// Select on the bit patterns: for non-negative floats their integer order is the
			// float order, and the branch-free selection is several times faster.
			for s, v := range d2[:n] {
				b[s] = math.Float32bits(v)
			}
			selectSmallestBits(b[:n], k)
			sel := d2[:k]
			for t, v := range b[:k] {
				sel[t] = sqrt32(math.Float32frombits(v))
			}
			slices.Sort(sel)
			var sum float64
			for _, v := range sel {
				sum += float64(v)
			}
			out[i] = sum
		}
	})
	return int64(nq) * int64(nr)
}

// selectSmallest reorders a so that a[:k] holds its k smallest values (in no order):
// quickselect with median-of-three pivots, insertion sort for short ranges.
func selectSmallest(a []float32, k int) {
	lo, hi := 0, len(a)-1
	for hi-lo > 16 {
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		p := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// [lo, j] <= p, [i, hi] >= p, and (j, i) == p.
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
	slices.Sort(a[lo : hi+1])
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

// selectSmallestBits is selectSmallest for the bit patterns (math.Float32bits) of non-negative
// float32 values, +0 to +Inf, and it also leaves the largest of the k selected at a[k-1] (the
// last round sorts the range holding position k-1; a[:lo] is no larger). For these values the unsigned integer order is the float order, so the
// partition can count with integer arithmetic instead of a branch. The comparisons of a
// quickselect on random distances are unpredictable; this partition (Lomuto, with the element
// always swapped and the boundary advanced by the sign of v-p) has none, which makes it about
// 3.7x faster than selectSmallest on 100 to 150 values (BenchmarkSelectSmallestBits).
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
