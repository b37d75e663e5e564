package euclid_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/euclid"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
)

// TestSquaredIsTheKernelsSequence: Squared gives, bit for bit, microcluster.SquaredDistance of the
// gathered row (the same documented sequence), and differs from the fused form t*t + acc on
// some input (were the conversion dropped and the compiler to fuse, the twins would drift from
// their kernels; .ci/nofma.sh checks the build, this checks the arithmetic).
func TestSquaredIsTheKernelsSequence(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	fusedDiffers := false
	for trial := range 5000 {
		d := 1 + trial%40
		cols, c, row := make([][]float32, d), make([]float32, d), make([]float32, d)
		for j := range cols {
			cols[j] = []float32{float32(r.NormFloat64() * 100), float32(r.NormFloat64())}
			c[j] = float32(r.NormFloat64() * 100)
			row[j] = cols[j][0]
		}
		got := euclid.Squared(cols, 0, c)
		if want := microcluster.SquaredDistance(row, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("trial %d: Squared %v, microcluster.SquaredDistance %v", trial, got, want)
		}
		var fused float32
		for j := range row {
			tt := row[j] - c[j]
			fused = float32(math.FMA(float64(tt), float64(tt), float64(fused)))
		}
		fusedDiffers = fusedDiffers || fused != got
	}
	if !fusedDiffers {
		t.Fatal("no input told the fused sum from the rounded one: the test cannot see an FMA")
	}
}
