package accel

import (
	"fmt"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// The glue between the algorithms' types and gpukern's launches (GPU paths only: d.gpu != nil).

// SolvingSetNodes makes GPU nodes of the distributed solving set solvingset.Nodes (gpukern does
// not import the algorithms: its Step returns gpukern.Proposal, the same struct).
func SolvingSetNodes(nodes []*gpukern.DistributedNode) []solvingset.Node {
	out := make([]solvingset.Node, len(nodes))
	for i, n := range nodes {
		out[i] = gpuNode{n}
	}
	return out
}

type gpuNode struct{ *gpukern.DistributedNode }

func (n gpuNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, solvingset.Proposal, error) {
	lnnc, done, next, err := n.DistributedNode.Step(taken, coords, lnn, minOUT, m)
	return lnnc, done, solvingset.Proposal(next), err
}

// multiGPURows is the smallest window SolvingSet spreads over several GPUs (the distributed
// solving set, one node per GPU), from BenchmarkSolvingSetDevices on 4 H100s (docs/BENCHMARKS.md
// §4.3.1, the nodes' one hand-over per iteration), uploads counted as the pipeline pays them: at
// 1M rows one GPU wins or it is a wash (10-D 110 ms against 144 on 2 GPUs and 114 on 4; 2-D 28.6
// against 27.3 and 27.5: the per-iteration fixed costs are most of the work they spread), at 2M
// every GPU count and both shapes win (10-D 1.27x and 1.35x, 2-D 1.29x and 1.50x).
const multiGPURows = 2_000_000

// gpuSolvingSet runs SolvingSet on every GPU for windows of at least multiGPURows rows, else
// (or when that fails) on GPU 0.
func (d *Device) gpuSolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	return d.solvingSetOnGPUs(cols, p, 1+len(d.more), d.distributedSolvingSet, d.oneGPUSolvingSet)
}

// solvingSetOnGPUs is the GPU side of SolvingSet's policy: the distributed solving set (multi)
// over gpus devices for windows of at least multiGPURows rows; when it fails (a GPU lost, out
// of memory on one of them), the build is counted and logged as a device failure and one GPU
// (one) takes it, and only when that fails too does the error reach step, which hands the
// build to the CPU. The same result either way (both paths' parity tests).
func (d *Device) solvingSetOnGPUs(cols [][]float32, p solvingset.Params, gpus int,
	multi, one func([][]float32, solvingset.Params) (solvingset.Result, error)) (solvingset.Result, error) {
	if gpus > 1 && len(cols) > 0 && len(cols[0]) >= multiGPURows {
		r, err := multi(cols, p)
		if err == nil {
			return r, nil
		}
		d.failed("SolvingSet on every GPU", fmt.Errorf("%w (one GPU takes the build)", err))
	}
	return one(cols, p)
}

// oneGPUSolvingSet runs SolvingSet on GPU 0.
func (d *Device) oneGPUSolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	rows := len(cols[0])
	r, err := gpukern.SolvingSet(d.gpu, cols, gpukern.SolvingSetParams{K: p.K, N: p.N, M: p.M,
		First: solvingset.FirstCandidates(rows, min(p.M, rows), p.Seed), Margin: solvingset.PruneMargin(p.K),
		Out: solvingset.NewTopN(p.N)})
	if err != nil {
		return solvingset.Result{}, err
	}
	res := solvingset.Result{WStar: r.WStar, SolvingSet: r.SolvingSet, Iterations: r.Iterations, DistanceComputations: -1}
	for _, o := range r.Outliers {
		res.Outliers = append(res.Outliers, solvingset.Outlier{Row: o.Row, Weight: o.Weight})
	}
	return res, nil
}

// distributedSolvingSet runs SolvingSet over every GPU, one node per device over consecutive
// partitions of the rows (uploaded concurrently); the same result as one device.
func (d *Device) distributedSolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	devs := append([]*gpukern.Device{d.gpu}, d.more...)
	owned, err := gpukern.NewDistributedNodes(devs, cols, p.K, p.M, solvingset.PruneMargin(p.K))
	if err != nil {
		return solvingset.Result{}, err
	}
	defer func() {
		// The result stands: a device whose frees fail fails its next call, which falls back.
		if err := gpukern.CloseDistributedNodes(owned); err != nil {
			d.log.Warn().Err(err).Msg("device: freeing the distributed solving set's nodes")
		}
	}()
	// Not lazy: a GPU node hands every list over with its Step (whole lists cost no round trip).
	r, err := solvingset.DistributedSolvingSet(SolvingSetNodes(owned), len(cols), p, false)
	if err != nil {
		return solvingset.Result{}, err
	}
	r.DistanceComputations = -1
	return r.Result, nil
}

// gpuCluster is microcluster.Cluster with the passes on the GPU from the initial centres cent
// (microcluster.InitialCentroids): the window uploaded once, then per pass gpukern.Cluster
// (assign + reduce, bit-identical to the CPU's by its parity tests) from centres kept on the
// host, so that a cluster that empties keeps the centre it had as its anchor, as on the CPU.
func (d *Device) gpuCluster(means, sds [][]float32, cent [][]float32, q, iterations int) (*microcluster.MicroClusters, []int32, error) {
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
	chunk := microcluster.ReduceChunkRows(len(assign)) // the CPU twin's partial sums
	var mc *microcluster.MicroClusters
	for range iterations {
		f, err := gpukern.Cluster(mcols, scols, cent, 1, chunk, assign)
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

// residentDensity returns dm's density model on the GPU, uploading it (and dropping the previous
// model's) when dm is not the resident one.
func (d *Device) residentDensity(dm *density.Model, mc *microcluster.MicroClusters) (*gpukern.DensityModel, error) {
	d.densMu.Lock()
	defer d.densMu.Unlock()
	if d.densModel == dm {
		return d.densGPU, nil
	}
	if d.densGPU != nil {
		if err := gpukern.DropDensityModel(d.gpu, d.densGPU); err != nil {
			return nil, err
		}
		d.densModel, d.densGPU = nil, nil
	}
	gm, err := DensityModelOf(dm, mc)
	if err != nil {
		return nil, err
	}
	if err := gpukern.KeepDensityModel(d.gpu, gm); err != nil {
		return nil, err
	}
	d.densModel, d.densGPU = dm, gm
	return gm, nil
}
