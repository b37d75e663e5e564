package gpukern_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// keyedSelfSets are point sets as a key's build hands them to keyed_self (its window sample R in
// the distance space): count sets of dims features, of 2 to 300 points and k from 1 to 64 (the
// 32- and 64-slot queues, k = n-1, k past n-1), with copies (zero distances besides the point's
// own), ties, points at the space's clamp (+-1e6) and a set whose points are all one (every
// distance zero).
func keyedSelfSets(r *rand.Rand, count, dims int) (sets [][][]float32, ks []int) {
	for s := range count {
		n := 2 + r.IntN(299)
		if s%7 == 0 {
			n = 200 // the default keys.window
		}
		k := []int{10, 1, 31, 40, 64, n - 1, n}[s%7]
		k = max(1, min(k, gpukern.KeyedMaxK))
		set := make([][]float32, dims)
		for j := range set {
			set[j] = make([]float32, n)
			for i := range n {
				v := float32(r.NormFloat64())
				switch {
				case s%11 == 5:
					v = 3 // every point the same
				case i%13 == 4 && i > 0:
					v = set[j][i-1] // a copy (in this feature; every feature at i%13 == 4: the point)
				case i%29 == 7:
					v = float32(gpukern.KeyedLimit) * float32(1-2*(i%2)) // the clamp
				case i%5 == 2:
					v = float32(math.Round(float64(v)*4) / 4) // ties of distances
				}
				set[j][i] = v
			}
		}
		sets, ks = append(sets, set), append(ks, k)
	}
	return sets, ks
}

// TestKeyedSelfReferenceMatchesKNNWeightsSelf: keyed_self's CPU twin gives the key build's
// k-NN calibration (solvingset.KNNWeightsSelf, the window against itself) bit for bit, so the
// kernel held to the twin builds the CPU's models.
func TestKeyedSelfReferenceMatchesKNNWeightsSelf(t *testing.T) {
	r := newRand(t, 2123)
	for _, dims := range []int{1, 3, 5} {
		sets, ks := keyedSelfSets(r, 60, dims)
		for s, set := range sets {
			n, k := len(set[0]), ks[s]
			if k > n-1 {
				k = n - 1 // (KNNWeightsSelf's callers keep k <= n-1; the twin's +inf is tested below)
			}
			want, got := make([]float64, n), make([]float64, n)
			solvingset.KNNWeightsSelf(set, k, want)
			gpukern.KeyedSelfReference(set, k, got)
			for i := range n {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("dims %d set %d (n=%d k=%d) point %d: twin %v, KNNWeightsSelf %v", dims, s, n, k, i, got[i], want[i])
				}
			}
		}
	}
	out := make([]float64, 3)
	gpukern.KeyedSelfReference([][]float32{{1, 2, 3}}, 3, out)
	for _, w := range out {
		if !math.IsInf(w, 1) {
			t.Fatalf("k past n-1: %v, want +inf", out)
		}
	}
}

// TestKeyedSelfReferenceNaN: the twin keeps no NaN distance, as keyed_self's queue never takes
// one (select.cuh: `NaN < x` is false): a point with a NaN coordinate is no one's neighbour,
// and its own weight, with no distance to keep, is +inf (the queue's initial +inf). (A window
// never holds one: the stage's builds refuse windows not finite, and accel runs such a call on
// the CPU; the twin is the kernel's definition all the same.)
func TestKeyedSelfReferenceNaN(t *testing.T) {
	nan := float32(math.NaN())
	set := [][]float32{{0, 1, 2, 3, 4, 5}, {0, 1, nan, 3, 4, 5}}
	out := make([]float64, 6)
	gpukern.KeyedSelfReference(set, 2, out)
	// Point i's two nearest among the others but point 2: the points (v, v), v = 0, 1, 3, 4, 5.
	r := func(v float64) float64 { return float64(float32(math.Sqrt(v))) }
	want := []float64{r(2) + r(18), r(2) + r(8), math.Inf(1), r(2) + r(8), r(2) + r(2), r(2) + r(8)}
	for i := range want {
		if math.Float64bits(out[i]) != math.Float64bits(want[i]) {
			t.Fatalf("point %d: %v, want %v (all: %v)", i, out[i], want[i], out)
		}
	}
}
