//go:build !amd64

package prefetch

import "unsafe"

// lines is a no-op where no assembly exists: prefetching is a hint.
func lines(p unsafe.Pointer, n uintptr) {}

func linesW(p unsafe.Pointer, n uintptr) {}
