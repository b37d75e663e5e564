package solvingset

// smallest16AVX512 writes the 16 smallest values of a (len(a) a positive multiple of 16) into
// out, ascending: a bitonic sort of each 16 values, merged into the smallest so far (VPERMD,
// VPMINUD, VPMAXUD, VPBLENDMD). AVX-512F only (hasAVX512); tabs is bitonic.
//
//go:noescape
func smallest16AVX512(a []uint32, out *[16]uint32, tabs *bitonicTables)
