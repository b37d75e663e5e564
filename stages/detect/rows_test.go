package detect

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestRowsOnCoresMatchOneGoroutine: a batch's normalisation, distance space and decision cut by
// rows over the cores (onRows) give each row the bits of the one-goroutine loops they replace,
// on a batch of several chunks with values past the clamps, NaN and missing uncertainties.
func TestRowsOnCoresMatchOneGoroutine(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	n := 5*scoresGrain + 123
	r := rand.New(rand.NewPCG(3, 4))
	col := func() []float32 {
		c := make([]float32, n)
		for i := range c {
			c[i] = float32(r.NormFloat64() * 1e3)
		}
		c[7], c[n-1], c[scoresGrain] = float32(math.NaN()), 1e30, -1e30
		return c
	}
	means, sds := [][]float32{col(), col(), col()}, [][]float32{col(), nil, col()}
	m := &Model{Offset: []float32{1, -2, 300}, Scale: []float32{0.5, 1e-3, 2e5}}
	nm, ns := m.normalised(means, sds, &scoreScratch{})
	rk := &Ranker{Center: []float64{3, 0, -1e3}, Unit: []float64{7, 1e-9, 2}}
	space := rk.distanceSpace(means, nil)
	for j := range means {
		for i := range n {
			o, s := float64(m.Offset[j]), float64(m.Scale[j])
			wantM := float32(max(-NormalisedLimit, min(NormalisedLimit, (float64(means[j][i])-o)*s)))
			var wantS float32
			if sds[j] != nil {
				wantS = scaleSD(sds[j][i], m.Scale[j])
			}
			wantD := float32(max(-distanceLimit, min(distanceLimit, (float64(means[j][i])-rk.Center[j])/rk.Unit[j])))
			if math.Float32bits(nm[j][i]) != math.Float32bits(wantM) || math.Float32bits(ns[j][i]) != math.Float32bits(wantS) ||
				math.Float32bits(space[j][i]) != math.Float32bits(wantD) {
				t.Fatalf("feature %d row %d: %v %v %v, want %v %v %v", j, i, nm[j][i], ns[j][i], space[j][i], wantM, wantS, wantD)
			}
		}
	}
	cfg := Default()
	scores, want := make([]batch.Score, n), make([]batch.Score, n)
	for i := range scores {
		scores[i] = batch.Score{Score: r.Float64() * 10, Threshold: 5, DensityOutlier: r.IntN(3) == 0, DistanceOutlier: r.IntN(3) == 0}
	}
	copy(want, scores)
	for _, ranked := range []bool{false, true} {
		decide(&cfg, ranked, scores)
		for i := range want {
			decideRows(&cfg, ranked, want[i:i+1])
			if scores[i].Outlier != want[i].Outlier {
				t.Fatalf("ranked %v, row %d: outlier %v, want %v", ranked, i, scores[i].Outlier, want[i].Outlier)
			}
		}
	}
}
