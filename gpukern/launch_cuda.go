//go:build cuda

package gpukern

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// launch_packed launches f with its parameters packed in one buffer (cuLaunchKernel's `extra`
// form), the layout of the kernel's single by-value struct parameter. The driver copies the
// buffer before it returns.
static CUresult launch_packed(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, CUstream stream, void* buf,
                              size_t size) {
	void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
	                 CU_LAUNCH_PARAM_END};
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, NULL, extra);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// launchStruct launches kernel with one by-value struct parameter: params points to its Go
// mirror (only 8-byte scalars and device pointers, so the bytes are the C struct's; the layout
// tests in abi_test.go hold them to the .cu's static_asserts and to the PTX's parameter size).
// cu v0.9.6 copies 8 bytes per parameter, so this goes to cuLaunchKernel directly. The launch
// goes to stream (cu.Stream{}: the default stream). Inside do only.
func (d *Device) launchStruct(stream cu.Stream, kernel string, grid, block [3]int, shared int, params unsafe.Pointer, size uintptr) error {
	return d.timed(stream, kernel, grid, block, shared, func(fn cu.Function) error {
		// cu.Function and cu.Stream are structs holding the driver's handle and nothing else.
		f := *(*C.CUfunction)(unsafe.Pointer(&fn))
		st := *(*C.CUstream)(unsafe.Pointer(&stream))
		r := C.launch_packed(f, C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]), C.uint(block[0]),
			C.uint(block[1]), C.uint(block[2]), C.uint(shared), st, params, C.size_t(size))
		if r == C.CUDA_SUCCESS {
			return nil
		}
		var name *C.char
		if C.cuGetErrorName(r, &name) == C.CUDA_SUCCESS && name != nil {
			return fmt.Errorf("%s (CUresult %d)", C.GoString(name), int(r))
		}
		return fmt.Errorf("CUresult %d", int(r))
	})
}

// launchParams launches kernel with *p, a Go mirror of its parameter struct (kernel_abi.go,
// density_abi.go, hypercube_abi.go), as its one by-value parameter. Inside do only.
func launchParams[P any](d *Device, kernel string, grid, block [3]int, shared int, p *P) error {
	return d.launchStruct(cu.Stream{}, kernel, grid, block, shared, unsafe.Pointer(p), unsafe.Sizeof(*p))
}

// launchParamsOn is launchParams on stream (Score's concurrent steps). Inside do only.
func launchParamsOn[P any](d *Device, stream cu.Stream, kernel string, grid, block [3]int, shared int, p *P) error {
	return d.launchStruct(stream, kernel, grid, block, shared, unsafe.Pointer(p), unsafe.Sizeof(*p))
}
