//go:build cuda

package gpukern

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// stageHalf is the size of each half of a device's pinned staging buffer.
const stageHalf = 4 << 20

// stage is a device's pinned host buffer for large uploads, in two halves: while the DMA engine
// copies one half to the device (asynchronously: from pinned memory it does not wait for the
// host), the host fills the other. From pageable memory every cuMemcpyHtoD stages through the
// driver's own buffer and returns only when the copy is done, so the host copy and the bus
// transfer take turns.
type stage struct {
	buf  unsafe.Pointer // 2*stageHalf bytes, cuMemAllocHost
	ev   [2]cu.Event    // the last copy out of each half
	used [2]bool
}

// copyStaged copies n bytes from host memory src to dst through the staging buffer (allocated
// at the first call). It returns once src has been read; the last transfers may still run, ahead
// of any later work on the default stream. Owner thread only.
func (d *Device) copyStaged(dst cu.DevicePtr, src unsafe.Pointer, n int64) error {
	s := d.stg
	if s == nil {
		var p unsafe.Pointer
		if r := C.cuMemAllocHost(&p, C.size_t(2*stageHalf)); r != C.CUDA_SUCCESS {
			return fmt.Errorf("cuMemAllocHost(%d B): CUresult %d", 2*stageHalf, int(r))
		}
		s = &stage{buf: p}
		for i := range s.ev {
			ev, err := cu.MakeEvent(cu.DisableTiming)
			if err != nil {
				return errors.Join(fmt.Errorf("cuEventCreate: %w", err), s.free())
			}
			s.ev[i] = ev
		}
		d.stg = s
	}
	h := 0
	for off := int64(0); off < n; off += stageHalf {
		c := min(int64(stageHalf), n-off)
		if s.used[h] {
			if err := s.ev[h].Synchronize(); err != nil {
				return fmt.Errorf("cuEventSynchronize(staging): %w", err)
			}
		}
		half := unsafe.Add(s.buf, h*stageHalf)
		copy(unsafe.Slice((*byte)(half), c), unsafe.Slice((*byte)(unsafe.Add(src, off)), c))
		if err := cu.MemcpyHtoDAsync(dst+cu.DevicePtr(off), half, c, cu.Stream{}); err != nil {
			return fmt.Errorf("cuMemcpyHtoDAsync(%d B staged): %w", c, err)
		}
		if err := s.ev[h].Record(cu.Stream{}); err != nil {
			return fmt.Errorf("cuEventRecord(staging): %w", err)
		}
		s.used[h] = true
		h ^= 1
	}
	return nil
}

// free releases the staging buffer and its events (teardown). Owner thread only.
func (s *stage) free() error {
	if s == nil {
		return nil
	}
	var errs []error
	for i := range s.ev {
		var zero cu.Event
		if s.ev[i] != zero {
			if err := cu.DestroyEvent(&s.ev[i]); err != nil {
				errs = append(errs, fmt.Errorf("cuEventDestroy(staging): %w", err))
			}
		}
	}
	if r := C.cuMemFreeHost(s.buf); r != C.CUDA_SUCCESS {
		errs = append(errs, fmt.Errorf("cuMemFreeHost(staging): CUresult %d", int(r)))
	}
	return errors.Join(errs...)
}
