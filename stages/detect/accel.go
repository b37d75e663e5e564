package detect

import (
	"sync"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// Accelerator runs the distance-based steps on a device (a GPU through gpukern); its results
// equal the CPU's (the kernels' parity tests). A step it cannot take (an error, a parameter
// beyond a kernel's limits) falls back to the CPU, so an Accelerator never makes the stage fail.
type Accelerator interface {
	// Name says which device, for logs and metrics.
	Name() string
	// SolvingSet is solvingset.SolvingSet on the device.
	SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error)
	// KNNWeights is solvingset.KNNWeights (w_k(q, S) per query) on the device.
	KNNWeights(S, Q [][]float32, k int, out []float64) error
	// DetectRecords is m.Density.DetectRecords on the device, for normalised records. The device
	// may keep m's density model resident until a call with another model.
	DetectRecords(m *Model, means, sds [][]float32, p density.Params, out []density.Verdict) error
	// Cluster is microcluster.Cluster (the model's micro-clustering of the normalised window)
	// on the device: the same result, clusters and assignment.
	Cluster(means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error)
}

// solvingSet runs SolvingSet on the accelerator when there is one, else (or on its failure)
// on the CPU.
func solvingSetOn(a Accelerator, rep *accelReport, cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if a != nil {
		r, err := a.SolvingSet(cols, p)
		if err == nil {
			return r, nil
		}
		rep.failed(a, "SolvingSet", err)
	}
	return solvingset.SolvingSet(cols, p, nil)
}

// clusterOn micro-clusters the normalised window on the accelerator when there is one, else (or
// on its failure) on the CPU.
func clusterOn(a Accelerator, rep *accelReport, means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error) {
	if a != nil {
		mc, assign, err := a.Cluster(means, sds, q, iterations, seed)
		if err == nil {
			return mc, assign, nil
		}
		rep.failed(a, "micro-clustering", err)
	}
	return microcluster.Cluster(means, sds, q, iterations, seed, 0)
}

// scoreDistance writes w_k(q, S) for normalised queries, on the accelerator when there is one.
func scoreDistance(a Accelerator, rep *accelReport, m *solvingset.Model, q [][]float32, out []float64) {
	if a != nil {
		err := a.KNNWeights(m.Points, q, m.K, out)
		if err == nil {
			return
		}
		rep.failed(a, "k-NN scoring", err)
	}
	m.ScoreBatch(q, out, 0)
}

// detectDensity runs the density test of normalised records on the accelerator when there is
// one, else (or on its failure) on the CPU.
func detectDensity(a Accelerator, rep *accelReport, m *Model, means, sds [][]float32, p density.Params, out []density.Verdict) error {
	if a != nil {
		err := a.DetectRecords(m, means, sds, p, out)
		if err == nil {
			return nil
		}
		rep.failed(a, "density", err)
	}
	return m.Density.DetectRecords(means, sds, p, out)
}

// accelReport logs the steps the accelerator could not take (the CPU took them): the first
// failure of each step, then every 1000th, so that a lost device shows in the log without
// flooding it. Safe for the model builder's goroutine and the scoring goroutine at once.
type accelReport struct {
	log   zerolog.Logger
	mu    sync.Mutex
	fails map[string]int
}

func (r *accelReport) failed(a Accelerator, step string, err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.fails == nil {
		r.fails = map[string]int{}
	}
	r.fails[step]++
	n := r.fails[step]
	r.mu.Unlock()
	if n == 1 || n%1000 == 0 {
		r.log.Warn().Str("device", a.Name()).Str("step", step).Int("failures", n).Err(err).
			Msg("the accelerator failed a step; the CPU took it (same results)")
	}
}
