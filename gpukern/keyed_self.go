package gpukern

import (
	"fmt"
	"math"
	"slices"
)

// A key's model build (stages/detect, keyed_build.go) calibrates its distance score on its own
// window: each record's k-NN weight among the window's other records (solvingset.KNNWeightsSelf),
// more than half of a build's host CPU. keyed_self (keyed.cu) computes it for every key a batch
// rebuilds in one launch; KeyedSelfReference is its CPU twin, which the parity tests hold to
// the kernel and to KNNWeightsSelf.

// checkKeyedSelf reports why the kernels do not take the sets (nil when they do): sets[s] is d
// columns of n_s points (1 <= d <= KeyedMaxDims, the same d for every set), 1 <= k[s] <=
// KeyedMaxK, and out[s] has n_s values.
func checkKeyedSelf(sets [][][]float32, k []int, out [][]float64) error {
	if len(k) != len(sets) || len(out) != len(sets) {
		return fmt.Errorf("%d sets, %d k, %d outputs", len(sets), len(k), len(out))
	}
	d := 0
	if len(sets) > 0 {
		d = len(sets[0])
	}
	if len(sets) > 0 && (d < 1 || d > KeyedMaxDims) {
		return fmt.Errorf("%d features (the keyed kernels take 1..%d)", d, KeyedMaxDims)
	}
	total := 0
	for s, set := range sets {
		if len(set) != d {
			return fmt.Errorf("set %d has %d features, set 0 %d", s, len(set), d)
		}
		n := len(set[0])
		for j, c := range set {
			if len(c) != n {
				return fmt.Errorf("set %d: feature %d has %d points, feature 0 %d", s, j, len(c), n)
			}
		}
		if len(out[s]) != n {
			return fmt.Errorf("set %d: %d points, %d outputs", s, n, len(out[s]))
		}
		if k[s] < 1 || k[s] > KeyedMaxK {
			return fmt.Errorf("set %d: k = %d (the kernels take 1..%d)", s, k[s], KeyedMaxK)
		}
		total += n
		if total > math.MaxInt32/max(d, 1) {
			return fmt.Errorf("%d points of %d features in one call (at most %d values)", total, d, math.MaxInt32)
		}
	}
	return nil
}

// KeyedSelfReference is the CPU twin of keyed_self for one set P (d columns of n points): out[i]
// is the sum of the distances from point i to its k nearest other points (+inf when k > n-1),
// step for step the kernel's arithmetic: float32 squared distances summed over the features in
// order with every product rounded, point i left out by its index, a NaN distance never kept
// (the queue's `a < threshold`; +inf ones add +inf either way), the k smallest roots (float32,
// correctly rounded) summed ascending in float64, +inf where fewer than k were kept.
func KeyedSelfReference(P [][]float32, k int, out []float64) {
	n := len(P[0])
	d2 := make([]float32, 0, n)
	for i := range n {
		d2 = d2[:0]
		for p := range n {
			if p == i {
				continue
			}
			var a float32
			for j, c := range P {
				u := P[j][i] - c[p]
				if j == 0 {
					a = float32(u * u) // (the conversions keep each product rounded: no fused multiply-add)
				} else {
					a += float32(u * u)
				}
			}
			if a == a {
				d2 = append(d2, a)
			}
		}
		if k > len(d2) { // (k > n-1, or NaN distances left fewer)
			out[i] = math.Inf(1)
			continue
		}
		slices.Sort(d2)
		var w float64
		for _, v := range d2[:k] {
			w += float64(float32(math.Sqrt(float64(v))))
		}
		out[i] = w
	}
}

// keyedSelfParams is keyed_self_q*'s parameter (keyed.cu: KeyedSelfParams).
type keyedSelfParams struct {
	Points uint64 `c:"points"`
	Start  uint64 `c:"start"`
	K      uint64 `c:"k"`
	NSet   int64  `c:"nset"`
	D      int64  `c:"d"`
	Out    uint64 `c:"out"`
}
