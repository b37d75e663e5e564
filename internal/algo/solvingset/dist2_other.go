//go:build !amd64

package solvingset

// distMask2 is distMask2Go where no assembly version exists.
func distMask2(x0, x1, dst, t2 []float32, p0, p1 float32) uint64 {
	return distMask2Go(x0, x1, dst, t2, p0, p1)
}
