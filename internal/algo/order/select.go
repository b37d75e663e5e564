// Package order selects order statistics of float32 values without sorting them all.
package order

import "slices"

// SelectNth reorders a so that a[k] is the value slices.Sort would put there, no value of a[:k]
// above it and none of a[k+1:] below it: quickselect with median-of-three pivots, a sort for
// short ranges. NaN breaks the order but not the loop: every scan is bounded. After
// SelectNth(a, k-1), a[:k] holds the k smallest values.
func SelectNth(a []float32, k int) {
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
			for i < hi && a[i] < p {
				i++
			}
			for j > lo && a[j] > p {
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
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
	slices.Sort(a[lo : hi+1])
}
