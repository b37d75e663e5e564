//go:build !amd64

package solvingset

// sqDistCol is sqDistColGo where no assembly version exists: it handles every i.
func sqDistCol(dst []uint32, col []float32, x float32, add bool) int {
	sqDistColGo(dst, col, x, add, 0)
	return len(col)
}
