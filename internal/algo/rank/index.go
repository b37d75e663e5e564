package rank

import "math"

// A calibration's two-level search (Calibration.index; docs/BENCHMARKS.md §13.1.9).

// IndexStride is how many sorted scores one entry of a calibration's index stands for: two
// cache lines of float64, so that a calibration of 200 scores has an index of 13 (104 bytes)
// and a search reads 2-3 lines of the index and 2-3 of Sorted.
const IndexStride = 16

// IndexLen is the length of the index of a calibration of n scores.
func IndexLen(n int) int { return (n + IndexStride - 1) / IndexStride }

// search is SearchFloat64s(c.Sorted, r) through the index: the index's first entry at or above
// r, Sorted[IndexStride*K], bounds the answer to (IndexStride*(K-1), IndexStride*K] (the entry
// before it is below r), whose leaf a second search reads. The same answer for every r, ties,
// ±Inf and NaN included (TestCalibrationIndexedSearch); a calibration made without its index
// (a literal) searches Sorted whole.
func (c *Calibration) search(r float64) int {
	s := c.Sorted
	if len(c.index) != IndexLen(len(s)) {
		return SearchFloat64s(s, r)
	}
	k := indexSearch(c.index, r)
	if k == 0 {
		return 0
	}
	lo, hi := IndexStride*(k-1)+1, min(IndexStride*k, len(s))
	return lo + countBelow(s[lo:hi], r)
}

// indexSearch is SearchFloat64s(index, r): a count where the index is short (a key's
// calibration of 200 scores has 13 entries), a binary search where it is long (the global
// model's, 256 at 4,096 scores).
func indexSearch(index []float64, r float64) int {
	if len(index) <= 2*IndexStride {
		return countBelow(index, r)
	}
	return SearchFloat64s(index, r)
}

// countBelow is how many of s are below r: SearchFloat64s(s, r) for s ascending (0 for a NaN
// r, as there), in compares that do not depend on one another (a binary search's loads wait
// each on the one before: on a leaf of at most IndexStride scores in the cache the count is the
// faster).
func countBelow(s []float64, r float64) int {
	a, b := 0, 0
	i := 0
	for ; i+1 < len(s); i += 2 {
		if s[i] < r {
			a++
		}
		if s[i+1] < r {
			b++
		}
	}
	if i < len(s) && s[i] < r {
		a++
	}
	return a + b
}

// Index is the calibration's index, the first lines a search for any score reads (for a
// prefetch ahead of the search: Leaf then names the rest).
func (c *Calibration) Index() []float64 { return c.index }

// Leaf is the scores of Sorted a score r's surprisal reads after the index (for a prefetch):
// the leaf the search reads and the scores either side of its answer; the largest score for r
// above it; nil for a NaN r or an empty calibration (Surprisal reads no score then).
func (c *Calibration) Leaf(r float64) []float64 {
	s := c.Sorted
	n := len(s)
	switch {
	case n == 0 || math.IsNaN(r):
		return nil
	case r > s[n-1]:
		return s[n-1:]
	case len(c.index) != IndexLen(n):
		return s
	}
	k := indexSearch(c.index, r)
	if k == 0 {
		return s[:1]
	}
	return s[IndexStride*(k-1) : min(IndexStride*k+1, len(s))]
}
