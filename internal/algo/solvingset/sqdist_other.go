//go:build !amd64

package solvingset

// sqDistCol is sqDistColGo where no assembly version exists: it handles every i.
func sqDistCol(dst []uint32, col []float32, x float32, add bool) int {
	sqDistColGo(dst, col, x, add, 0)
	return len(col)
}

// hasAVX2 and hasAVX512 are false where no such kernel exists (the tests set them on amd64 only).
var hasAVX2, hasAVX512 = false, false

// sqDistsBlock handles no point here: sqDistCol does them all.
func sqDistsBlock(dst []uint32, R [][]float32, q []float32) int { return 0 }

// packLE copies the values v <= t of src to dst (len(dst) >= len(src)) in order and returns
// how many.
func packLE(dst, src []uint32, t uint32) int { return packLEGo(dst, src, t, 0, 0) }

// partition copies the values v <= t of src to le and the others to gt (len(le), len(gt) >=
// len(src)), each in order, and returns how many went to le.
func partition(le, gt, src []uint32, t uint32) int { return partitionGo(le, gt, src, t, 0, 0) }
