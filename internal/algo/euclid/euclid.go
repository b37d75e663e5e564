// Package euclid is the float32 squared Euclidean distance that the CPU twins of the distance
// kernels compute (PROCLUS's localities and assignments, the solving set's candidate distances):
// one function, so that the twins cannot drift apart from each other while their kernels
// (gpukern's proclus.cu, solvingset.cu, tile.cuh) keep one operation order.
package euclid

// Squared is the squared Euclidean distance between row i of the column-major cols and the point
// c (len(c) == len(cols)), in float32: per dimension in index order t = x_j - c_j,
// acc = acc + t*t, each operation rounded to float32 (the explicit conversion forbids a fused
// multiply-add; the kernels use __fsub_rn, __fmul_rn, __fadd_rn). microcluster.SquaredDistance
// is the same sequence over a row held contiguously.
func Squared(cols [][]float32, i int, c []float32) float32 {
	var acc float32
	for j, col := range cols {
		t := col[i] - c[j]
		acc += float32(t * t)
	}
	return acc
}
