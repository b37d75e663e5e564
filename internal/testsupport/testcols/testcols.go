// Package testcols generates feature columns (column-major [][]float32, one slice per
// dimension) for the tests of the algorithms and their kernels. It is apart from testsupport so
// that those tests do not link the Kafka clients.
package testcols

import "math/rand/v2"

// Uniform returns d columns of n values uniform in [0, 1).
func Uniform(r *rand.Rand, n, d int) [][]float32 {
	cols := make([][]float32, d)
	for j := range cols {
		cols[j] = make([]float32, n)
		for i := range cols[j] {
			cols[j][i] = r.Float32()
		}
	}
	return cols
}

// Blobs returns d columns of n values: k Gaussian clusters (sd 0.04) around centres uniform in
// [0, 1), plus 2% uniform noise: dense neighbourhoods and empty ones in the same set.
func Blobs(r *rand.Rand, n, d, k int) [][]float32 {
	centres := Uniform(r, k, d)
	cols := make([][]float32, d)
	for j := range cols {
		cols[j] = make([]float32, n)
	}
	for i := range n {
		c := r.IntN(k)
		noise := r.IntN(50) == 0
		for j := range d {
			if noise {
				cols[j][i] = r.Float32()
			} else {
				cols[j][i] = centres[j][c] + float32(0.04*r.NormFloat64())
			}
		}
	}
	return cols
}
