package solvingset

import (
	"math"
	"slices"
)

// The k smallest of a few hundred squared distances, sorted, on AVX-512 (k <= 16: a key's model
// build, KNNWeightsSelf, and a record scored against its key's model on the CPU, knnSelect;
// k = keys.k, 10 at the defaults). smallestK's partitions and Lomuto rounds
// cost about 110 ns a query of 199 distances, most of it waiting on dependent stores and
// mispredicted branches whatever their order; a bitonic network sorts 16 values in 10 steps of
// three vector instructions with no branch. smallestSorted takes a threshold from the first 16
// distances (sorted: distances in window order are a random sample), packs the distances at most
// it (about 3k of them), and keeps the 16 smallest of those, 16 at a time, each chunk sorted and
// merged into the smallest so far: 121 ns a query of 199 distances (k = 10) with the distances
// and the sum, against 214 with smallestK (dev machine, AMD EPYC, medians of 21 alternated runs
// over 32 windows; KNNWeightsMembers on them: 319 ns). A threshold from 32 distances (the 2nd or
// 3rd smallest) or the 2nd or 4th of 16 measured 124-134 ns.

// bitonicTables are smallest16AVX512's permutations (lane i^1, i^2, i^4, i^8; lane 15-i: the
// kernel uses the last) and its stages' masks (the lanes that take the smaller value): 10 stages
// of the sort, 4 of the merge.
type bitonicTables struct {
	perm  [5][16]uint32
	masks [14]uint16
}

var bitonic = func() *bitonicTables {
	t := new(bitonicTables)
	for i := range 16 {
		for p, d := range []int{1, 2, 4, 8} {
			t.perm[p][i] = uint32(i ^ d)
		}
		t.perm[4][i] = uint32(15 - i)
	}
	m := 0
	for s := 2; s <= 16; s *= 2 { // sort: lane i takes the smaller where it is the lower of its pair in an ascending block, or the upper in a descending one
		for d := s / 2; d >= 1; d /= 2 {
			for i := range 16 {
				if (i&d == 0) == (i&s == 0) {
					t.masks[m] |= 1 << i
				}
			}
			m++
		}
	}
	for d := 8; d >= 1; d /= 2 { // merge: ascending
		for i := range 16 {
			if i&d == 0 {
				t.masks[m] |= 1 << i
			}
		}
		m++
	}
	return t
}()

// smallest16Go is smallest16AVX512 in Go (its twin: TestSmallest16MatchesGo): out = the 16
// smallest values of a (len(a) a positive multiple of 16), ascending.
func smallest16Go(a []uint32, out *[16]uint32) {
	s := slices.Clone(a)
	slices.Sort(s)
	copy(out[:], s[:16])
}

// smallestSorted returns the k smallest of b (bit patterns of non-negative floats; 1 <= k <= 16,
// len(b) >= 48) in ascending order, or nil where the threshold leaves fewer than k (the caller
// selects otherwise: about 3% of the queries at 199 distances and k = 10). sc.cand holds
// len(b)+15.
func (sc *selectScratch) smallestSorted(b []uint32, k int) []uint32 {
	m := len(b)
	var top [16]uint32
	smallest16AVX512(b[:16], &top, bitonic)
	j := min(16, 3*k*16/m+1) // about 3k of the m distances at most the j-th smallest of 16
	c := packLE(sc.cand, b, top[j-1])
	if c < k {
		return nil
	}
	for ; c%16 != 0; c++ {
		sc.cand[c] = math.MaxUint32 // (above every distance: never among the k smallest but in ties with a value as large, the same bits)
	}
	smallest16AVX512(sc.cand[:c], &top, bitonic)
	out := sc.sel[:k]
	copy(out, top[:k])
	return out
}

// useSorted16 says whether a selection of k among nr distances takes smallestSorted.
func useSorted16(nr, k int) bool { return hasAVX512 && k <= 16 && nr > 48 }

// sumSqrtAscending is sumSqrtBits of sel in ascending order: the sum it takes when it sorts, and
// the exact one (any order) when it does not.
func sumSqrtAscending(sel []uint32) float64 {
	var sum float64
	for _, v := range sel {
		sum += float64(sqrt32(math.Float32frombits(v)))
	}
	return sum
}
