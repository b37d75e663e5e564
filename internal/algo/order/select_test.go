package order

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSelectNth: SelectNth leaves a[k] where slices.Sort puts it, nothing above it before it and
// nothing below it after it, on random values, ties, runs and sorted input.
func TestSelectNth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		n := 1 + r.IntN(300)
		a := make([]float32, n)
		for i := range a {
			switch trial % 4 {
			case 0:
				a[i] = float32(r.NormFloat64())
			case 1:
				a[i] = float32(r.IntN(4))
			case 2:
				a[i] = float32(i)
			default:
				a[i] = float32(n - i)
			}
		}
		want := slices.Clone(a)
		slices.Sort(want)
		k := r.IntN(n)
		SelectNth(a, k)
		if a[k] != want[k] {
			t.Fatalf("trial %d, n %d, k %d: a[k] = %g, want %g", trial, n, k, a[k], want[k])
		}
		for i, v := range a {
			if (i < k && v > a[k]) || (i > k && v < a[k]) {
				t.Fatalf("trial %d, n %d, k %d: a[%d] = %g on the wrong side of %g", trial, n, k, i, v, a[k])
			}
		}
	}
}
