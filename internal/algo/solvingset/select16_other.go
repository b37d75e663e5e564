//go:build !amd64

package solvingset

// smallest16AVX512 is smallest16Go where no assembly exists (hasAVX512 is false there: never
// called but by the tests).
func smallest16AVX512(a []uint32, out *[16]uint32, _ *bitonicTables) { smallest16Go(a, out) }
