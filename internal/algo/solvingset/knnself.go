package solvingset

import (
	"fmt"
	"slices"
)

// KNNWeightsSelf is KNNWeightsMembers(P, P, k, 1, out) for a small point set scored against
// itself (a key's model build, stages/detect: its window's k-NN calibration, 200 points): each
// point's weight, the sum of the distances to its k nearest other points, on the caller's
// goroutine. The same bits: the same float32 squared distances (sqDistsBlock, sqDistCol), one
// zero distance skipped (the point's own, found by its index rather than searched: the same
// multiset as skipping any zero), the k smallest of the rest and their roots summed in ascending
// order (sumSqrtBits' result). The selection: on AVX-512 with k <= 16, smallestSorted (a
// threshold, then bitonic sorts: select16.go); else smallestK on all the distances, without the
// drain's prefilter (at keys.k = 10 its sample's slack leaves about 7k candidates, and smallestK
// on all the distances is faster up to 2,000 points: 112 against 151 ns a query at 200, dev
// machine).
func KNNWeightsSelf(P [][]float32, k int, out []float64) {
	n := 0
	if len(P) > 0 {
		n = len(P[0])
	}
	if len(P) == 0 || k < 1 || len(out) != n {
		panic(fmt.Sprintf("solvingset.KNNWeightsSelf: %d columns, k=%d, len(out)=%d for %d points", len(P), k, len(out), n))
	}
	sc := getSelectScratch(n, k, len(P))
	defer selectScratchPool.Put(sc)
	sorted16 := useSorted16(n, k)
	if sorted16 {
		sc.cand = grow(sc.cand, n+16)
	}
	b := sc.bits
	for i := range n {
		q := sc.query
		for j := range q {
			q[j] = P[j][i]
		}
		sqDists(b, P, q)
		// The point's own distance out (0 unless a coordinate is infinite or NaN: then the
		// first zero, as KNNWeightsMembers skips, if any), the last one in its place.
		m, self := n, i
		if b[i] != 0 {
			self = slices.Index(b[:n], 0)
		}
		if self >= 0 {
			m--
			b[self] = b[m]
		}
		out[i] = sc.weight(b[:m], k, sorted16, false) // (no prefilter: see above)
	}
}
