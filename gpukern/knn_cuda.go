//go:build cuda

package gpukern

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// knnBlock is the number of threads per block of knn_weights_*: one warp per two queries, 32
// queries per block sharing each shared-memory tile of S.
const knnBlock = 512

// tileFor returns the number of points per shared-memory tile for d dimensions: a multiple of 32
// (the kernels' register batch), at most 1024, with d*tile floats within 48 KiB.
func tileFor(d, want int) int {
	t := min(1024, (48*1024/4/d)/32*32, (want+31)/32*32)
	return max(t, 32)
}

// knnDims are the compile-time dimension counts of knn.cu's kernels; data of fewer dimensions is
// zero-padded to the next one (bit-identical results), more than the last use the _dany kernels.
var knnDims = []int{2, 3, 4, 6, 8, 10, 12, 16}

// knnKernel names the instantiation of knn_weights for k and d (the register queue of 64 or 256
// slots per warp that holds k; the compile-time dimensions that hold d), its shared-memory rows
// and its tile (KNN_TILE in knn.cu for compile-time dimensions, tileFor otherwise).
func knnKernel(k, d, ns int) (name string, rows, tile int) {
	q := 64
	if k > 64 {
		q = 256
	}
	for _, D := range knnDims {
		if d <= D {
			return fmt.Sprintf("knn_weights_q%d_d%d", q, D), D, min(2048, (12288/D)/32*32)
		}
	}
	return fmt.Sprintf("knn_weights_q%d_dany", q), d, tileFor(d, ns)
}

// knnKernelNames lists every instantiation, for the module table.
func knnKernelNames() []string {
	var names []string
	for _, q := range []int{64, 256} {
		for _, D := range knnDims {
			names = append(names, fmt.Sprintf("knn_weights_q%d_d%d", q, D))
		}
		names = append(names, fmt.Sprintf("knn_weights_q%d_dany", q))
	}
	return names
}

func (d *Device) knnWeights(S, Q [][]float32, ns, nq, k int, out []float64) error {
	return d.knnRun("gpukern.KNNWeights", S, Q, ns, nq, k, false, out)
}

// weights is the all-rows pass: every row of cols against every other row.
func (d *Device) weights(cols [][]float32, n, k int, out []float64) error {
	return d.knnRun("gpukern.Weights", cols, nil, n, n, k, true, out)
}

// knnRun uploads S (and Q unless self, when the queries are S's own rows), runs knn_weights and
// downloads the weights.
func (d *Device) knnRun(what string, S, Q [][]float32, ns, nq, k int, self bool, out []float64) error {
	err := d.do(func() (err error) {
		var sp, qp, op cu.DevicePtr
		defer func() { err = errors.Join(err, frees(sp, qp, op)) }()
		if sp, err = uploadCols(d, "S", S, ns); err != nil {
			return err
		}
		q := sp
		if !self {
			if qp, err = uploadCols(d, "Q", Q, nq); err != nil {
				return err
			}
			q = qp
		}
		if op, err = alloc("out", int64(nq)*8); err != nil {
			return err
		}
		if self {
			err = d.launchKNN(sp, ns, q, nq, len(S), k, true, op)
		} else {
			err = d.launchKNNAny(cu.Stream{}, sp, ns, q, nq, len(S), k, scratchKNNPartial, op)
		}
		if err != nil {
			return err
		}
		return download(d, "out", out, op)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// launchKNN runs knn_weights on device buffers; owner thread only. With self, Q is S and query i
// skips point i. The grid is at most one resident wave (the blocks run over the queries), so a
// block loads a single-tile S once for all its queries.
func (d *Device) launchKNN(sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k int, self bool, op cu.DevicePtr) error {
	return d.launchKNNOn(cu.Stream{}, sp, ns, qp, nq, dims, k, self, op)
}

// launchKNNOn is launchKNN on stream (Score's concurrent steps). Owner thread only.
func (d *Device) launchKNNOn(stream cu.Stream, sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k int, self bool, op cu.DevicePtr) error {
	name, rows, tile := knnKernel(k, dims, ns)
	shared := rows * tile * 4
	// A batch of a stream (1000 queries) in blocks of 512 threads would be 32 blocks on a quarter
	// of the SMs; smaller blocks spread it over at least two per SM (each block reads S from L2:
	// a few hundred KB per block, microseconds).
	block := knnBlock
	for block > 64 && (nq+block/16-1)/(block/16) < 2*d.smCount {
		block /= 2
	}
	perSM, err := d.fns[name].MaxActiveBlocksPerMultiProcessor(block, int64(shared))
	if err != nil {
		return fmt.Errorf("kernel %s: cuOccupancyMaxActiveBlocksPerMultiprocessor: %w", name, err)
	}
	perBlock := block / 32 * 2 // queries
	grid := min((nq+perBlock-1)/perBlock, max(perSM, 1)*d.smCount)
	var selfArg int64
	if self {
		selfArg = 1
	}
	return launchParamsOn(d, stream, name, [3]int{grid, 1, 1}, [3]int{block, 1, 1}, shared, &knnParams{S: uint64(sp),
		Ns: int64(ns), Q: uint64(qp), Nq: int64(nq), D: int64(dims), K: int64(k), Tile: int64(tile), Self: selfArg,
		Out: uint64(op)})
}
