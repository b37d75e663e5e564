package accel

import (
	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// The glue between the algorithms' types and gpukern's launches (GPU paths only: d.gpu != nil).

// A GPU node of the distributed solving set is a solvingset.Node.
var _ solvingset.Node = (*gpukern.DistributedNode)(nil)

// multiGPURows is the smallest window SolvingSet spreads over several GPUs: the distributed
// solving set has a serial part of 2-5 ms per iteration (docs/BENCHMARKS.md §4.3.1), which a
// 10M-row window amortises (1.7-1.9x on 2 GPUs) and a 50,000-row window would not.
const multiGPURows = 1_000_000

// gpuSolvingSet runs SolvingSet on GPU 0, or over every GPU for large windows.
func (d *Device) gpuSolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	if len(d.more) > 0 && len(cols) > 0 && len(cols[0]) >= multiGPURows {
		return d.distributedSolvingSet(cols, p)
	}
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
		n, err := gpukern.NewDistributedNode(g, part, p.K, p.M, solvingset.PruneMargin(p.K))
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
