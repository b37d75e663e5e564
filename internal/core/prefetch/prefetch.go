// Package prefetch asks the CPU to bring memory into its caches ahead of use (a hint: it
// changes no result, and an address it cannot reach is ignored, never a fault). Where a loop
// walks records of a million keys, each record's state and model are cache misses that depend
// on one another (a pointer, then the arrays it points to, then a binary search in them); the
// loop asks for the records a few places ahead, stage by stage, so that their misses overlap
// instead of following each other (stages/detect's keyed decisions, docs/BENCHMARKS.md §13.1.4).
package prefetch

import "unsafe"

// Bytes asks for the cache lines of [p, p+n) (a hint: no fault whatever p is).
func Bytes(p unsafe.Pointer, n uintptr) {
	if n > 0 {
		lines(p, n)
	}
}

// Slice asks for the cache lines of s's elements.
func Slice[E any](s []E) {
	if len(s) > 0 {
		var e E
		lines(unsafe.Pointer(unsafe.SliceData(s)), uintptr(len(s))*unsafe.Sizeof(e))
	}
}

// Object asks for the cache lines of *p.
func Object[T any](p *T) {
	if p != nil {
		lines(unsafe.Pointer(p), unsafe.Sizeof(*p))
	}
}

// ForWrite asks for the cache line of *p, about to be written: the line comes in exclusively
// (where the last writer was another core, a read's prefetch leaves the store a second request
// to make).
func ForWrite[T any](p *T) {
	if p != nil {
		linesW(unsafe.Pointer(p), unsafe.Sizeof(*p))
	}
}
