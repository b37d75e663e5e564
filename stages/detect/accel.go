package detect

import (
	"github.com/outlierd/outlierd/stages/detect/solvingset"
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
}

// SetAccelerator makes the stage run SolvingSet and k-NN scoring on a; nil means the CPU.
// Call it before the first Process.
func (s *Stage) SetAccelerator(a Accelerator) { s.accel = a }

// solvingSet runs SolvingSet on the accelerator when there is one, else (or on its failure)
// on the CPU.
func solvingSetOn(a Accelerator, cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if a != nil {
		if r, err := a.SolvingSet(cols, p); err == nil {
			return r, nil
		}
	}
	return solvingset.SolvingSet(cols, p, nil)
}

// scoreDistance writes w_k(q, S) for normalised queries, on the accelerator when there is one.
func scoreDistance(a Accelerator, m *solvingset.Model, q [][]float32, out []float64) {
	if a != nil && a.KNNWeights(m.Points, q, m.K, out) == nil {
		return
	}
	m.ScoreBatch(q, out, 0)
}
