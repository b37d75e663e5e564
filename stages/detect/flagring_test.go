package detect

import (
	"math/rand/v2"
	"testing"
)

// TestFlagRingMatchesBools: a flagRing's flags and counts are those of a []bool under the same
// writes, at lengths around the words' edges (count's masks at both ends of a word).
func TestFlagRingMatchesBools(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 63, 64, 65, 127, 128, 129, 200, 256, 1000} {
		f, ref := newFlagRing(n), make([]bool, n)
		if f.len() != n {
			t.Fatalf("len %d, want %d", f.len(), n)
		}
		for range 4 * n {
			i, v := r.IntN(n), r.IntN(3) == 0
			f.set(i, v)
			ref[i] = v
		}
		for i := range n {
			if f.at(i) != ref[i] {
				t.Fatalf("n %d: flag %d is %v, want %v", n, i, f.at(i), ref[i])
			}
		}
		g := f.clone()
		f.set(0, !ref[0]) // (the clone is independent)
		if g.at(0) != ref[0] {
			t.Fatalf("n %d: the clone follows the original", n)
		}
		f.set(0, ref[0])
		for lo := 0; lo <= n; lo++ {
			for hi := lo; hi <= n; hi += 1 + r.IntN(5) {
				want := 0
				for _, v := range ref[lo:hi] {
					if v {
						want++
					}
				}
				if got := f.count(lo, hi); got != want {
					t.Fatalf("n %d: count(%d, %d) = %d, want %d", n, lo, hi, got, want)
				}
			}
		}
	}
}
