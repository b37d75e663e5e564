//go:build !cuda

package gpukern

import (
	"fmt"
	"time"
)

// Available reports whether a CUDA device can be used and, if not, why: this build has no CUDA.
// (Why the CUDA companion binary did not take over is the caller's: accel.Options.NoCompanion.)
func Available() (bool, string) { return false, "built without CUDA (build with -tags cuda)" }

// Device is one CUDA device. In this build (no cuda tag) none can be opened.
type Device struct{}

// Open fails with an error wrapping ErrNoDevice: the package was built without the cuda tag.
func Open(ordinal int) (*Device, error) {
	return nil, fmt.Errorf("gpukern.Open: device %d: built without CUDA: %w", ordinal, ErrNoDevice)
}

// Name is empty: no device exists in this build.
func (d *Device) Name() string { return "" }

// Counters are all zero in this build: no kernel runs and nothing is copied.
func (d *Device) Counters() (kernel time.Duration, hostToDevice, deviceToHost int64) {
	return 0, 0, 0
}

// Close does nothing in this build.
func (d *Device) Close() error { return nil }

// Upload fails with ErrNoDevice in this build.
func (d *Device) Upload(cols [][]float32) (*Columns, error) {
	return nil, fmt.Errorf("gpukern.Upload: %w", errNoCUDA)
}

// Free does nothing in this build (no Columns can exist).
func (c *Columns) Free() error { return nil }

var errNoCUDA = fmt.Errorf("built without CUDA: %w", ErrNoDevice)

func (d *Device) knnWeights(S, Q [][]float32, ns, nq, k int, out []float64) error {
	return fmt.Errorf("gpukern.KNNWeights: %w", errNoCUDA)
}

func (d *Device) weights(cols [][]float32, n, k int, out []float64) error {
	return fmt.Errorf("gpukern.Weights: %w", errNoCUDA)
}

func (d *Device) assign(means, centroids [][]float32, n, q int, out []int32) error {
	return fmt.Errorf("gpukern.Assign: %w", errNoCUDA)
}

func (d *Device) reduce(means, sds [][]float32, assign []int32, n, q, chunk int) (*ClusterFeatures, error) {
	return nil, fmt.Errorf("gpukern.Reduce: %w", errNoCUDA)
}

func (d *Device) cluster(means, sds *Columns, centroids [][]float32, q, iterations, chunk int, assign []int32) (*ClusterFeatures, error) {
	return nil, fmt.Errorf("gpukern.Cluster: %w", errNoCUDA)
}

func (d *Device) solvingSet(cols [][]float32, rows int, p SolvingSetParams) (SolvingSetResult, error) {
	return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: %w", errNoCUDA)
}

func (d *Device) solvingSetResident(c *Columns, p SolvingSetParams) (SolvingSetResult, error) {
	return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: %w", errNoCUDA)
}

func (d *Device) keepDensityModel(m *DensityModel) error { return errNoCUDA }

func (d *Device) dropDensityModel(m *DensityModel) error { return errNoCUDA }

type distNode struct{}

func (d *Device) newDistNode(cols [][]float32, rows, k, m int, margin float64) (*distNode, error) {
	return nil, errNoCUDA
}
func (d *Device) distTake(n *distNode, rows []int) ([]float32, []float32, error) {
	return nil, nil, errNoCUDA
}
func (d *Device) distStep(n *distNode, taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	return nil, nil, Proposal{}, errNoCUDA
}
func (d *Device) distNeighbours(n *distNode, from, count []int) ([][]float32, error) {
	return nil, errNoCUDA
}
func (d *Device) distFree(n *distNode) error { return nil }

func (d *Device) distHostTimes(n *distNode) DistHostTimes { return DistHostTimes{} }

func (d *Device) distSetTotal(n *distNode, rows int) {}
func (d *Device) hypercubeEncode(cols [][]float32, g *HypercubeGrid, keys []uint64) error {
	return errNoCUDA
}

func (d *Device) hypercubeDensity(g *HypercubeGrid, keys []uint64, count []int32, nodes []HypercubeNode, w []int64) error {
	return errNoCUDA
}

// KernelTimes is empty in this build: no kernel runs.
func (d *Device) KernelTimes() map[string]KernelTotal { return map[string]KernelTotal{} }

func (d *Device) run(dens *densityJob, knn []KNNStep) (densityResult, error) {
	return densityResult{}, errNoCUDA
}
