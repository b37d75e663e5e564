//go:build cuda

package gpukern

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The streaming calls (run: a batch of records scored against a model that stays on the
// device) call the GPU once per batch, thousands of times a second. What a call costs besides
// its kernels is fixed per call: each cuMemAlloc and cuMemFree tens of microseconds (cuMemFree
// also waits for the device), each cuMemcpy from pageable memory several microseconds whatever
// its size at a batch's few kilobytes (issue 12 item 5: 1.6 ms of owner-thread time per
// 1000-record batch at W = 1M, with S uploaded every batch). So those calls keep their device
// buffers between calls (scratch slots, grow-only) and gather their inputs into one host staging
// buffer for a single copy (a pack), and their outputs into one device buffer for a single copy
// back.

// scratchSlot names a device buffer kept between calls. The streaming calls (run) are serialised
// by do and have finished with their slots when they return, so they share the
// slots; within one call each concurrent k-NN step has a slot of its own for its slices' lists.
type scratchSlot int

const (
	scratchIn      scratchSlot = iota // every step's inputs
	scratchOut                        // every step's results
	scratchPartial                    // the k-NN slices' lists (knnsplit.cu), one slot per step from here
	nScratch       = scratchPartial + MaxScoreSteps
)

// scratchBuffer is one kept device buffer.
type scratchBuffer struct {
	ptr   cu.DevicePtr
	bytes int64
}

// scratch returns slot s's device buffer of at least bytes, growing it (to the next power of
// two, so a stream of slightly growing batches does not reallocate each time). Inside do only.
func (d *Device) scratch(s scratchSlot, what string, bytes int64) (cu.DevicePtr, error) {
	b := &d.scratchBufs[s]
	if b.ptr != 0 && b.bytes >= bytes {
		return b.ptr, nil
	}
	size := int64(256)
	for size < bytes {
		size <<= 1
	}
	if b.ptr != 0 {
		if err := frees(b.ptr); err != nil {
			return 0, err
		}
		*b = scratchBuffer{}
	}
	p, err := alloc(what, size)
	if err != nil {
		return 0, err
	}
	*b = scratchBuffer{ptr: p, bytes: size}
	return p, nil
}

// freeScratch frees every kept buffer (teardown; the context's destruction would too, but a
// device closed with its buffers freed reports a fault here rather than never). Inside do only.
func (d *Device) freeScratch() error {
	var ps []cu.DevicePtr
	for i := range d.scratchBufs {
		ps = append(ps, d.scratchBufs[i].ptr)
		d.scratchBufs[i] = scratchBuffer{}
	}
	return frees(ps...)
}

// upload copies the pack into scratch slot s (one copy) and returns the slot's device address,
// to which add's offsets are relative. Inside do only.
func (p *pack) upload(d *Device, s scratchSlot, what string) (cu.DevicePtr, error) {
	base, err := d.scratch(s, what, int64(len(p.buf)))
	if err != nil {
		return 0, err
	}
	if len(p.buf) == 0 {
		return base, nil
	}
	if err := cu.MemcpyHtoD(base, unsafe.Pointer(&p.buf[0]), int64(len(p.buf))); err != nil {
		return 0, fmt.Errorf("cuMemcpyHtoD(%s, %d B packed): %w", what, len(p.buf), err)
	}
	d.toDevice.Add(int64(len(p.buf)))
	return base, nil
}

// launchKNNAny runs the k-NN weights of nq queries against S on stream: split into slices of S
// (knnsplit.cu, lists in scratch slot partial) when the batch alone would leave most of the device
// idle, else knn.cu's kernel. The same weights either way. Inside do only.
func (d *Device) launchKNNAny(stream cu.Stream, sp cu.DevicePtr, ns int, qp cu.DevicePtr, nq, dims, k int, partial scratchSlot, op cu.DevicePtr) error {
	if slices := d.knnSlices(nq, ns, dims, k); slices > 1 {
		return d.launchKNNSplit(stream, sp, ns, qp, nq, dims, k, slices, partial, op)
	}
	return d.launchKNNOn(stream, sp, ns, qp, nq, dims, k, false, op)
}
