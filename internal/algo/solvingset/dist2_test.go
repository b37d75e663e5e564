package solvingset

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDistMask2: the vectorised distances and mask are bit-identical to the scalar loop,
// including thresholds equal to the distance (d2 <= t2 must hold), -1 (reject) and +Inf.
func TestDistMask2(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for n := 0; n <= 64; n += 4 {
		for range 50 {
			x0, x1 := make([]float32, n), make([]float32, n)
			t2 := make([]float32, n)
			for i := range n {
				x0[i], x1[i] = float32(r.NormFloat64()*1e3), float32(r.NormFloat64())
			}
			p0, p1 := float32(r.NormFloat64()), float32(r.NormFloat64()*1e-3)
			want := make([]float32, n)
			distMask2Go(x0, x1, want, make([]float32, n), p0, p1)
			for i := range t2 {
				switch r.IntN(5) {
				case 0:
					t2[i] = -1
				case 1:
					t2[i] = float32(math.Inf(1))
				case 2:
					t2[i] = want[i] // tie: accepted
				case 3:
					t2[i] = math.Nextafter32(want[i], 0) // just below: rejected
				default:
					t2[i] = float32(r.Float64() * 1e6)
				}
			}
			gotD, wantD := make([]float32, n), make([]float32, n)
			got := distMask2(x0, x1, gotD, t2, p0, p1)
			wantMask := distMask2Go(x0, x1, wantD, t2, p0, p1)
			if got != wantMask || !slices.Equal(gotD, wantD) {
				t.Fatalf("n=%d: mask %x, want %x; distances %v, want %v", n, got, wantMask, gotD, wantD)
			}
		}
	}
}
