package detect

import (
	"fmt"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// Accelerator runs the distance-based and density steps on a device (internal/accel: a GPU
// through gpukern); its results equal the CPU's (the kernels' parity tests). It owns the CPU
// fallback (internal/accel's one policy): a step it cannot take on the device runs on the CPU
// inside the call, so an error it returns is the CPU's for that input, and the stage does not
// retry it.
type Accelerator interface {
	// Name says which device, for logs and metrics.
	Name() string
	// SolvingSet is solvingset.SolvingSet.
	SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error)
	// ScoreBatch runs a batch's device steps in one call, the only scoring call the stage makes
	// to the device: the density test (dens, when not nil: dens.Model.DetectRecords, the model
	// density.NewModel(dens.Clusters, h)) and the k-NN weights against models' points (knn:
	// solvingset.KNNWeights with each model's k, the queries in its space). The device may keep
	// the models resident while they are used; the steps overlap on it.
	ScoreBatch(dens *density.Scoring, knn []solvingset.Scoring) error
	// Cluster is microcluster.Cluster (the model's micro-clustering of the normalised window):
	// the same result, clusters and assignment.
	Cluster(means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error)
}

// solvingSetOn runs SolvingSet on the accelerator when there is one, else on the CPU.
func solvingSetOn(a Accelerator, cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if a != nil {
		return a.SolvingSet(cols, p)
	}
	return solvingset.SolvingSet(cols, p, nil)
}

// clusterOn micro-clusters the normalised window on the accelerator when there is one, else on
// the CPU.
func clusterOn(a Accelerator, means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error) {
	if a != nil {
		return a.Cluster(means, sds, q, iterations, seed)
	}
	return microcluster.Cluster(means, sds, q, iterations, seed, 0)
}

// devicePlanner is a Detector with per-batch device steps that join the batch's one accelerator
// call (Accelerator.ScoreBatch) instead of making calls of their own: plan adds them to p, and
// Score then reads their results (Query.planned). One call per batch instead of one per step
// saves the copies and synchronisations of the others, and the steps' kernels overlap (issue 12
// item 5: three calls per 1000-record batch were most of the stage's time on the GPU).
type devicePlanner interface {
	plan(q *Query, p *devicePlan)
}

// devicePlan is a batch's device steps.
type devicePlan struct {
	density *density.Scoring
	knn     []solvingset.Scoring
}

// planDevice plans the detectors' device steps of a batch: nil without an accelerator or
// without a step for it.
func planDevice(a Accelerator, detectors []Detector, q *Query) *devicePlan {
	if a == nil {
		return nil
	}
	var p devicePlan
	for _, d := range detectors {
		if pl, ok := d.(devicePlanner); ok {
			pl.plan(q, &p)
		}
	}
	if p.density == nil && len(p.knn) == 0 {
		return nil
	}
	return &p
}

// runPlan runs a batch's device steps in one accelerator call; then every planner's results
// are in place.
func runPlan(a Accelerator, p *devicePlan) error {
	if err := a.ScoreBatch(p.density, p.knn); err != nil {
		return fmt.Errorf("detect: density: %w", err) // only the density test can refuse its input
	}
	return nil
}
