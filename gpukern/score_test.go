package gpukern_test

import (
	"reflect"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// TestScoreMatchesSteps: one Score call (the density test and two k-NN steps, each on its own
// stream) gives DetectRecords' verdicts exactly (the same kernel) and solvingset.KNNWeights'
// weights bit for bit, against point sets both split into slices (20,000 points) and not (300),
// batch after batch with sizes going up and down (the kept buffers), with and without the
// density step.
func TestScoreMatchesSteps(t *testing.T) {
	d := openDevice(t)
	const dims = 6
	cpu, _, mc, data := densityFixture(t, 4000, dims, 50)
	gm, err := accel.DensityModelOf(cpu, mc)
	if err != nil {
		t.Fatal(err)
	}
	if err := gpukern.KeepDensityModel(d, gm); err != nil {
		t.Fatal(err)
	}
	r := newRand(t, 77)
	big, small := testcols.Uniform(r, 20000, dims), testcols.Uniform(r, 300, dims)
	bigD, err := d.Upload(big)
	if err != nil {
		t.Fatal(err)
	}
	smallD, err := d.Upload(small)
	if err != nil {
		t.Fatal(err)
	}
	p := density.Params{Eta: 0.5, Delta: 0.5, Samples: 100, Mode: density.Independent, Seed: 3, Exact: true} // (Samples: checked, unused by the exact method)
	for step, n := range []int{1000, 37, 1000, 400} {
		means, sds := make([][]float32, dims), make([][]float32, dims)
		for j := range dims {
			means[j], sds[j] = data.Cols[j][step*100:step*100+n], data.SD[j][step*100:step*100+n]
		}
		Q := testcols.Uniform(r, n, dims)
		wantDens := make([]gpukern.DensityVerdict, n)
		if err := gpukern.DetectRecords(d, gm, means, sds, accel.DensityParams(p), wantDens); err != nil {
			t.Fatal(err)
		}
		wantBig, wantSmall := make([]float64, n), make([]float64, n)
		solvingset.KNNWeights(big, Q, 50, 0, wantBig)
		solvingset.KNNWeights(small, means, 100, 0, wantSmall)
		s := gpukern.Scoring{
			KNN: []gpukern.KNNStep{{S: bigD, Q: Q, K: 50, Out: make([]float64, n)}, {S: smallD, Q: means, K: 100, Out: make([]float64, n)}},
		}
		if step%2 == 0 {
			s.Density = &gpukern.DensityStep{Model: gm, Means: means, SDs: sds, Params: accel.DensityParams(p), Out: make([]gpukern.DensityVerdict, n)}
		}
		if err := gpukern.Score(d, &s); err != nil {
			t.Fatal(err)
		}
		if s.Density != nil && !reflect.DeepEqual(s.Density.Out, wantDens) {
			t.Errorf("batch %d: Score's density verdicts differ from DetectRecords'", step)
		}
		sameBits(t, "Score S=20000", s.KNN[0].Out, wantBig)
		sameBits(t, "Score S=300", s.KNN[1].Out, wantSmall)
	}
	// Refused: too many steps, S on no device.
	five := make([]gpukern.KNNStep, 5)
	for i := range five {
		five[i] = gpukern.KNNStep{S: smallD, Q: small, K: 1, Out: make([]float64, 300)}
	}
	if err := gpukern.Score(d, &gpukern.Scoring{KNN: five}); err == nil {
		t.Error("5 steps accepted")
	}
	if err := gpukern.Score(d, &gpukern.Scoring{KNN: []gpukern.KNNStep{{Q: small, K: 1, Out: make([]float64, 300)}}}); err == nil {
		t.Error("a nil S accepted")
	}
}
