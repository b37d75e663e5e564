//go:build cuda

package gpukern

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

//go:embed knn.ptx
var knnPTX string

//go:embed knnsplit.ptx
var knnSplitPTX string

//go:embed microcluster.ptx
var microclusterPTX string

//go:embed solvingset.ptx
var solvingsetPTX string

//go:embed density.ptx
var densityPTX string

//go:embed hypercube.ptx
var hypercubePTX string

//go:embed keyed.ptx
var keyedPTX string

// modules lists the embedded PTX modules and the kernels each one exports.
var modules = []struct {
	name, ptx string
	kernels   []string
}{
	{"knn", knnPTX, knnKernelNames()},
	{"knnsplit", knnSplitPTX, knnSplitKernelNames()},
	{"microcluster", microclusterPTX, []string{"assign_nearest", "cf_sort", "cf_reduce_chunk_o1", "cf_reduce_chunk_o4", "cf_finalize"}},
	{"solvingset", solvingsetPTX, []string{"ss_init", "ss_gather", "ss_ctoc", "ss_dtoc", "ss_candpart_q64", "ss_candpart_q256", "ss_candmerge_q64", "ss_candmerge_q256", "ss_select", "ss_select_merge", "ss_select_tail", "ss_select_sort"}},
	{"density", densityPTX, []string{"density_records", "density_clusters"}},
	{"hypercube", hypercubePTX, []string{"hc_encode", "hc_density"}},
	{"keyed", keyedPTX, []string{"keyed_score_q32", "keyed_score_q64", "keyed_self_q32", "keyed_self_q64", "keyed_install"}},
}

// Available reports whether a CUDA device can be used and, if not, why.
func Available() (bool, string) {
	n, err := cu.NumDevices()
	if err != nil {
		return false, fmt.Sprintf("cuDeviceGetCount: %v", err)
	}
	if n == 0 {
		return false, "no CUDA device"
	}
	return true, fmt.Sprintf("%d CUDA device(s), driver %d", n, cu.Version())
}

// Device is one CUDA device with its own context. Every CUDA call runs inside do, one closure at a
// time (mu), on the calling goroutine's thread with the context made current there: a closure
// handed to an owner goroutine instead cost two thread wake-ups a call (50-90 µs an iteration of
// the distributed solving set on an idle 64-core host, BENCHMARKS §4.3.1). Methods and kernel
// entries are safe for concurrent use. Close releases the context and all its memory.
type Device struct {
	ordinal  int
	name     string
	smCount  int
	syncEach bool // OUTLIERD_CUDA_SYNC=1: synchronise after every launch
	// perLaunch (OUTLIERD_CUDA_PER_LAUNCH=1, or with syncEach): spanned launches keep an event
	// pair each, for a kernel-by-kernel breakdown (KernelTimes) of the solving set's steps.
	perLaunch bool
	// span: the closure running times its launches as one (spanned) instead of an
	// event pair each. Under mu.
	span bool

	// mu serialises do and Close, first come first served (devLock); closed and closeErr are
	// Close's, under mu.
	mu       devLock
	closed   bool
	closeErr error

	// Running totals for Counters: kernel time in nanoseconds (CUDA events around every
	// launch), bytes copied host -> device and device -> host.
	kernelNS, toDevice, toHost atomic.Int64
	// byKernel is the kernel time per kernel name (KernelTimes), under byKernelMu.
	byKernelMu sync.Mutex
	byKernel   map[string]KernelTotal

	// Under mu (inside do).
	ctx  cu.CUContext
	mods []cu.Module
	fns  map[string]cu.Function
	// pending are the event pairs of the launches of the closure now running, read after it
	// returns; spare are event pairs kept for reuse (creating events costs a driver call).
	pending []launchEvents
	spare   [][2]cu.Event
	// dens are the density models kept resident (KeepDensityModel).
	dens map[*DensityModel]*densityBuffers
	// scratchBufs are the device buffers the streaming calls keep between calls (resident_cuda.go);
	// packBuf is the host staging buffer of every packed upload (pack.go).
	scratchBufs [nScratch]scratchBuffer
	packBuf     []byte
	// stepStreams are Score's streams, one per concurrent step (blocking streams: they wait for
	// the default stream's copies before them, and the copies after wait for them).
	stepStreams [MaxScoreSteps]cu.Stream
	// stg is the page-locked staging buffer of large uploads (stage_cuda.go), nil until the
	// first; lockedFree the page-locked buffers given back for reuse (takeLocked).
	stg        *stage
	lockedFree []lockedBuf
}

// maxSpareEvents bounds the event pairs kept for reuse.
const maxSpareEvents = 256

// Open creates a context on device ordinal and loads the kernels. The error wraps ErrNoDevice when
// the ordinal does not exist.
func Open(ordinal int) (*Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpukern.Open: cuDeviceGetCount: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("gpukern.Open: device %d of %d: %w", ordinal, n, ErrNoDevice)
	}
	d := &Device{
		ordinal:   ordinal,
		syncEach:  os.Getenv("OUTLIERD_CUDA_SYNC") == "1",
		perLaunch: os.Getenv("OUTLIERD_CUDA_PER_LAUNCH") == "1",
		fns:       map[string]cu.Function{},
		dens:      map[*DensityModel]*densityBuffers{},
	}
	// cuCtxCreate makes the context current on this thread: keep the goroutine on it until the
	// context is made (and, on an error, destroyed).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.init(); err != nil {
		d.teardown()
		return nil, fmt.Errorf("gpukern.Open: device %d: %w", ordinal, err)
	}
	// Current on no thread between closures (do pushes it): a thread must never hold a context
	// that Close destroys.
	if _, err := cu.PopCurrentCtx(); err != nil {
		d.teardown()
		return nil, fmt.Errorf("gpukern.Open: device %d: cuCtxPopCurrent: %w", ordinal, err)
	}
	return d, nil
}

func (d *Device) init() error {
	dev, err := cu.GetDevice(d.ordinal)
	if err != nil {
		return fmt.Errorf("cuDeviceGet: %w", err)
	}
	if d.name, err = dev.Name(); err != nil {
		return fmt.Errorf("cuDeviceGetName: %w", err)
	}
	if d.smCount, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return fmt.Errorf("cuDeviceGetAttribute(multiprocessors): %w", err)
	}
	// MakeContext returns an error (NewContext would panic); cuCtxCreate makes it current here.
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("cuCtxCreate: %w", err)
	}
	for i := range d.stepStreams {
		if d.stepStreams[i], err = cu.MakeStream(cu.DefaultStream); err != nil {
			return fmt.Errorf("cuStreamCreate: %w", err)
		}
	}
	for _, m := range modules {
		mod, err := cu.LoadData(m.ptx)
		if err != nil {
			return fmt.Errorf("cuModuleLoadData(%s.ptx): %w", m.name, err)
		}
		d.mods = append(d.mods, mod)
		for _, k := range m.kernels {
			fn, err := mod.Function(k)
			if err != nil {
				return fmt.Errorf("cuModuleGetFunction(%s): %w", k, err)
			}
			d.fns[k] = fn
		}
	}
	return nil
}

// teardown unloads the modules and destroys the context (freeing its memory); inside do only.
func (d *Device) teardown() error {
	var errs []error
	for _, m := range d.mods {
		if err := m.Unload(); err != nil {
			errs = append(errs, fmt.Errorf("cuModuleUnload: %w", err))
		}
	}
	d.mods = nil
	if err := d.stg.free(); err != nil {
		errs = append(errs, err)
	}
	d.stg = nil
	if err := d.freeLocked(); err != nil {
		errs = append(errs, err)
	}
	if err := d.freeScratch(); err != nil {
		errs = append(errs, err)
	}
	for i := range d.stepStreams {
		if d.stepStreams[i] != (cu.Stream{}) {
			if err := d.stepStreams[i].Destroy(); err != nil {
				errs = append(errs, fmt.Errorf("cuStreamDestroy: %w", err))
			}
		}
	}
	for _, le := range d.pending {
		d.spare = append(d.spare, le.ev)
	}
	for _, ev := range d.spare {
		for i := range ev {
			if err := cu.DestroyEvent(&ev[i]); err != nil {
				errs = append(errs, fmt.Errorf("cuEventDestroy: %w", err))
			}
		}
	}
	d.pending, d.spare = nil, nil
	var zero cu.CUContext
	if d.ctx != zero {
		if err := d.ctx.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("cuCtxDestroy: %w", err))
		}
	}
	return errors.Join(errs...)
}

// do runs fn with the device's context current on the calling goroutine's thread, after the
// closures before it (mu), settles its launches' events and returns its error. The context is
// pushed on the thread's stack and popped after (a closure of another device calling this one
// finds its own current again), also when fn panics. Never from inside this device's closures.
func (d *Device) do(fn func() error) (err error) {
	if d == nil {
		return fmt.Errorf("gpukern: nil Device: %w", ErrNoDevice)
	}
	d.mu.lock()
	defer d.mu.unlock()
	if d.closed {
		return fmt.Errorf("gpukern: device %d is closed: %w", d.ordinal, ErrNoDevice)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.PushCurrentCtx(d.ctx); err != nil {
		return fmt.Errorf("gpukern: device %d: cuCtxPushCurrent: %w", d.ordinal, err)
	}
	defer func() { // (a panic must not leave a span open, nor the context on a pooled thread)
		d.span = false
		if _, perr := cu.PopCurrentCtx(); perr != nil && err == nil {
			err = fmt.Errorf("gpukern: device %d: cuCtxPopCurrent: %w", d.ordinal, perr)
		}
	}()
	err = fn()
	d.settle()
	return err
}

// Name is the device's name as the driver reports it (e.g. "NVIDIA H100 80GB HBM3").
func (d *Device) Name() string { return d.name }

// Close destroys the context, which frees every allocation made on it (Columns of this device
// become invalid), once no closure runs. Calling Close again returns the first result.
func (d *Device) Close() error {
	d.mu.lock()
	defer d.mu.unlock()
	if !d.closed {
		d.closed = true
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// cuCtxDestroy pops the context from this thread's stack.
		if err := cu.PushCurrentCtx(d.ctx); err != nil {
			d.closeErr = fmt.Errorf("cuCtxPushCurrent: %w", err)
		} else {
			d.closeErr = d.teardown()
		}
	}
	if d.closeErr != nil {
		return fmt.Errorf("gpukern: closing device %d: %w", d.ordinal, d.closeErr)
	}
	return nil
}

// timed runs start (one launch of kernel) between two events, for Counters' kernel time. With
// OUTLIERD_CUDA_SYNC=1 it synchronises so that an asynchronous fault is reported here, by this
// kernel. Inside do only.
func (d *Device) timed(stream cu.Stream, kernel string, grid, block [3]int, shared int, start func(cu.Function) error) error {
	fn, ok := d.fns[kernel]
	if !ok {
		return fmt.Errorf("kernel %s: not loaded", kernel)
	}
	if d.span {
		if err := start(fn); err != nil {
			return fmt.Errorf("kernel %s: cuLaunchKernel(grid %v, block %v, shared %d B): %w", kernel, grid, block, shared, err)
		}
		return nil
	}
	ev, err := d.eventPair()
	if err != nil {
		return fmt.Errorf("kernel %s: %w", kernel, err)
	}
	if err := ev[0].Record(stream); err != nil {
		d.spare = append(d.spare, ev)
		return fmt.Errorf("kernel %s: cuEventRecord: %w", kernel, err)
	}
	if err := start(fn); err != nil {
		d.spare = append(d.spare, ev)
		return fmt.Errorf("kernel %s: cuLaunchKernel(grid %v, block %v, shared %d B): %w", kernel, grid, block, shared, err)
	}
	if err := ev[1].Record(stream); err != nil {
		d.spare = append(d.spare, ev)
		return fmt.Errorf("kernel %s: cuEventRecord: %w", kernel, err)
	}
	d.pending = append(d.pending, launchEvents{kernel: kernel, ev: ev})
	if d.syncEach {
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("kernel %s: cuCtxSynchronize after launch: %w", kernel, err)
		}
	}
	return nil
}

// eventPair returns a start and an end event, reused or new; inside do only.
func (d *Device) eventPair() ([2]cu.Event, error) {
	if n := len(d.spare); n > 0 {
		ev := d.spare[n-1]
		d.spare = d.spare[:n-1]
		return ev, nil
	}
	var ev [2]cu.Event
	for i := range ev {
		var err error
		if ev[i], err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			if i == 1 {
				_ = cu.DestroyEvent(&ev[0])
			}
			return ev, fmt.Errorf("cuEventCreate: %w", err)
		}
	}
	return ev, nil
}

// settle adds the time between each pending launch's events to the kernel total (waiting for the
// end events: the closure has usually synchronised already through its downloads) and keeps the
// events for reuse. A launch whose events cannot be read (a faulted context) is left out of the
// total; the fault itself was reported by the closure. Inside do only.
func (d *Device) settle() {
	var ns int64
	for _, le := range d.pending {
		ev := le.ev
		if ev[1].Synchronize() == nil {
			if ms, err := ev[0].Elapsed(ev[1]); err == nil {
				t := int64(ms * 1e6)
				ns += t
				d.byKernelMu.Lock()
				if d.byKernel == nil {
					d.byKernel = map[string]KernelTotal{}
				}
				kt := d.byKernel[le.kernel]
				d.byKernel[le.kernel] = KernelTotal{Launches: kt.Launches + 1, Time: kt.Time + time.Duration(t)}
				d.byKernelMu.Unlock()
			}
		}
		if len(d.spare) < maxSpareEvents {
			d.spare = append(d.spare, ev)
		} else {
			_ = cu.DestroyEvent(&ev[0])
			_ = cu.DestroyEvent(&ev[1])
		}
	}
	d.pending = d.pending[:0]
	d.kernelNS.Add(ns)
}

// launchEvents are one launch's start and end events, with its kernel's name.
type launchEvents struct {
	kernel string
	ev     [2]cu.Event
}

// KernelTimes returns, per kernel name, the launches and GPU time since Open (the split of
// Counters' kernel time: where a benchmark's device time goes). Safe for concurrent use.
func (d *Device) KernelTimes() map[string]KernelTotal {
	out := map[string]KernelTotal{}
	if d == nil {
		return out
	}
	d.byKernelMu.Lock()
	defer d.byKernelMu.Unlock()
	for k, v := range d.byKernel {
		out[k] = v
	}
	return out
}

// Counters returns running totals since Open: the GPU time of every kernel launched (measured
// with CUDA events around each launch), and the bytes copied host -> device and device -> host
// by the package's entry points. Safe for concurrent use; the pipeline's metrics add the change
// after each batch.
func (d *Device) Counters() (kernel time.Duration, hostToDevice, deviceToHost int64) {
	if d == nil {
		return 0, 0, 0
	}
	return time.Duration(d.kernelNS.Load()), d.toDevice.Load(), d.toHost.Load()
}

// alloc returns bytes of device memory (plain cuMemAlloc, never managed). Inside do only.
func alloc(what string, bytes int64) (cu.DevicePtr, error) {
	if bytes <= 0 {
		bytes = 4 // cuMemAlloc rejects 0; a tiny buffer keeps the code paths uniform
	}
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, fmt.Errorf("cuMemAlloc(%s, %d B): %w", what, bytes, err)
	}
	return p, nil
}

// frees frees device buffers, skipping zero pointers, and joins the errors. Inside do only.
func frees(ps ...cu.DevicePtr) error {
	var errs []error
	for _, p := range ps {
		if p != 0 {
			if err := cu.MemFree(p); err != nil {
				errs = append(errs, fmt.Errorf("cuMemFree(%v): %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// packMaxBytes is the largest upload that uploadCols packs into one copy. A cuMemcpyHtoD from
// pageable memory costs several microseconds whatever its size at a batch's sizes (a column of
// 1000 records is 4 KB), and the pipeline's calls upload 8 to 16 columns per batch each (issue
// 12 item 5: 0.4 ms of copies per 1000-record batch, a fifth of the stage's time on the GPU at
// W = 50,000); above it (a window) the columns go one copy each, at the bus's bandwidth, with no
// host copy.
const packMaxBytes = 1 << 20

// uploadCols copies column-major host columns into one device buffer and counts the bytes; owner
// thread only.
func uploadCols(d *Device, what string, cols [][]float32, rows int) (cu.DevicePtr, error) {
	p, err := alloc(what, int64(len(cols))*int64(rows)*4)
	if err != nil {
		return 0, err
	}
	if rows == 0 {
		return p, nil
	}
	if total := int64(len(cols)) * int64(rows) * 4; len(cols) > 1 && total <= packMaxBytes {
		var pk pack
		pk.reset(d.packBuf)
		pk.addCols(cols, rows)
		d.packBuf = pk.buf[:0]
		// From pageable memory the copy has finished with the pack when the call returns.
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&pk.buf[0]), total); err != nil {
			_ = frees(p)
			return 0, fmt.Errorf("cuMemcpyHtoD(%s, %d columns packed): %w", what, len(cols), err)
		}
		d.toDevice.Add(total)
		return p, nil
	}
	copyCol := cu.MemcpyHtoD
	if int64(rows)*4 >= stagedUploadMin {
		copyCol = d.copyStaged
	}
	for j, c := range cols {
		dst := p + cu.DevicePtr(int64(j)*int64(rows)*4)
		err := copyCol(dst, unsafe.Pointer(&c[0]), int64(rows)*4)
		if errors.Is(err, errNoStage) { // page-locked memory refused: the pageable copy still works
			copyCol = cu.MemcpyHtoD
			err = copyCol(dst, unsafe.Pointer(&c[0]), int64(rows)*4)
		}
		if err != nil {
			_ = frees(p)
			return 0, fmt.Errorf("cuMemcpyHtoD(%s dimension %d): %w", what, j, err)
		}
		d.toDevice.Add(int64(rows) * 4)
	}
	return p, nil
}

// Upload copies column-major host data (cols[j][i]) to device memory.
func (d *Device) Upload(cols [][]float32) (*Columns, error) {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Upload: %w", err)
	}
	c := &Columns{dev: d, rows: rows, dims: len(cols)}
	err = d.do(func() error {
		p, err := uploadCols(d, "columns", cols, rows)
		c.ptr = uintptr(p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpukern.Upload: %w", err)
	}
	return c, nil
}

// Free returns the device memory; a second call does nothing.
func (c *Columns) Free() error {
	if c == nil || c.ptr == 0 {
		return nil
	}
	err := c.dev.do(func() error { return frees(cu.DevicePtr(c.ptr)) })
	c.ptr = 0
	if err != nil {
		return fmt.Errorf("gpukern.Columns.Free: %w", err)
	}
	return nil
}

// download copies len(dst) values from the device into dst and counts the bytes; inside do only.
func download[T int32 | float64 | int64 | float32 | uint64](d *Device, what string, dst []T, src cu.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	var z T
	bytes := int64(len(dst)) * int64(unsafe.Sizeof(z))
	if err := cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), src, bytes); err != nil {
		return fmt.Errorf("cuMemcpyDtoH(%s): %w", what, err)
	}
	d.toHost.Add(bytes)
	return nil
}

// upload copies a host slice to a new device buffer and counts the bytes; inside do only.
func upload[T int32 | float64 | int64 | float32 | uint64](d *Device, what string, src []T) (cu.DevicePtr, error) {
	var z T
	bytes := int64(len(src)) * int64(unsafe.Sizeof(z))
	p, err := alloc(what, bytes)
	if err != nil || len(src) == 0 {
		return p, err
	}
	if err := cu.MemcpyHtoD(p, unsafe.Pointer(&src[0]), bytes); err != nil {
		_ = frees(p)
		return 0, fmt.Errorf("cuMemcpyHtoD(%s): %w", what, err)
	}
	d.toDevice.Add(bytes)
	return p, nil
}

// flatten copies column-major columns into one contiguous slice (dimension-major).
func flatten(cols [][]float32) []float32 {
	if len(cols) == 0 {
		return nil
	}
	out := make([]float32, 0, len(cols)*len(cols[0]))
	for _, c := range cols {
		out = append(out, c...)
	}
	return out
}

// unsafePtr32 is the address of s[0] for a host-to-device copy (s must not be empty).
func unsafePtr32(s []int32) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
