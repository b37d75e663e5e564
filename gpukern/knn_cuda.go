//go:build cuda

package gpukern

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

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
			return fmt.Sprintf("knn_weights_q%d_d%d", q, D), D, min(knnTileMax, (knnTileBytes/4/D)/32*32)
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

// launchKNN runs knn_weights on device buffers; inside do only. With self, Q is S and query i
// skips point i. The grid is at most one resident wave (the blocks run over the queries), so a
// block loads a single-tile S once for all its queries.
func (d *Device) launchKNN(sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k int, self bool, op cu.DevicePtr) error {
	return d.launchKNNOn(cu.Stream{}, sp, ns, qp, nq, dims, k, self, op)
}

// launchKNNOn is launchKNN on stream (Score's concurrent steps). Inside do only.
func (d *Device) launchKNNOn(stream cu.Stream, sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k int, self bool, op cu.DevicePtr) error {
	name, rows, tile := knnKernel(k, dims, ns)
	shared := rows * tile * 4
	if k <= 64 { // the 64-slot kernels' candidate lists
		shared += knnBlock / 32 * knnQueriesPerWarp * knnList * 2
	}
	if err := allowShared(d, name, shared); err != nil {
		return err
	}
	perSM, err := d.fns[name].MaxActiveBlocksPerMultiProcessor(knnBlock, int64(shared))
	if err != nil {
		return fmt.Errorf("kernel %s: cuOccupancyMaxActiveBlocksPerMultiprocessor: %w", name, err)
	}
	perBlock := knnBlock / 32 * knnQueriesPerWarp // queries
	grid := min((nq+perBlock-1)/perBlock, max(perSM, 1)*d.smCount)
	var selfArg int64
	if self {
		selfArg = 1
	}
	return launchParamsOn(d, stream, name, [3]int{grid, 1, 1}, [3]int{knnBlock, 1, 1}, shared, &knnParams{S: uint64(sp),
		Ns: int64(ns), Q: uint64(qp), Nq: int64(nq), D: int64(dims), K: int64(k), Tile: int64(tile), Self: selfArg,
		Out: uint64(op)})
}

// allowShared raises kernel's dynamic shared-memory limit to bytes when that is past the 48 KiB
// default (cuFuncSetAttribute, MAX_DYNAMIC_SHARED_SIZE_BYTES; the limit is per function and
// cheap to set again). Inside do only.
func allowShared(d *Device, kernel string, bytes int) error {
	if bytes <= 48*1024 {
		return nil
	}
	fn, ok := d.fns[kernel]
	if !ok {
		return fmt.Errorf("kernel %s: not loaded", kernel)
	}
	// cu.Function is a struct holding the CUfunction handle and nothing else (launch_cuda.go).
	f := *(*C.CUfunction)(unsafe.Pointer(&fn))
	if r := C.cuFuncSetAttribute(f, C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("kernel %s: cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %d): CUresult %d", kernel, bytes, int(r))
	}
	return nil
}
