//go:build cuda

package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/stages/detect/solvingset"
)

// TestExactWeightsGPUMatchesCPU: topn --label-column's exact weights on the GPU (the all-rows
// pass) are bit-identical to solvingset.Weights, also with duplicated rows (a duplicate at
// another index is a neighbour at distance 0, the row itself is not), and k above the kernel's
// limit falls back to the CPU with the same result.
func TestExactWeightsGPUMatchesCPU(t *testing.T) {
	dev, err := resolveDevice("cuda", zerolog.Nop())
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	defer dev.close()
	r := rand.New(rand.NewPCG(7, 8))
	const n = 4000
	cols := make([][]float32, 3)
	for j := range cols {
		cols[j] = make([]float32, n)
		for i := range cols[j] {
			cols[j][i] = float32(r.NormFloat64())
		}
		for i := 0; i < n; i += 10 {
			cols[j][i] = cols[j][i/10] // every tenth row repeats an earlier one
		}
	}
	for _, k := range []int{50, 300} {
		got, err := dev.weights(cols, k)
		if err != nil {
			t.Fatal(err)
		}
		want := solvingset.Weights(cols, k, 0)
		bad := 0
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				if bad < 5 {
					t.Errorf("k=%d row %d: got %v, CPU %v", k, i, got[i], want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("k=%d: %d of %d weights differ", k, bad, n)
		}
	}
}
