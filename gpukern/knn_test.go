package gpukern_test

import (
	"math"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// TestKNNWeightsParity compares the GPU weights with the CPU twin bit for bit: both compute the
// same float32 distances and sum the k nearest in ascending order (no tolerance is needed).
func TestKNNWeightsParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name        string
		ns, nq, dim int
		k           int
		dup         bool    // S made of a few distinct points repeated: heavy distance ties
		scale       float32 // coordinates multiplied by it (0: 1)
		offset      float32 // then shifted by it
		near        bool    // every other query an ulp from a point of S: distances 2^40 apart
	}{
		{"k=1", 100, 300, 3, 1, false, 0, 0, false},
		{"k=|S|", 64, 200, 2, 64, false, 0, 0, false},
		{"k>|S| gives +Inf", 20, 50, 4, 30, false, 0, 0, false},
		{"k=256 max", 700, 257, 5, 256, false, 0, 0, false},
		{"k=100 queue of 128", 3000, 333, 6, 100, false, 0, 0, false},
		{"k=33 queue of 64, d=17 past the register coordinates", 1500, 95, 17, 33, false, 0, 0, false},
		{"d=9 padded to 10, k=64 full queue", 2100, 301, 9, 64, false, 0, 0, false},
		{"d=16 two tiles, k=65 queue of 256", 2000, 200, 16, 65, false, 0, 0, false},
		{"d=12 k=1 two tiles", 2500, 77, 12, 1, false, 0, 0, false},
		{"d=7 padded to 8, k=150", 2500, 63, 7, 150, false, 0, 0, false},
		{"d=13 padded to 16, duplicates", 800, 150, 13, 30, true, 0, 0, false},
		{"multi-tile d=2", 2500, 1000, 2, 50, false, 0, 0, false},
		{"multi-tile d=10, ragged", 2999, 1031, 10, 50, false, 0, 0, false},
		{"d=10 one tile, k=50", 2000, 999, 10, 50, false, 0, 0, false},
		{"d=1", 333, 129, 1, 7, false, 0, 0, false},
		{"d=37 tile<ns", 900, 100, 37, 20, false, 0, 0, false},
		{"ties", 500, 400, 3, 40, true, 0, 0, false},
		// Squared distances around 1e-38, in and under the normal range: the bounding pass's
		// absolute margin (2^-120) admits every point, the candidate list overflows and the
		// query takes the exact pass over the whole tile.
		{"subnormal distances", 1200, 200, 6, 50, false, 1e-19, 0, false},
		// Far from the origin: the differences carry few significant bits, many distances tie.
		{"offset 1e4", 1500, 300, 4, 60, false, 0, 1e4, false},
		// A neighbour at about 1e-13 and others near 1: the weight is summed in ascending order
		// (the values span more than the 23 binades of the tree sum's exact case).
		{"near copies, k=64", 2000, 300, 10, 64, false, 0, 0, true},
		{"near copies, k=5, d=3", 700, 300, 3, 5, false, 0, 0, true},
		// A stream's batch against a large S: KNNWeightsOn splits it into slices (knnsplit.cu),
		// several tiles each; KNNWeights runs knn.cu's kernel over the whole of S.
		{"split d=8 k=50", 20000, 1000, 8, 50, false, 0, 0, false},
		{"split d=8 k=100 queue of 256", 20000, 333, 8, 100, false, 0, 0, false},
		{"split d=5 padded, ragged slices, duplicates", 9999, 77, 5, 64, true, 0, 0, false},
		{"split d=16 k=1", 7000, 500, 16, 1, false, 0, 0, false},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t, uint64(100+ci))
			S := testcols.Uniform(r, c.ns, c.dim)
			if c.dup {
				for j := range S {
					for i := range S[j] {
						S[j][i] = S[j][i%7] // 7 distinct points, each repeated
					}
				}
			}
			Q := testcols.Uniform(r, c.nq, c.dim)
			for _, X := range [][][]float32{S, Q} {
				for j := range X {
					for i := range X[j] {
						if c.scale != 0 {
							X[j][i] *= c.scale
						}
						X[j][i] += c.offset
					}
				}
			}
			if c.near { // every other query 2^-43 from a point of S, whose first coordinate is 1e-6
				for i := 0; i < c.nq; i += 2 {
					p := (7 * i) % c.ns
					S[0][p] = 1e-6
					for j := range Q {
						Q[j][i] = S[j][p]
					}
					Q[0][i] = math.Nextafter32(S[0][p], 1)
				}
			}
			want := make([]float64, c.nq)
			solvingset.KNNWeights(S, Q, c.k, 0, want)
			got := make([]float64, c.nq)
			for i := range got {
				got[i] = math.NaN() // poison: every output must be written
			}
			if err := gpukern.KNNWeights(d, S, Q, c.k, got); err != nil {
				t.Fatal(err)
			}
			sameBits(t, "KNNWeights", got, want)
			// The same against S resident (the stage's path): the cases' query counts go up and
			// down, so the kept query and weight buffers are grown and reused.
			res, err := d.Upload(S)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := res.Free(); err != nil {
					t.Error(err)
				}
			}()
			for i := range got {
				got[i] = math.NaN()
			}
			if err := gpukern.KNNWeightsOn(res, Q, c.k, got); err != nil {
				t.Fatal(err)
			}
			sameBits(t, "KNNWeightsOn", got, want)
		})
	}
}

// sameBits fails t for every weight of got that differs from want in any bit (the first five
// are named).
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	bad := 0
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s: query %d: GPU %v, CPU %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d weights differ", what, bad, len(got))
	}
}

// TestWeightsParity compares the all-rows pass (each row against all rows, itself skipped by
// index) with solvingset.Weights bit for bit, on data with exact duplicates (a duplicate at
// another index is a neighbour at distance 0, the row itself is not) and over several tiles.
func TestWeightsParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name   string
		n, dim int
		k      int
		dup    bool
	}{
		{"k=1", 300, 2, 1, false},
		{"k=n-1", 65, 3, 64, false},
		{"multi-tile d=3 k=50", 5000, 3, 50, false},
		{"duplicates", 900, 3, 20, true},
		{"d=10 k=200", 1200, 10, 200, false},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t, uint64(300+ci))
			X := testcols.Uniform(r, c.n, c.dim)
			if c.dup {
				for j := range X {
					for i := range X[j] {
						X[j][i] = X[j][i%11] // 11 distinct points, each repeated
					}
				}
			}
			want := solvingset.Weights(X, c.k, 0)
			got := make([]float64, c.n)
			for i := range got {
				got[i] = math.NaN()
			}
			if err := gpukern.Weights(d, X, c.k, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					if bad < 5 {
						t.Errorf("row %d: GPU %v, CPU %v", i, got[i], want[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d weights differ", bad, c.n)
			}
		})
	}
}
