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
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// stageHalf is the size of each half of a device's page-locked staging buffer.
const stageHalf = 16 << 20

// stagedUploadMin is the size from which uploadCols copies a column through the staging buffer
// (the windows of the solving set's builds, 10M x 10 a node's 100 MB at 4 GPUs); smaller
// columns go straight from pageable memory (no gain at 1M x 10's 4 MB columns, BENCHMARKS
// §4.3.2.1). A variable so that the benchmarks compare both paths in one run.
var stagedUploadMin int64 = 8 << 20

// stageCopiers is the goroutines that fill one half of the staging buffer: one memmove moves
// about 8 GB/s of host memory, below the bus's; 10M x 10 to one H200 took 64.7 ms pageable, 51.8
// staged with one copier, 27.0 with 4 and 19.5 with 8 (BENCHMARKS §4.3.3).
var stageCopiers = min(8, runtime.GOMAXPROCS(0))

// stage is a device's page-locked host buffer for large uploads, in two halves: while the DMA
// engine copies one half to the device (asynchronously: from page-locked memory it does not
// wait for the host), the host fills the other. From pageable memory every cuMemcpyHtoD stages
// through the driver's own buffer, on the calling thread, and returns only when the copy is
// done, so the host copy and the bus transfer take turns.
type stage struct {
	buf  unsafe.Pointer // 2*stageHalf bytes, cuMemAllocHost
	ev   [2]cu.Event    // the last copy out of each half
	used [2]bool
	// next is the half the next chunk goes through, kept across calls: a column of one chunk
	// (10M x 10 at 4 GPUs: 10 MB) starting on half 0 every time would wait for the previous
	// column's copy out of it, with half 1 idle, and fill and copy would take turns.
	next int
}

// errNoStage: the staging buffer could not be made (page-locked memory refused); copyStaged
// issued no copy, and uploadCols copies the column from pageable memory instead.
var errNoStage = errors.New("no page-locked staging buffer")

// stageAllocHost allocates the staging buffer (cuMemAllocHost); a variable so that a test can
// refuse it.
var stageAllocHost = func(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.cuMemAllocHost(&p, C.size_t(bytes)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemAllocHost(%d B): CUresult %d", bytes, int(r))
	}
	return p, nil
}

// copyStaged copies n bytes from host memory src to dst through the staging buffer (allocated
// at the first call and kept until Close). It returns once src has been read; the last
// transfers may still run, ahead of any later work on the default stream (and of the step
// streams, which are blocking). Inside do only.
func (d *Device) copyStaged(dst cu.DevicePtr, src unsafe.Pointer, n int64) error {
	s := d.stg
	if s == nil {
		p, err := stageAllocHost(2 * stageHalf)
		if err != nil {
			return fmt.Errorf("%w: %w", errNoStage, err)
		}
		s = &stage{buf: p}
		for i := range s.ev {
			ev, err := cu.MakeEvent(cu.DisableTiming)
			if err != nil {
				return fmt.Errorf("%w: %w", errNoStage, errors.Join(fmt.Errorf("cuEventCreate: %w", err), s.free()))
			}
			s.ev[i] = ev
		}
		d.stg = s
	}
	h := s.next
	for off := int64(0); off < n; off += stageHalf {
		c := min(int64(stageHalf), n-off)
		if s.used[h] {
			if err := s.ev[h].Synchronize(); err != nil {
				return fmt.Errorf("cuEventSynchronize(staging): %w", err)
			}
		}
		half := unsafe.Add(s.buf, h*stageHalf)
		copyParallel(unsafe.Slice((*byte)(half), c), unsafe.Slice((*byte)(unsafe.Add(src, off)), c), stageCopiers)
		if err := cu.MemcpyHtoDAsync(dst+cu.DevicePtr(off), half, c, cu.Stream{}); err != nil {
			return fmt.Errorf("cuMemcpyHtoDAsync(%d B staged): %w", c, err)
		}
		if err := s.ev[h].Record(cu.Stream{}); err != nil {
			// The half's event does not cover this copy: wait for it here, or the next fill of
			// the half could overwrite what the DMA still reads.
			return errors.Join(fmt.Errorf("cuEventRecord(staging): %w", err), cu.Synchronize())
		}
		s.used[h] = true
		h ^= 1
		s.next = h
	}
	return nil
}

// copyParallel is copy(dst, src) in parts, one goroutine each (the first on the caller's).
func copyParallel(dst, src []byte, parts int) {
	n := len(src)
	if parts <= 1 || n < 1<<20 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	copy(dst[:n/parts], src[:n/parts])
	wg.Wait()
}

// free releases the staging buffer and its events (teardown), after the last copies out of it:
// copyStaged returns before them, and a DMA must not read pages no longer page-locked (the
// driver documents no wait in cuMemFreeHost). Inside do only.
func (s *stage) free() error {
	if s == nil {
		return nil
	}
	var errs []error
	for i := range s.ev {
		if s.used[i] {
			if err := s.ev[i].Synchronize(); err != nil {
				errs = append(errs, fmt.Errorf("cuEventSynchronize(staging): %w", err))
			}
		}
	}
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

// lockedBuf is a page-locked host buffer kept by its device for reuse (a distributed node's
// hand-in and hand-out): cuMemAllocHost and cuMemFreeHost pin and unpin pages, milliseconds
// each, which every distributed build paid once per node (BENCHMARKS §4.3.4).
type lockedBuf struct {
	p     unsafe.Pointer
	bytes int64
}

// takeLocked returns a page-locked buffer of at least bytes, one given back before where one is
// large enough, else a new one (stageAllocHost: errNoStage-like refusals come back as errors).
// Inside do only.
func (d *Device) takeLocked(bytes int64) (lockedBuf, error) {
	for i, b := range d.lockedFree {
		if b.bytes >= bytes {
			d.lockedFree = append(d.lockedFree[:i], d.lockedFree[i+1:]...)
			return b, nil
		}
	}
	p, err := stageAllocHost(bytes)
	if err != nil {
		return lockedBuf{}, err
	}
	return lockedBuf{p: p, bytes: bytes}, nil
}

// putLocked gives b back for reuse: the device's work that reads or writes it must be over.
// Inside do only.
func (d *Device) putLocked(b lockedBuf) {
	if b.p != nil {
		d.lockedFree = append(d.lockedFree, b)
	}
}

// freeLocked frees the buffers given back (teardown). Inside do only.
func (d *Device) freeLocked() error {
	var errs []error
	for _, b := range d.lockedFree {
		if r := C.cuMemFreeHost(b.p); r != C.CUDA_SUCCESS {
			errs = append(errs, fmt.Errorf("cuMemFreeHost(%d B): CUresult %d", b.bytes, int(r)))
		}
	}
	d.lockedFree = nil
	return errors.Join(errs...)
}
