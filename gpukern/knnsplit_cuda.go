//go:build cuda

package gpukern

import (
	"fmt"

	"gorgonia.org/cu"
)

// knnSplitDims are knnsplit.cu's compile-time dimension counts (data of fewer is zero-padded to
// the next; more than the last is not split).
var knnSplitDims = []int{2, 3, 4, 6, 8, 10, 12, 16}

// knnSplitBlock is knn_split's and knn_merge's block: 8 warps, 16 queries per knn_split block
// (two per warp), 8 per knn_merge block (one per warp).
const knnSplitBlock = 256

// knnSplitKernelNames lists knnsplit.cu's kernels, for the module table.
func knnSplitKernelNames() []string {
	var names []string
	for _, q := range []int{64, 256} {
		for _, D := range knnSplitDims {
			names = append(names, fmt.Sprintf("knn_split_q%d_d%d", q, D))
		}
		names = append(names, fmt.Sprintf("knn_merge_q%d", q))
	}
	return names
}

// knnSlices is how many slices of S a batch of nq queries is split into (1: none, knn.cu's
// kernel): enough blocks for about four per SM, each slice at least max(256, 4k) points (a short
// slice's k-list costs more to write and merge than its points save). Large batches fill the
// device without splitting.
func (d *Device) knnSlices(nq, ns, dims, k int) int {
	if dims > knnSplitDims[len(knnSplitDims)-1] {
		return 1
	}
	qBlocks := (nq + 15) / 16
	want := (4*d.smCount + qBlocks - 1) / qBlocks
	p := min(want, ns/max(256, 4*k), 64)
	if p < 2 {
		return 1
	}
	return p
}

// launchKNNSplit runs knn_split over `slices` slices of S, its lists in scratch slot partial, then
// knn_merge into op, both on stream. Inside do only.
func (d *Device) launchKNNSplit(stream cu.Stream, sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k, slices int, partial scratchSlot, op cu.DevicePtr) error {
	pp, err := d.scratch(partial, "k-NN slice lists", int64(nq)*int64(slices)*int64(k)*4)
	if err != nil {
		return err
	}
	q := 64
	if k > 64 {
		q = 256
	}
	D := knnSplitDims[len(knnSplitDims)-1]
	for _, c := range knnSplitDims {
		if dims <= c {
			D = c
			break
		}
	}
	tile := min(2048, (12288/D)/32*32) // knnsplit.cu's KNS_TILE(D)
	slice := (ns + slices - 1) / slices
	split := knnSplitParams{S: uint64(sp), Ns: int64(ns), Q: uint64(qp), Nq: int64(nq), D: int64(dims), K: int64(k),
		Slices: int64(slices), Slice: int64(slice), Partial: uint64(pp)}
	if err := launchParamsOn(d, stream, fmt.Sprintf("knn_split_q%d_d%d", q, D), [3]int{(nq + 15) / 16, slices, 1},
		[3]int{knnSplitBlock, 1, 1}, D*tile*4, &split); err != nil {
		return err
	}
	merge := knnMergeParams{Partial: uint64(pp), Nq: int64(nq), K: int64(k), Slices: int64(slices), Out: uint64(op)}
	return launchParamsOn(d, stream, fmt.Sprintf("knn_merge_q%d", q), [3]int{(nq + 7) / 8, 1, 1}, [3]int{knnSplitBlock, 1, 1}, 0, &merge)
}
