package pipeline

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/stages/detect"
)

// Device is where the distance-based steps run: the CPU, or an NVIDIA GPU through gpukern
// (same results: the kernels' parity tests). It implements detect.Accelerator when it holds a GPU.
type Device struct {
	gpu  *gpukern.Device
	name string
	// more are the host's other GPUs (ordinals 1, 2, ...): SolvingSet spreads over every GPU
	// for windows of at least multiGPURows (the distributed solving set, one node per device).
	more []*gpukern.Device

	// The density model kept resident on the GPU: the serving model's, replaced (and the old
	// one freed) when a batch arrives scored by a newer model.
	densMu    sync.Mutex
	densModel *detect.Model
	densGPU   *gpukern.DensityModel
}

// OpenDevice resolves `device: auto|cpu|cuda`: auto takes the GPU when this binary was built
// with CUDA and one opens, else the CPU; cuda without a usable GPU is an error. It logs which.
func OpenDevice(choice string, log zerolog.Logger) (*Device, error) {
	switch choice {
	case "cpu":
		log.Info().Str("device", "cpu").Msg("device: CPU (configured)")
		return &Device{name: "cpu"}, nil
	case "auto", "cuda":
	default:
		return nil, fmt.Errorf("device must be auto, cpu or cuda, got %q", choice)
	}
	ok, why := gpukern.Available()
	if ok {
		d, err := gpukern.Open(0)
		if err == nil {
			dev := &Device{gpu: d, name: "cuda:" + d.Name()}
			for i := 1; ; i++ { // every other GPU of the host, for the builds of large windows
				o, err := gpukern.Open(i)
				if err != nil {
					break
				}
				dev.more = append(dev.more, o)
			}
			log.Info().Str("device", "cuda").Str("gpu", d.Name()).Int("gpus", 1+len(dev.more)).Msg("device: GPU")
			return dev, nil
		}
		why = err.Error()
	}
	if choice == "cuda" {
		return nil, fmt.Errorf("device cuda: no usable GPU: %s", why)
	}
	log.Info().Str("device", "cpu").Str("reason", why).Msg("device auto: using the CPU")
	return &Device{name: "cpu"}, nil
}

// Name is "cpu" or "cuda:<GPU name>".
func (d *Device) Name() string { return d.name }

// GPU is the gpukern device, nil on the CPU.
func (d *Device) GPU() *gpukern.Device { return d.gpu }

// Accelerator is the device as the detect stage uses it: nil on the CPU.
func (d *Device) Accelerator() detect.Accelerator {
	if d.gpu == nil {
		return nil
	}
	return d
}

// Close releases the GPUs.
func (d *Device) Close() error {
	if d.gpu == nil {
		return nil
	}
	errs := []error{d.gpu.Close()}
	for _, o := range d.more {
		errs = append(errs, o.Close())
	}
	return errors.Join(errs...)
}

// multiGPURows is the smallest window SolvingSet spreads over several GPUs: the distributed
// solving set has a serial part of 2-5 ms per iteration (docs/BENCHMARKS.md §4.3.1), which a
// 10M-row window amortises (1.7-1.9x on 2 GPUs) and a 50,000-row window would not.
const multiGPURows = 1_000_000

// distributedSolvingSet runs SolvingSet over every GPU, one node per device over consecutive
// partitions of the rows; the same result as one device.
func (d *Device) distributedSolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	devs := append([]*gpukern.Device{d.gpu}, d.more...)
	rows := len(cols[0])
	nodes := make([]solvingset.Node, 0, len(devs))
	var owned []*gpukern.DistributedNode
	defer func() {
		for _, n := range owned {
			n.Close()
		}
	}()
	for i, g := range devs {
		lo, hi := rows*i/len(devs), rows*(i+1)/len(devs)
		part := make([][]float32, len(cols))
		for j := range cols {
			part[j] = cols[j][lo:hi]
		}
		n, err := gpukern.NewDistributedNode(g, part, p.K, p.M)
		if err != nil {
			return solvingset.Result{}, err
		}
		nodes, owned = append(nodes, n), append(owned, n)
	}
	r, err := solvingset.DistributedSolvingSet(nodes, len(cols), p, true)
	if err != nil {
		return solvingset.Result{}, err
	}
	r.DistanceComputations = -1
	return r.Result, nil
}

// SolvingSet runs SolvingSet on the GPU. DistanceComputations is -1: the kernels do not count.
func (d *Device) SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if d.gpu == nil {
		return solvingset.Result{}, gpukern.ErrNoDevice
	}
	if p.K > gpukern.KNNMaxK {
		return solvingset.Result{}, fmt.Errorf("k=%d is above the GPU kernel's limit %d", p.K, gpukern.KNNMaxK)
	}
	if len(d.more) > 0 && len(cols) > 0 && len(cols[0]) >= multiGPURows {
		return d.distributedSolvingSet(cols, p)
	}
	r, err := gpukern.SolvingSet(d.gpu, cols, gpukern.SolvingSetParams{K: p.K, N: p.N, M: p.M, Seed: p.Seed})
	if err != nil {
		return solvingset.Result{}, err
	}
	res := solvingset.Result{WStar: r.WStar, SolvingSet: r.SolvingSet, Iterations: r.Iterations, DistanceComputations: -1}
	for _, o := range r.Outliers {
		res.Outliers = append(res.Outliers, solvingset.Outlier{Row: o.Row, Weight: o.Weight})
	}
	return res, nil
}

// KNNWeights is w_k(q, S) for every query on the GPU.
func (d *Device) KNNWeights(S, Q [][]float32, k int, out []float64) error {
	if d.gpu == nil {
		return gpukern.ErrNoDevice
	}
	return gpukern.KNNWeights(d.gpu, S, Q, k, out)
}

// Weights is every row's exact weight w_k(p, D \ {p}) on the GPU (solvingset.Weights' twin).
func (d *Device) Weights(cols [][]float32, k int, out []float64) error {
	if d.gpu == nil {
		return gpukern.ErrNoDevice
	}
	return gpukern.Weights(d.gpu, cols, k, out)
}

// Cluster is microcluster.Cluster with the passes on the GPU: the same initial centres
// (microcluster.InitialCentroids), the window uploaded once, then per pass gpukern.Cluster
// (assign + reduce, bit-identical to the CPU's by its parity tests) from centres kept on the
// host, so that a cluster that empties keeps the centre it had as its anchor, as on the CPU. Input
// that the CPU refuses is refused here with the CPU's error.
func (d *Device) Cluster(means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error) {
	if d.gpu == nil {
		return nil, nil, gpukern.ErrNoDevice
	}
	cent, err := microcluster.InitialCentroids(means, sds, q, iterations, seed)
	if err != nil {
		return nil, nil, err
	}
	mcols, err := d.gpu.Upload(means)
	if err != nil {
		return nil, nil, err
	}
	defer mcols.Free()
	var scols *gpukern.Columns
	if sds != nil {
		if scols, err = d.gpu.Upload(sds); err != nil {
			return nil, nil, err
		}
		defer scols.Free()
	}
	assign := make([]int32, len(means[0]))
	var mc *microcluster.MicroClusters
	for range iterations {
		f, err := gpukern.Cluster(mcols, scols, cent, 1, assign)
		if err != nil {
			return nil, nil, err
		}
		if mc, err = microcluster.New(len(means), q); err != nil {
			return nil, nil, err
		}
		mc.N = f.N
		for j := range means {
			mc.CF1[j], mc.CF2[j] = f.CF1[j], f.CF2[j]
			if f.EF2 != nil {
				mc.EF2[j] = f.EF2[j]
			}
			for c, n := range f.N {
				if n == 0 {
					mc.Anchor[j][c] = float64(cent[j][c])
				}
			}
		}
		cent = mc.Centroids()
	}
	return mc, assign, nil
}

// DetectRecords is the density test of normalised records on the GPU, with the model's density
// (its kernel parameters and density bounds table) kept resident between batches of one model.
func (d *Device) DetectRecords(m *detect.Model, means, sds [][]float32, p density.Params, out []density.Verdict) error {
	if d.gpu == nil {
		return gpukern.ErrNoDevice
	}
	if len(means) > gpukern.DensityMaxDims {
		return fmt.Errorf("%d features are above the GPU kernel's %d", len(means), gpukern.DensityMaxDims)
	}
	gm, err := d.residentDensity(m)
	if err != nil {
		return err
	}
	return gpukern.DetectRecords(d.gpu, gm, means, sds, gpukern.DensityParamsOf(p), out)
}

// residentDensity returns m's density model on the GPU, uploading it (and dropping the previous
// model's) when m is not the resident one.
func (d *Device) residentDensity(m *detect.Model) (*gpukern.DensityModel, error) {
	d.densMu.Lock()
	defer d.densMu.Unlock()
	if d.densModel == m {
		return d.densGPU, nil
	}
	if d.densGPU != nil {
		if err := gpukern.DropDensityModel(d.gpu, d.densGPU); err != nil {
			return nil, err
		}
		d.densModel, d.densGPU = nil, nil
	}
	gm, err := gpukern.DensityModelOf(m.Density, m.MicroClusters)
	if err != nil {
		return nil, err
	}
	if err := gpukern.KeepDensityModel(d.gpu, gm); err != nil {
		return nil, err
	}
	d.densModel, d.densGPU = m, gm
	return gm, nil
}
