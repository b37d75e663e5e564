//go:build cuda

package gpukern

import "unsafe"

func unsafePtr(s []float32) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
