package solvingset

// distMask2 writes the squared 2-D distances of the points (x0[i], x1[i]) to (p0, p1) into dst
// and returns the mask of the i with dst[i] <= t2[i] (bit i). Four lanes at a time with SSE,
// which every amd64 CPU has: SUBPS, MULPS and ADDPS round each lane exactly as the scalar
// float32 operations do, so dst is bit-identical to the pure Go loop (distMask2Go). len(x0) must
// be a multiple of 4 and at most 64; x1, dst and t2 must be at least as long.
//
//go:noescape
func distMask2(x0, x1, dst, t2 []float32, p0, p1 float32) uint64
