package prefetch

import "unsafe"

// lines issues PREFETCHT0 for every cache line of [p, p+n), n > 0.
//
//go:noescape
func lines(p unsafe.Pointer, n uintptr)
