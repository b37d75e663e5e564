package solvingset

import "golang.org/x/sys/cpu"

// sqDistCol adds one dimension to the squared distances of a query coordinate x to the
// reference points' coordinates col, on the bit patterns of the float32 sums (dst[i] =
// Float32bits of the running sum): with add false dst[i] = (x - col[i])^2, else dst[i] +=
// (x - col[i])^2. SSE, four lanes at a time: SUBPS, MULPS and ADDPS round each lane exactly as
// the scalar float32 operations do, so the sums are bit-identical to the pure Go loop
// (sqDistColGo). It handles i < len(col) rounded down to a multiple of 4 and returns that count;
// len(dst) >= len(col).
//
//go:noescape
func sqDistCol(dst []uint32, col []float32, x float32, add bool) int

// sqDistBlockAVX2 writes the squared distances (Float32bits) of the query q (one coordinate
// per dimension) to the reference points R (column-major) for the points i < len(dst) rounded
// down to a multiple of 32, and returns that count: the sum over the dimensions in order,
// from +0, of (q[j] - R[j][i])^2, each operation rounded to float32 as the scalar code does
// (VSUBPS, VMULPS, VADDPS; no FMA), so bit-identical to sqDistColGo dimension after dimension.
// Every R[j] must hold at least len(dst) points and len(q) == len(R); AVX2 only (hasAVX2).
//
//go:noescape
func sqDistBlockAVX2(dst []uint32, R [][]float32, q []float32) int

// sqDistBlockAVX512 is sqDistBlockAVX2 with 16 lanes: blocks of 64 points, then of 16, for
// the points below len(dst) rounded down to a multiple of 16 (the count it returns). The same
// rounding per operation, so the same bits. AVX-512F only (hasAVX512).
//
//go:noescape
func sqDistBlockAVX512(dst []uint32, R [][]float32, q []float32) int

// hasAVX2 and hasAVX512 select the kernels (variables so that the tests also run the narrower
// paths on a CPU that has the wider).
var (
	hasAVX2   = cpu.X86.HasAVX2
	hasAVX512 = cpu.X86.HasAVX512F
)

// sqDistsBlock writes the squared distances of the query q to the first points of R with
// sqDistBlockAVX512 or sqDistBlockAVX2 where the CPU has them, and returns how many it wrote
// (0 without either). AVX-512 measured 1.2x faster per 2048-point query than AVX2 on the dev
// machine's Xeon (BenchmarkKNNSelectDrain, 2026-11-23).
func sqDistsBlock(dst []uint32, R [][]float32, q []float32) int {
	if !hasAVX2 && !hasAVX512 {
		return 0
	}
	for _, c := range R {
		_ = c[:len(dst)] // the kernels read len(dst) points of every column
	}
	if hasAVX512 {
		return sqDistBlockAVX512(dst, R, q)
	}
	return sqDistBlockAVX2(dst, R, q)
}

// packLEAVX2 copies the values v <= t of src (non-negative float bit patterns) to dst in order,
// for the indices below len(src) rounded down to a multiple of 8, and returns how many it
// copied; len(dst) >= len(src); AVX2 and POPCNT only. perm is packPerm.
//
//go:noescape
func packLEAVX2(dst, src []uint32, t uint32, perm *[256][8]uint32) int

// packPerm[mask] lists the lanes whose bit is set in mask first (ascending), then the others:
// the permutation that left-packs eight lanes.
var packPerm = func() *[256][8]uint32 {
	var p [256][8]uint32
	for m := range p {
		n := 0
		for l := range 8 {
			if m>>l&1 == 1 {
				p[m][n] = uint32(l)
				n++
			}
		}
		for l := range 8 {
			if m>>l&1 == 0 {
				p[m][n] = uint32(l)
				n++
			}
		}
	}
	return &p
}()

// partitionAVX2 copies the values v <= t of src (non-negative float bit patterns) to le and the
// others to gt, each in order, for the indices below len(src) rounded down to a multiple of 8,
// and returns how many went to le; len(le), len(gt) >= len(src); AVX2 and POPCNT only. perm is
// packPerm.
//
//go:noescape
func partitionAVX2(le, gt, src []uint32, t uint32, perm *[256][8]uint32) int

// partition copies the values v <= t of src (non-negative float bit patterns) to le and the
// others to gt (len(le), len(gt) >= len(src)), each in order, and returns how many went to le:
// eight at a time with AVX2 where the CPU has it.
func partition(le, gt, src []uint32, t uint32) int {
	n, i := 0, 0
	if hasAVX2 && cpu.X86.HasPOPCNT {
		le, gt = le[:len(src)], gt[:len(src)]
		n = partitionAVX2(le, gt, src, t, packPerm)
		i = len(src) &^ 7
	}
	return partitionGo(le, gt, src, t, i, n)
}

// packLE copies the values v <= t of src (non-negative float bit patterns) to dst (len(dst) >=
// len(src)) in order and returns how many: eight at a time with AVX2 where the CPU has it.
func packLE(dst, src []uint32, t uint32) int {
	n, i := 0, 0
	if hasAVX2 && cpu.X86.HasPOPCNT {
		dst = dst[:len(src)]
		n = packLEAVX2(dst, src, t, packPerm)
		i = len(src) &^ 7
	}
	return packLEGo(dst, src, t, i, n)
}
