package accel

import (
	"fmt"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// SolvingSet is solvingset.SolvingSet. On the GPU DistanceComputations is -1 (the kernels do
// not count).
func (d *Device) SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	return d.SolvingSetProgress(cols, p, nil)
}

// SolvingSetProgress is SolvingSet with the CPU's progress callback (called on the CPU only).
func (d *Device) SolvingSetProgress(cols [][]float32, p solvingset.Params, progress func(iter, active int)) (res solvingset.Result, err error) {
	uncovered := ""
	if p.K > gpukern.KNNMaxK {
		uncovered = fmt.Sprintf("k=%d is above the GPU kernel's %d", p.K, gpukern.KNNMaxK)
	}
	err = d.step("SolvingSet", uncovered, func() (err error) {
		res, err = d.gpuSolvingSet(cols, p)
		return err
	}, func() (err error) {
		res, err = solvingset.SolvingSet(cols, p, progress)
		return err
	})
	return res, err
}

// BruteForce is solvingset.BruteForce, the nested-loop oracle: the CPU only.
func (d *Device) BruteForce(cols [][]float32, p solvingset.Params) (res solvingset.Result, err error) {
	err = d.step("BruteForce", "the nested-loop oracle has no GPU kernel", nil, func() (err error) {
		res, err = solvingset.BruteForce(cols, p)
		return err
	})
	return res, err
}

// KNNWeights is solvingset.KNNWeights (w_k(q, S) per query, all cores on the CPU).
func (d *Device) KNNWeights(S, Q [][]float32, k int, out []float64) error {
	uncovered := knnUncovered(k, len(S))
	return d.step("k-NN scoring", uncovered, func() error {
		return gpukern.KNNWeights(d.gpu, S, Q, k, out)
	}, func() error {
		solvingset.KNNWeights(S, Q, k, 0, out)
		return nil
	})
}

// Weights is every row's exact weight w_k(p, D \ {p}), solvingset.Weights (for ROC AUC).
func (d *Device) Weights(cols [][]float32, k int) ([]float64, error) {
	out := make([]float64, len(cols[0]))
	uncovered := knnUncovered(k, len(cols))
	err := d.step("exact weights", uncovered, func() error {
		return gpukern.Weights(d.gpu, cols, k, out)
	}, func() error {
		out = solvingset.Weights(cols, k, 0)
		return nil
	})
	return out, err
}

// Predict writes the model's w_k(q, S) of every query (raw units) into out: m.ScoreBatch.
func (d *Device) Predict(m *solvingset.Model, cols [][]float32, out []float64) error {
	if err := m.CheckBatch(cols, out); err != nil {
		return err
	}
	uncovered := knnUncovered(m.K, len(cols))
	return d.step("prediction", uncovered, func() error {
		q := cols
		if m.Offset != nil { // the model's normalisation, as ScoreBatch applies it
			q = make([][]float32, len(cols))
			for j, c := range cols {
				q[j] = make([]float32, len(c))
				for i, x := range c {
					q[j][i] = (x - m.Offset[j]) * m.Scale[j]
				}
			}
		}
		return gpukern.KNNWeights(d.gpu, m.Points, q, m.K, out)
	}, func() error {
		m.ScoreBatch(cols, out, 0)
		return nil
	})
}

// Cluster is microcluster.Cluster (all cores on the CPU): the same clusters and assignment.
// Input the CPU refuses is refused with the CPU's error, without trying the GPU.
func (d *Device) Cluster(means, sds [][]float32, q, iterations int, seed uint64) (mc *microcluster.MicroClusters, assign []int32, err error) {
	cpu := func() (err error) {
		mc, assign, err = microcluster.Cluster(means, sds, q, iterations, seed, 0)
		return err
	}
	cent, err := microcluster.InitialCentroids(means, sds, q, iterations, seed)
	if err != nil {
		return nil, nil, cpu()
	}
	uncovered := ""
	if q > gpukern.ReduceMaxQ || len(means) > gpukern.MaxDims {
		uncovered = fmt.Sprintf("q=%d or %d dimensions above the GPU kernels' %d, %d", q, len(means), gpukern.ReduceMaxQ, gpukern.MaxDims)
	}
	err = d.step("micro-clustering", uncovered, func() (err error) {
		mc, assign, err = d.gpuCluster(means, sds, cent, q, iterations)
		return err
	}, cpu)
	return mc, assign, err
}

// DetectRecords is dm.DetectRecords (the density test of normalised records) for the model
// dm = density.NewModel(mc, h). dm stays resident on the GPU until a call with another model.
func (d *Device) DetectRecords(dm *density.Model, mc *microcluster.MicroClusters, means, sds [][]float32, p density.Params, out []density.Verdict) error {
	return d.step("density", d.densityUncovered(len(means)), func() error {
		gm, err := d.residentDensity(dm, mc)
		if err != nil {
			return err
		}
		return GPUDetectRecords(d.gpu, gm, means, sds, p, out)
	}, func() error {
		return dm.DetectRecords(means, sds, p, out)
	})
}

// DetectClusters is dm.DetectClusters (one verdict per micro-cluster of mc).
func (d *Device) DetectClusters(dm *density.Model, mc *microcluster.MicroClusters, p density.Params) (v []density.Verdict, err error) {
	err = d.step("density", d.densityUncovered(len(mc.CF1)), func() error {
		gm, err := d.residentDensity(dm, mc)
		if err != nil {
			return err
		}
		v, err = GPUDetectClusters(d.gpu, gm, p)
		return err
	}, func() (err error) {
		v, err = dm.DetectClusters(p)
		return err
	})
	return v, err
}

func (d *Device) densityUncovered(dims int) string {
	if dims > gpukern.DensityMaxDims {
		return fmt.Sprintf("%d dimensions are above the GPU kernel's %d", dims, gpukern.DensityMaxDims)
	}
	return ""
}

// Hypercube is hypercube.Detect with b bins per dimension.
func (d *Device) Hypercube(cols [][]float32, bins int) (res *hypercube.Result, err error) {
	err = d.step("hypercube density", "", func() (err error) {
		res, _, err = gpuHypercube(d.gpu, cols, hypercube.Params{Bins: bins})
		return err
	}, func() (err error) {
		res, err = hypercube.Detect(cols, hypercube.Params{Bins: bins})
		return err
	})
	return res, err
}

// Proclus is proclus.Run.
func (d *Device) Proclus(cols [][]float32, p proclus.Params) (res *proclus.Result, err error) {
	uncovered := ""
	if d.gpu != nil {
		if why := gpukern.ProclusFits(p.K, len(cols)); why != nil {
			uncovered = why.Error()
		}
	}
	err = d.step("PROCLUS", uncovered, func() (err error) {
		res, err = GPUProclus(d.gpu, cols, p)
		return err
	}, func() (err error) {
		res, err = proclus.Run(cols, p)
		return err
	})
	return res, err
}

// knnUncovered says why the k-NN kernels do not cover k neighbours in dims dimensions ("" when
// they do).
func knnUncovered(k, dims int) string {
	if k > gpukern.KNNMaxK || dims > gpukern.MaxDims {
		return fmt.Sprintf("k=%d or %d dimensions above the GPU kernel's %d, %d", k, dims, gpukern.KNNMaxK, gpukern.MaxDims)
	}
	return ""
}
