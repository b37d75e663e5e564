package gpukern_test

import (
	"math"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/stages/detect/solvingset"
)

// TestKNNWeightsParity compares the GPU weights with the CPU twin bit for bit: both compute the
// same float32 distances and sum the k nearest in ascending order (no tolerance is needed).
func TestKNNWeightsParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name        string
		ns, nq, dim int
		k           int
		dup         bool // S made of a few distinct points repeated: heavy distance ties
	}{
		{"k=1", 100, 300, 3, 1, false},
		{"k=|S|", 64, 200, 2, 64, false},
		{"k>|S| gives +Inf", 20, 50, 4, 30, false},
		{"k=256 max", 700, 257, 5, 256, false},
		{"multi-tile d=2", 2500, 1000, 2, 50, false},
		{"multi-tile d=10, ragged", 1999, 1031, 10, 50, false},
		{"d=1", 333, 129, 1, 7, false},
		{"d=37 tile<ns", 900, 100, 37, 20, false},
		{"ties", 500, 400, 3, 40, true},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t, uint64(100+ci))
			S := randCols(r, c.ns, c.dim)
			if c.dup {
				for j := range S {
					for i := range S[j] {
						S[j][i] = S[j][i%7] // 7 distinct points, each repeated
					}
				}
			}
			Q := randCols(r, c.nq, c.dim)
			want := make([]float64, c.nq)
			solvingset.KNNWeights(S, Q, c.k, 0, want)
			got := make([]float64, c.nq)
			for i := range got {
				got[i] = math.NaN() // poison: every output must be written
			}
			if err := gpukern.KNNWeights(d, S, Q, c.k, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					if bad < 5 {
						t.Errorf("query %d: GPU %v, CPU %v", i, got[i], want[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d weights differ", bad, c.nq)
			}
		})
	}
}
