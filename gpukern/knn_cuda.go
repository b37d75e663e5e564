//go:build cuda

package gpukern

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// knnBlock is the number of threads (queries) per block of knn_weights: each thread holds a
// KNNMaxK-float heap in local memory, so smaller blocks spread the queries over more SMs.
const knnBlock = 128

// tileFor returns the number of points per shared-memory tile for d dimensions: a multiple of 32
// (the kernels' register batch), at most 1024, with d*tile floats within 48 KiB.
func tileFor(d, want int) int {
	t := min(1024, (48*1024/4/d)/32*32, (want+31)/32*32)
	return max(t, 32)
}

func (d *Device) knnWeights(S, Q [][]float32, ns, nq, k int, out []float64) error {
	err := d.do(func() (err error) {
		var sp, qp, op cu.DevicePtr
		defer func() { err = errors.Join(err, frees(sp, qp, op)) }()
		if sp, err = uploadCols(d, "S", S, ns); err != nil {
			return err
		}
		if qp, err = uploadCols(d, "Q", Q, nq); err != nil {
			return err
		}
		if op, err = alloc("out", int64(nq)*8); err != nil {
			return err
		}
		if err = d.launchKNN(sp, ns, qp, nq, len(S), k, op); err != nil {
			return err
		}
		return download(d, "out", out, op)
	})
	if err != nil {
		return fmt.Errorf("gpukern.KNNWeights: %w", err)
	}
	return nil
}

// launchKNN runs knn_weights on device buffers; owner thread only.
func (d *Device) launchKNN(sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k int, op cu.DevicePtr) error {
	tile := tileFor(dims, ns)
	grid := (nq + knnBlock - 1) / knnBlock
	return d.launch("knn_weights", [3]int{grid, 1, 1}, [3]int{knnBlock, 1, 1}, dims*tile*4,
		sp, int64(ns), qp, int64(nq), int64(dims), int64(k), int64(tile), op)
}
