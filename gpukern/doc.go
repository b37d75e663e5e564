// Package gpukern holds the CUDA kernels of outlierd and their Go launchers: batch k-NN weights
// for solving-set prediction (KNNWeights) and every row's exact weight (Weights), the
// micro-clustering passes (Assign, Reduce, Cluster), SolvingSet and the nodes of the distributed
// solving set (DistributedNode), density sampling (DetectRecords, DetectClusters: every mode,
// sampled or exact 1-D), the hypercube density of GDBOD (HypercubeEncode, HypercubeDensity: key
// encoding and the LTR tree search) and the O(rows) passes of GPU-FAST-PROCLUS (ProclusData).
// k smallest distances are selected by warps in registers
// (select.cuh, the one selection header, which also holds SolvingSet's neighbour heap), shared by
// the k-NN kernels and SolvingSet's CandNN. Each GPU function has a CPU twin of the same name
// (internal/algo/solvingset, microcluster, density, hypercube, proclus) and a parity test against
// it. Device.Counters keeps running totals of kernel time and bytes copied each way, for the
// pipeline's metrics.
//
// Callers: gpukern is a leaf: it imports no outlierd package, and its API is slices, numbers and
// its own parameter and result types. internal/accel is the one place that chooses CPU or GPU,
// falls back to the CPU twin after a device failure, and turns the algorithms' types into these
// calls; what the CPU twin's arithmetic fixes is passed in (Reduce's chunkRows, SolvingSetParams'
// First, Margin and Out; the density model's DensityTables: the exact regions and the bounds
// table), and the host steps of the hypercube density (grid, sort, tree, scores) and PROCLUS's
// control flow (proclus.Engine over ProclusData) run there. The parity tests (package
// gpukern_test) compare against the CPU twins through internal/accel's converters.
//
// Kernel ABI: every kernel takes one struct passed by value, launched with launchParams
// (cuLaunchKernel's packed buffer; gorgonia.org/cu's Launch copies 8 bytes per parameter and is
// not used for kernels). The Go mirrors (kernel_abi.go, density_abi.go, hypercube_abi.go) have
// only 8-byte fields; TestKernelABI, TestDensityABI and TestHypercubeABI hold them to the .cu's
// static_asserts and to the parameter size of every entry of the committed PTX, without a GPU.
// Through a struct nvcc drops the read-only path (ld.global.nc) that __restrict__ parameters
// give, so the kernels hand the members to inlined bodies and read inputs through __ldg where
// that keeps the code as it was (each .cu says where it does not, and why).
//
// Build: the kernels need `-tags cuda` and the CUDA driver headers and link stub (.ci/cuda.sh
// fetches them). Without the tag the package keeps the same exported API: Available reports
// "built without CUDA", Open and every kernel entry return an error wrapping ErrNoDevice, and no
// CUDA header is needed. A binary built with the tag needs the driver's libcuda.so.1 to start, and
// gorgonia.org/cu calls cuInit in its package init and exits the process (status 1) if that fails:
// a cuda-tagged binary therefore runs only where a driver and a GPU are present. outlierd ships
// both builds side by side (bin/outlierd and bin/outlierd-cuda, `make cuda`): the untagged one
// starts anywhere and hands GPU commands over to the tagged one when that starts on the machine
// (cmd/outlierd/companion.go), so `--device auto` works with either.
//
// Density sampling decides almost every sample from the model's density bounds table
// (DensityBounds, the CPU twin's density.Bounds), uploaded with the model; KeepDensityModel
// keeps a model and its table resident between calls (the pipeline keeps the serving model's).
//
// Streaming (a stream's batch of about 1000 records scored against resident models, thousands
// of times a second): KNNWeightsOn scores against points kept on the device (Device.Upload),
// splitting S into slices when the batch alone would leave the device idle (knnsplit.cu: each
// slice's k smallest, then their merge: the same multiset, the same bits); Score runs a batch's
// density test and k-NN steps in one call, each kernel on its own stream, the inputs packed into
// one copy (pack.go) and the results back in one; the device keeps those calls' buffers between
// calls (resident_cuda.go). Device.KernelTimes splits the kernel time by kernel.
//
// Projected clustering (ProclusData; proclus.cu) is GPU-FAST-PROCLUS: the control flow stays on
// the host (internal/algo/proclus, shared with the CPU; internal/accel.GPUProclus), the O(rows)
// passes run here with the FAST distance cache and incremental localities; the sums are int64
// fixed point, so the result equals the CPU's exactly. The restarts share one upload, each
// running on its own run state (ProclusRun) over it, several at once.
//
// Kernels are CUDA C (<name>.cu), compiled to PTX for compute_80 by nvcc 11.8 (PTX ISA 7.8, which
// every driver from CUDA 11.8 on JIT-compiles, sm_90 included); the PTX is committed and embedded.
// Regenerate it with `make -C gpukern ptx` (see gpukern/Makefile) after editing a .cu file.
//
// Threading: a CUDA context is current on an OS thread, so every CUDA call is inside a closure
// that Device.do runs one at a time, in arrival order (a build's next iteration queues behind a
// scoring call), on the caller's goroutine locked to its thread with the context made current
// there (no hand-over to another thread: each cost a thread wake-up). Device
// memory comes from plain cuMemAlloc (never managed memory). Every CUDA error is returned wrapped
// with the kernel and the call that failed; with OUTLIERD_CUDA_SYNC=1 every launch is followed by
// a synchronisation, so an asynchronous fault is reported by the kernel that caused it. Kernel
// time (Counters, KernelTimes) comes from CUDA events around each launch, except that a solving
// set's step is timed as one span (ss_iteration, ss_step); OUTLIERD_CUDA_PER_LAUNCH=1 times its
// kernels one by one.
//
// Layout: column-major float32 everywhere (cols[j][i] = row i in dimension j), the layout of an
// Arrow Float32 column; weights and cluster features are float64.
package gpukern

//go:generate make ptx

import (
	"errors"
	"fmt"
)

// ErrNoDevice is wrapped by every error that means no CUDA device can be used: the package was
// built without the cuda tag, or the device ordinal does not exist.
var ErrNoDevice = errors.New("gpukern: no CUDA device")

// errShape is wrapped by the errors for inconsistent input shapes.
var errShape = errors.New("gpukern: inconsistent shapes")

// KNNMaxK is the largest k that KNNWeights, Weights and SolvingSet accept: the largest warp
// register queue of knn.cu (select.cuh) has this many slots, as has SolvingSet's per-thread heap.
const KNNMaxK = 256

// MaxDims is the largest dimension count of KNNWeights, Assign and Cluster: a tile of 32 points
// of every dimension must fit in the 48 KiB of shared memory a block gets without opting in.
const MaxDims = 384

// ReduceMaxQ is the largest cluster count that Reduce and Cluster accept: each of the 256 threads
// of a cf_reduce_chunk_o4 block owns at most 4 clusters' sums (RED_OWN in microcluster.cu).
const ReduceMaxQ = 1024

// columnsShape checks that cols has at least one dimension and equal-length columns, and returns
// the row count: microcluster.CheckColumns's check, copied since gpukern imports no outlierd
// package.
func columnsShape(what string, cols [][]float32) (int, error) {
	if len(cols) == 0 {
		return 0, fmt.Errorf("%w: %s has no dimensions", errShape, what)
	}
	n := len(cols[0])
	for j, c := range cols {
		if len(c) != n {
			return 0, fmt.Errorf("%w: %s dimension %d has %d rows, dimension 0 has %d", errShape, what, j, len(c), n)
		}
	}
	return n, nil
}

// ClusterFeatures are the micro-cluster tuples (CF1, CF2, EF2, n) of q clusters over d dimensions,
// column-major ([dim][cluster]), field for field microcluster.MicroClusters without the anchors.
type ClusterFeatures struct {
	// CF1[j][c] is the sum of the member means of cluster c in dimension j.
	CF1 [][]float64
	// CF2[j][c] is the sum of the squared member means.
	CF2 [][]float64
	// EF2[j][c] is the sum of the squared member uncertainties (0 for certain data).
	EF2 [][]float64
	// N[c] is the member count of cluster c.
	N []int64
}
