package solvingset

import (
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/core/fanout"
)

// Building blocks shared by every algorithm of the package. Distances must be bit-identical on
// every path, so each path computes the squared distance the same way: per dimension, in
// dimension order, float32(t*t) with t = a-b (the conversion forbids FMA fusion, and
// (b-a)^2 == (a-b)^2 exactly, so d(a,b) == d(b,a)), accumulated in float32 starting from the
// first term; then sqrt32.

// sqrt32 is the correctly rounded float32 square root (the double rounding through float64 is
// innocuous for sqrt because 53 >= 2*24+2; the compiler emits SQRTSS).
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// sq32 squares a heap top into the threshold that prefilters squared distances. A squared
// distance d2 can give sqrt32(d2) < t only if d2 < t*t exactly, hence d2 <= float32(t*t)
// (rounding is monotone and d2 is a float32): comparing d2 <= sq32(t) never drops a distance
// that belongs in the heap, and saves the sqrt of every distance that does not.
func sq32(t float32) float32 { return t * t }

// sqDistRows is the squared distance between rows i and j of cols.
func sqDistRows(cols [][]float32, i, j int) float32 {
	var s float32
	for _, col := range cols {
		t := col[i] - col[j]
		s += float32(t * t)
	}
	return s
}

// heapReplaceTop replaces the maximum h[0] of the max-heap h by d and sifts it down. Heaps
// start filled with +Inf, so "fewer than k distances" needs no counter: the heap holds +Inf
// until k real distances have arrived, and its sum is +Inf, the convention for UB.
func heapReplaceTop(h []float32, d float32) {
	// The loop runs while both children exist, so the larger-child choice has no bounds test
	// in the way and compiles to conditional moves; the node with one child is handled after.
	n := len(h)
	i, c := 0, 1
	for c+1 < n {
		cv, rv := h[c], h[c+1]
		if rv > cv {
			cv = rv
			c++
		}
		if cv <= d {
			h[i] = d
			return
		}
		h[i] = cv
		i = c
		c = 2*i + 1
	}
	if c < n && h[c] > d {
		h[i] = h[c]
		i = c
	}
	h[i] = d
}

// heapify turns h into a max-heap (Floyd's bottom-up construction, O(len(h))).
func heapify(h []float32) {
	n := len(h)
	for s := n/2 - 1; s >= 0; s-- {
		d := h[s]
		i := s
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if r := c + 1; r < n && h[r] > h[c] {
				c = r
			}
			if h[c] <= d {
				break
			}
			h[i] = h[c]
			i = c
		}
		h[i] = d
	}
}

// fillInf sets every element of h to +Inf.
func fillInf(h []float32) {
	inf := float32(math.Inf(1))
	for i := range h {
		h[i] = inf
	}
}

// plainSum is the float64 sum of h in storage order: the cheap upper bound UB used for pruning
// (see PruneMargin). +Inf when the heap is not full.
func plainSum(h []float32) float64 {
	var s float64
	for _, v := range h {
		s += float64(v)
	}
	return s
}

// canonicalWeight is the reported weight: the float64 sum of the k distances in ascending
// order. A fixed order makes the weight a function of the multiset of distances alone, so every
// algorithm reports bit-identical weights and ties at w* are decided identically. scratch must
// have len(h) elements.
func canonicalWeight(h, scratch []float32) float64 {
	copy(scratch, h)
	slices.Sort(scratch)
	var s float64
	for _, v := range scratch {
		s += float64(v)
	}
	return s
}

// PruneMargin is the factor that keeps pruning exact although UB is a plain sum in heap order
// and weights are canonical sums. Let U be a heap's k distances and W the point's true k
// nearest distances; sorted, U dominates W elementwise, so sum(W) <= sum(U) in the reals.
// Recursive float64 summation of k non-negative terms has relative error at most
// e = (k-1)u/(1-(k-1)u), u = 2^-53 (Higham, Accuracy and Stability, §4.2), hence
// canonical(W) <= plain(U) * (1+e)/(1-e) < plain(U) * (1 + 3e) for k < 2^40. One more rounding
// of the product costs u. A point or candidate is treated as unable to reach minOUT only when
// plain(U) * (1 + (4k+4)u) < minOUT, which therefore implies canonical(W) < minOUT: a point that
// ties at w* is never pruned. The margin is ~2e-14 relative for k = 50, so it costs no pruning
// in practice. The GPU twin (gpukern) prunes with the same margin.
func PruneMargin(k int) float64 { return 1 + float64(float64(4*k+4)*0x1p-53) }

// parallelFor runs body over [0, n) in blocks of grain, claimed dynamically by workers
// goroutines; body gets the worker index and the block.
func parallelFor(workers, n, grain int, body func(w, lo, hi int)) {
	grain = max(grain, 1)
	fanout.EachWorker(workers, (n+grain-1)/grain, func(w, b int) {
		lo := b * grain
		body(w, lo, min(lo+grain, n))
	})
}

// counter is a per-worker counter padded to its own cache line.
type counter struct {
	n int64
	_ [56]byte
}

func sumCounters(c []counter) int64 {
	var s int64
	for i := range c {
		s += c[i].n
	}
	return s
}

// knnTileSize is how many query points share one pass over the reference points: their
// coordinates, thresholds and scratch stay in L1 while each reference point is broadcast.
const knnTileSize = 64

// knnScratch is one worker's scratch for knnTile.
type knnScratch struct {
	t2   [knnTileSize]float32
	acc  [knnTileSize]float32
	ref  []float32 // coordinates of one reference point
	sort []float32 // k floats for canonicalWeight
}

func newKNNScratch(dims, k int) *knnScratch {
	return &knnScratch{ref: make([]float32, dims), sort: make([]float32, k)}
}

// knnTile updates the k-NN heaps of the query rows [qlo, qhi) of Q (at most knnTileSize;
// heaps[(i-qlo)*k:]) with every row of R, skipping the pair (i, i) when self is true (Q and R
// are then the same data set). It returns the number of distances evaluated.
func knnTile(Q [][]float32, qlo, qhi int, R [][]float32, self bool, k int, heaps []float32, s *knnScratch) int64 {
	nt := qhi - qlo
	t2 := s.t2[:nt]
	acc := s.acc[:nt]
	for i := range nt {
		t2[i] = sq32(heaps[i*k])
	}
	nr := len(R[0])
	dims := len(R)
	var count int64
	for r := range nr {
		skip := -1
		if self && r >= qlo && r < qhi {
			skip = r - qlo
		}
		if dims == 2 {
			c0, c1 := R[0][r], R[1][r]
			x0, x1 := Q[0][qlo:qhi], Q[1][qlo:qhi]
			x1 = x1[:len(x0)]
			for i := range x0 {
				t := x0[i] - c0
				u := x1[i] - c1
				acc[i] = float32(t*t) + float32(u*u)
			}
		} else {
			for j := range dims {
				s.ref[j] = R[j][r]
			}
			x := Q[0][qlo:qhi]
			c := s.ref[0]
			for i := range x {
				t := x[i] - c
				acc[i] = float32(t * t)
			}
			for j := 1; j < dims; j++ {
				x := Q[j][qlo:qhi]
				c := s.ref[j]
				for i := range x {
					t := x[i] - c
					acc[i] += float32(t * t)
				}
			}
		}
		count += int64(nt)
		for i, d2 := range acc {
			if d2 <= t2[i] && i != skip {
				h := heaps[i*k : (i+1)*k]
				if d := sqrt32(d2); d < h[0] {
					heapReplaceTop(h, d)
					t2[i] = sq32(h[0])
				}
			}
		}
		if skip >= 0 {
			count--
		}
	}
	return count
}

// knnWeights computes the exact weight of every row of Q against the rows of R (self: Q == R
// and a row is not its own neighbour) into out, parallel over tiles of queries. Memory is
// O(workers * tile * k), never O(|Q| * |R|). It returns the number of distances evaluated.
func knnWeights(Q, R [][]float32, self bool, k, workers int, out []float64) int64 {
	nq := len(Q[0])
	workers = workerCount(workers)
	counts := make([]counter, workers)
	scratch := make([]*knnScratch, workers)
	heaps := make([][]float32, workers)
	for w := range workers {
		scratch[w] = newKNNScratch(len(Q), k)
		heaps[w] = make([]float32, knnTileSize*k)
	}
	parallelFor(workers, nq, knnTileSize, func(w, lo, hi int) {
		h := heaps[w][:(hi-lo)*k]
		fillInf(h)
		counts[w].n += knnTile(Q, lo, hi, R, self, k, h, scratch[w])
		for i := lo; i < hi; i++ {
			out[i] = canonicalWeight(h[(i-lo)*k:(i-lo+1)*k], scratch[w].sort)
		}
	})
	return sumCounters(counts)
}
