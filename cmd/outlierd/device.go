package main

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/pipeline"
)

// device runs the detectors on the CPU (the tuned multi-core implementation) or on an NVIDIA
// GPU through gpukern, which gives the same answers. A call the GPU kernels do not cover (a
// parameter beyond a kernel's limits, brute force) runs on the CPU and says so in the log.
type device struct {
	name string // "cpu" or "cuda:<gpu name>"
	dev  *pipeline.Device
	gpu  *gpukern.Device // nil on the CPU
	log  zerolog.Logger
}

// resolveDevice maps --device to a device (pipeline.OpenDevice: auto takes the GPU when the
// binary was built with CUDA and one opens, else the CPU, and logs which).
func resolveDevice(flagValue string, log zerolog.Logger) (*device, error) {
	if err := oneOf("device", flagValue, "auto", "cpu", "cuda"); err != nil {
		return nil, err
	}
	d, err := pipeline.OpenDevice(flagValue, log)
	if err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	return &device{name: d.Name(), dev: d, gpu: d.GPU(), log: log}, nil
}

func (d *device) close() { d.dev.Close() }

// cpuFallback notes in the log that a step runs on the CPU although a GPU was chosen.
func (d *device) cpuFallback(step, why string) {
	if d.gpu != nil {
		d.log.Info().Str("step", step).Str("reason", why).Msg("running on the CPU")
	}
}

func (d *device) solvingSet(cols [][]float32, p solvingset.Params, progress func(iter, active int)) (solvingset.Result, error) {
	if d.gpu == nil {
		return solvingset.SolvingSet(cols, p, progress)
	}
	if p.K > gpukern.KNNMaxK {
		d.cpuFallback("SolvingSet", fmt.Sprintf("k=%d is above the GPU kernel's %d", p.K, gpukern.KNNMaxK))
		return solvingset.SolvingSet(cols, p, progress)
	}
	r, err := d.dev.SolvingSet(cols, p)
	if err != nil {
		return solvingset.Result{}, fmt.Errorf("GPU SolvingSet: %w", err)
	}
	return r, nil
}

func (d *device) bruteForce(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	d.cpuFallback("BruteForce", "the nested-loop oracle has no GPU kernel")
	return solvingset.BruteForce(cols, p)
}

// weights is every row's exact weight (a row is not its own neighbour), for ROC AUC: the GPU's
// all-rows k-NN pass when there is a GPU (bit-identical to the CPU's), else solvingset.Weights.
func (d *device) weights(cols [][]float32, k int) ([]float64, error) {
	if d.gpu != nil && k <= gpukern.KNNMaxK && len(cols) <= gpukern.MaxDims {
		out := make([]float64, len(cols[0]))
		if err := d.dev.Weights(cols, k, out); err != nil {
			return nil, fmt.Errorf("GPU exact weights: %w", err)
		}
		return out, nil
	}
	if d.gpu != nil {
		d.cpuFallback("exact weights", fmt.Sprintf("k=%d or %d dimensions above the GPU kernel's %d, %d", k, len(cols), gpukern.KNNMaxK, gpukern.MaxDims))
	}
	return solvingset.Weights(cols, k, 0), nil
}

// cluster is microcluster.Cluster, on the GPU when there is one (the same clusters and
// assignment, pipeline.Device.Cluster); beyond the kernels' limits, or when the GPU fails, on the
// CPU, which also reports input it refuses.
func (d *device) cluster(means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error) {
	if d.gpu != nil && q <= gpukern.ReduceMaxQ && len(means) <= gpukern.MaxDims {
		mc, assign, err := d.dev.Cluster(means, sds, q, iterations, seed)
		if err == nil {
			return mc, assign, nil
		}
		d.cpuFallback("micro-clustering", err.Error())
	} else if d.gpu != nil {
		d.cpuFallback("micro-clustering", fmt.Sprintf("q=%d or %d dimensions above the GPU kernels' %d, %d", q, len(means), gpukern.ReduceMaxQ, gpukern.MaxDims))
	}
	return microcluster.Cluster(means, sds, q, iterations, seed, 0)
}

// scoreBatch writes w_k(q, S) of every query (raw units) into out.
func (d *device) scoreBatch(m *solvingset.Model, cols [][]float32, out []float64) error {
	if err := m.CheckBatch(cols, out); err != nil {
		return err
	}
	if d.gpu != nil && m.K <= gpukern.KNNMaxK {
		q := cols
		if m.Offset != nil {
			q = make([][]float32, len(cols))
			for j, c := range cols {
				q[j] = make([]float32, len(c))
				for i, x := range c {
					q[j][i] = (x - m.Offset[j]) * m.Scale[j]
				}
			}
		}
		if err := gpukern.KNNWeights(d.gpu, m.Points, q, m.K, out); err != nil {
			return fmt.Errorf("GPU k-NN prediction: %w", err)
		}
		return nil
	}
	if d.gpu != nil {
		d.cpuFallback("prediction", fmt.Sprintf("k=%d is above the GPU kernel's %d", m.K, gpukern.KNNMaxK))
	}
	m.ScoreBatch(cols, out, 0)
	return nil
}

// detectRecords runs record-granularity density detection: on the GPU (every mode, sampled or
// exact, up to gpukern.DensityMaxDims dimensions), else on the CPU.
func (d *device) detectRecords(model *density.Model, _ []string, means, sds [][]float32, p density.Params, out []density.Verdict, gpuModel func() (*gpukern.DensityModel, error)) error {
	if d.gpu != nil && len(means) <= gpukern.DensityMaxDims {
		gm, err := gpuModel()
		if err != nil {
			return err
		}
		if err := gpukern.DetectRecords(d.gpu, gm, means, sds, gpukern.DensityParamsOf(p), out); err != nil {
			return fmt.Errorf("GPU density detection: %w", err)
		}
		return nil
	}
	if d.gpu != nil {
		d.cpuFallback("density", fmt.Sprintf("%d dimensions are above the GPU kernel's %d", len(means), gpukern.DensityMaxDims))
	}
	return model.DetectRecords(means, sds, p, out)
}

// detectClusters runs cluster-granularity density detection (one verdict per micro-cluster): on
// the GPU up to gpukern.DensityMaxDims dimensions, else on the CPU.
func (d *device) detectClusters(model *density.Model, dims int, p density.Params, gpuModel func() (*gpukern.DensityModel, error)) ([]density.Verdict, error) {
	if d.gpu != nil && dims <= gpukern.DensityMaxDims {
		gm, err := gpuModel()
		if err != nil {
			return nil, err
		}
		v, err := gpukern.DetectClusters(d.gpu, gm, gpukern.DensityParamsOf(p))
		if err != nil {
			return nil, fmt.Errorf("GPU density detection: %w", err)
		}
		return v, nil
	}
	if d.gpu != nil {
		d.cpuFallback("density", fmt.Sprintf("%d dimensions are above the GPU kernel's %d", dims, gpukern.DensityMaxDims))
	}
	return model.DetectClusters(p)
}
