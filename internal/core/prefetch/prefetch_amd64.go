package prefetch

import "unsafe"

// lines issues PREFETCHT0 for every cache line of [p, p+n), n > 0.
//
//go:noescape
func lines(p unsafe.Pointer, n uintptr)

// linesW is lines for lines about to be written (PREFETCHW).
//
//go:noescape
func linesW(p unsafe.Pointer, n uintptr)
