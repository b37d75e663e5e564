//go:build cuda

package gpukern

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// knnBlock is the number of threads per block of knn_weights_q*: one warp per query, 16 queries
// per block sharing each shared-memory tile of S (64-72 registers per thread: two blocks per SM).
const knnBlock = 512

// tileFor returns the number of points per shared-memory tile for d dimensions: a multiple of 32
// (the kernels' register batch), at most 1024, with d*tile floats within 48 KiB.
func tileFor(d, want int) int {
	t := min(1024, (48*1024/4/d)/32*32, (want+31)/32*32)
	return max(t, 32)
}

// knnKernel names the instantiation of knn_weights whose register queue (32, 64, 128 or 256
// slots per warp) is the smallest that holds k.
func knnKernel(k int) string {
	q := 32
	for q < k {
		q *= 2
	}
	return fmt.Sprintf("knn_weights_q%d", q)
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
		if err = d.launchKNN(sp, ns, q, nq, len(S), k, self, op); err != nil {
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
	tile := tileFor(dims, ns)
	name := knnKernel(k)
	shared := dims * tile * 4
	perSM, err := d.fns[name].MaxActiveBlocksPerMultiProcessor(knnBlock, int64(shared))
	if err != nil {
		return fmt.Errorf("kernel %s: cuOccupancyMaxActiveBlocksPerMultiprocessor: %w", name, err)
	}
	grid := min((nq+knnBlock/32-1)/(knnBlock/32), max(perSM, 1)*d.smCount)
	var selfArg int64
	if self {
		selfArg = 1
	}
	return d.launch(name, [3]int{grid, 1, 1}, [3]int{knnBlock, 1, 1}, shared,
		sp, int64(ns), qp, int64(nq), int64(dims), int64(k), int64(tile), selfArg, op)
}
