package gpukern

import "fmt"

// MaxScoreSteps is the most steps one Score call takes (the device's step streams): a stream
// batch's density test and its k-NN weights against two point sets (the solving set and the
// ranking sample) make three.
const MaxScoreSteps = 4

// Scoring is one batch's scoring steps, run by Score in one call: the density test of its records
// (Density, optional) and k-NN weights against point sets kept on the device (KNN). Each step's
// kernel runs on its own stream, so that they overlap: at a stream's batch sizes (1000 records)
// each kernel alone fills a fraction of the device, and one call instead of one per step saves
// the per-call copies and synchronisations (issue 12 item 5).
type Scoring struct {
	Density *DensityStep
	KNN     []KNNStep
}

// DensityStep is DetectRecords' arguments.
type DensityStep struct {
	Model      *DensityModel
	Means, SDs [][]float32
	Params     DensityParams
	Out        []DensityVerdict
}

// KNNStep is KNNWeightsOn's arguments.
type KNNStep struct {
	S   *Columns
	Q   [][]float32
	K   int
	Out []float64
}

// Score runs every step of s on d in one call: the same results as DetectRecords and
// KNNWeightsOn called one after the other (the same kernels), the inputs up in one copy and the
// results back in one. At most MaxScoreSteps steps; every KNN step's S must be on d.
func Score(d *Device, s *Scoring) error {
	steps := len(s.KNN)
	var dens *densityJob
	if s.Density != nil {
		steps++
		rq, err := recordsRequest(s.Density.Model, s.Density.Means, s.Density.SDs, s.Density.Params, len(s.Density.Out))
		if err != nil {
			return fmt.Errorf("gpukern.Score: density: %w", err)
		}
		dens = &densityJob{m: s.Density.Model, rq: rq, p: s.Density.Params}
	}
	if steps > MaxScoreSteps {
		return fmt.Errorf("gpukern.Score: %d steps, at most %d", steps, MaxScoreSteps)
	}
	for i, st := range s.KNN {
		if err := knnOnShape(st.S, st.Q, st.K, len(st.Out)); err != nil {
			return fmt.Errorf("gpukern.Score: k-NN step %d: %w", i, err)
		}
		if st.S.dev != d {
			return fmt.Errorf("gpukern.Score: k-NN step %d: S is on another device", i)
		}
	}
	res, err := d.run(dens, s.KNN)
	if err != nil {
		return fmt.Errorf("gpukern.Score: %w", err)
	}
	if dens != nil {
		res.verdicts(s.Density.Out, nil)
	}
	return nil
}

// densityJob is a checked density test on one model: DetectRecords', DetectClusters' or a Score
// density step's.
type densityJob struct {
	m  *DensityModel
	rq densityRequest
	p  DensityParams
}
