//go:build cuda

package gpukern

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"
)

//go:embed proclus.ptx
var proclusPTX string

func init() {
	modules = append(modules, struct {
		name, ptx string
		kernels   []string
	}{"proclus", proclusPTX, []string{"proclus_locality", "proclus_assign", "proclus_spread"}})
}

const (
	// pcThreads is the block size of the PROCLUS kernels (8 warps: the per-block counters are
	// shared by enough rows to keep the global atomics few).
	pcThreads = 256
	// pcBlocksPerSM caps the grid: each block strides over the rows, so the number of global
	// atomic flushes is blocks*counters, not rows.
	pcBlocksPerSM = 8
	// pcParamBytes is the parameter buffer of one launch: at most ProclusMaxCounters pairs of
	// (float64 centre + int64 dimension) plus the medoid coordinates, offsets and radii.
	pcParamBytes = 256 << 10
)

// UploadProclus copies column-major host data (cols[j][i]; the caller checks it finite, as
// proclus.Prepare does) to the device for PROCLUS runs and allocates the run buffers (the
// distance cache is allocated by Begin).
func (d *Device) UploadProclus(cols [][]float32) (*ProclusData, error) {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return nil, fmt.Errorf("gpukern.UploadProclus: %w", err)
	}
	if rows > math.MaxInt32 {
		return nil, fmt.Errorf("gpukern.UploadProclus: %d rows, at most %d (an int32 assignment)", rows, math.MaxInt32)
	}
	pd := &ProclusData{dev: d, rows: rows, dims: len(cols)}
	err = d.do(func() error {
		x, err := uploadCols(d, "PROCLUS data", cols, rows)
		if err != nil {
			return err
		}
		pd.x = uintptr(x)
		for _, a := range []struct {
			p     *uintptr
			what  string
			bytes int64
		}{
			{&pd.cur, "assignment", int64(rows) * 4}, {&pd.best, "best assignment", int64(rows) * 4},
			{&pd.scale, "fixed-point scales", int64(len(cols)) * 8}, {&pd.par, "parameters", pcParamBytes},
			{&pd.out, "counters", ProclusMaxCounters * 8},
		} {
			p, err := alloc(a.what, a.bytes)
			if err != nil {
				return err
			}
			*a.p = uintptr(p)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gpukern.UploadProclus: %w", err), pd.Free())
	}
	return pd, nil
}

// Free returns the device memory; a second call does nothing.
func (pd *ProclusData) Free() error {
	if pd == nil || pd.dev == nil {
		return nil
	}
	ps := []*uintptr{&pd.x, &pd.dist, &pd.cur, &pd.best, &pd.scale, &pd.par, &pd.out}
	err := pd.dev.do(func() error {
		var errs []error
		for _, p := range ps {
			errs = append(errs, frees(cu.DevicePtr(*p)))
			*p = 0
		}
		return errors.Join(errs...)
	})
	pd.distSlots = 0
	if err != nil {
		return fmt.Errorf("gpukern.ProclusData.Free: %w", err)
	}
	return nil
}

// Begin (proclus.Engine.Begin) uploads the fixed-point scales and grows the distance cache to slots
// rows.
func (pd *ProclusData) Begin(scales []float64, slots int) error {
	if len(scales) != pd.dims {
		return fmt.Errorf("%w: %d scales for %d dimensions", errShape, len(scales), pd.dims)
	}
	return pd.dev.do(func() error {
		if err := cu.MemcpyHtoD(cu.DevicePtr(pd.scale), unsafe.Pointer(&scales[0]), int64(len(scales))*8); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(scales): %w", err)
		}
		pd.dev.toDevice.Add(int64(len(scales)) * 8)
		if slots > pd.distSlots {
			if err := frees(cu.DevicePtr(pd.dist)); err != nil {
				return err
			}
			pd.dist, pd.distSlots = 0, 0
			p, err := alloc("FAST distance cache (B*k rows of rows float32)", int64(slots)*int64(pd.rows)*4)
			if err != nil {
				return err
			}
			pd.dist, pd.distSlots = uintptr(p), slots
		}
		return nil
	})
}

// pcPack lays out one launch's parameters in one buffer (8-byte aligned segments), copied with
// one transfer.
type pcPack struct{ b []byte }

func (p *pcPack) align() int {
	for len(p.b)%8 != 0 {
		p.b = append(p.b, 0)
	}
	return len(p.b)
}

func (p *pcPack) i64(v []int64) int {
	at := p.align()
	for _, x := range v {
		p.b = binary.LittleEndian.AppendUint64(p.b, uint64(x))
	}
	return at
}

func (p *pcPack) ints(v []int) int {
	at := p.align()
	for _, x := range v {
		p.b = binary.LittleEndian.AppendUint64(p.b, uint64(int64(x)))
	}
	return at
}

func (p *pcPack) f64(v []float64) int {
	at := p.align()
	for _, x := range v {
		p.b = binary.LittleEndian.AppendUint64(p.b, math.Float64bits(x))
	}
	return at
}

func (p *pcPack) f32(v []float32) int {
	at := p.align()
	for _, x := range v {
		p.b = binary.LittleEndian.AppendUint32(p.b, math.Float32bits(x))
	}
	return at
}

// send copies the packed parameters to the device and zeroes cnt counters; owner thread only.
func (pd *ProclusData) send(p *pcPack, cnt int) error {
	if len(p.b) > pcParamBytes {
		return fmt.Errorf("PROCLUS parameters take %d bytes, at most %d", len(p.b), pcParamBytes)
	}
	if cnt > ProclusMaxCounters {
		return fmt.Errorf("PROCLUS needs %d counters, at most %d", cnt, ProclusMaxCounters)
	}
	if len(p.b) > 0 {
		if err := cu.MemcpyHtoD(cu.DevicePtr(pd.par), unsafe.Pointer(&p.b[0]), int64(len(p.b))); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(PROCLUS parameters): %w", err)
		}
		pd.dev.toDevice.Add(int64(len(p.b)))
	}
	if err := cu.MemsetD32(cu.DevicePtr(pd.out), 0, int64(cnt)*2); err != nil {
		return fmt.Errorf("cuMemsetD32(PROCLUS counters): %w", err)
	}
	return nil
}

// receive downloads cnt counters into dst (two's-complement int64); owner thread only.
func (pd *ProclusData) receive(dst []int64) error {
	if len(dst) == 0 {
		return nil
	}
	u := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), len(dst))
	return download(pd.dev, "PROCLUS counters", u, cu.DevicePtr(pd.out))
}

func (pd *ProclusData) grid() [3]int {
	g := min((pd.rows+pcThreads-1)/pcThreads, pd.dev.smCount*pcBlocksPerSM)
	return [3]int{max(g, 1), 1, 1}
}

func (pd *ProclusData) at(off int) uint64 { return uint64(pd.par) + uint64(off) }

// Locality (proclus.Engine.Locality): proclus_locality over the changed localities.
func (pd *ProclusData) Locality(qs []ProclusQuery, sums, counts []int64) error {
	nq, d := len(qs), pd.dims
	slot, fresh := make([]int64, nq), make([]int64, nq)
	med, band := make([]float32, 0, nq*d), make([]float32, 0, 2*nq)
	for q, x := range qs {
		if x.Slot < 0 || x.Slot >= pd.distSlots {
			return fmt.Errorf("%w: query %d has slot %d of %d", errShape, q, x.Slot, pd.distSlots)
		}
		slot[q] = int64(x.Slot)
		if x.Fresh {
			fresh[q] = 1
		}
		med = append(med, x.Medoid...)
		band = append(band, x.Lo, x.Hi)
	}
	var p pcPack
	oSlot, oFresh, oMed, oBand := p.i64(slot), p.i64(fresh), p.f32(med), p.f32(band)
	cnt := nq*d + nq
	return pd.dev.do(func() error {
		if err := pd.send(&p, cnt); err != nil {
			return err
		}
		if err := launchParams(pd.dev, "proclus_locality", pd.grid(), [3]int{pcThreads, 1, 1}, cnt*8, &pcLocalityParams{
			X: uint64(pd.x), N: int64(pd.rows), D: int64(d), Nq: int64(nq), Slot: pd.at(oSlot), Fresh: pd.at(oFresh),
			Med: pd.at(oMed), Band: pd.at(oBand), Dist: uint64(pd.dist), Scale: uint64(pd.scale), Out: uint64(pd.out)}); err != nil {
			return err
		}
		all := make([]int64, cnt)
		if err := pd.receive(all); err != nil {
			return err
		}
		copy(sums, all[:nq*d])
		copy(counts, all[nq*d:])
		return nil
	})
}

// Assign (proclus.Engine.Assign): proclus_assign.
func (pd *ProclusData) Assign(centers [][]float32, off, dims []int, radius []float64, counts, sums []int64) error {
	k := len(centers)
	med := make([]float32, 0, k*pd.dims)
	for _, c := range centers {
		med = append(med, c...)
	}
	use := int64(0)
	rad := make([]float64, k)
	if radius != nil {
		use = 1
		copy(rad, radius)
	}
	var p pcPack
	oMed, oOff, oDims, oRad := p.f32(med), p.ints(off), p.ints(dims), p.f64(rad)
	cnt := k + len(dims)
	return pd.dev.do(func() error {
		if err := pd.send(&p, cnt); err != nil {
			return err
		}
		if err := launchParams(pd.dev, "proclus_assign", pd.grid(), [3]int{pcThreads, 1, 1}, cnt*8, &pcAssignParams{
			X: uint64(pd.x), N: int64(pd.rows), D: int64(pd.dims), K: int64(k), Med: pd.at(oMed), Off: pd.at(oOff),
			Dims: pd.at(oDims), Radius: pd.at(oRad), UseRadius: use, Scale: uint64(pd.scale), Assign: uint64(pd.cur),
			Out: uint64(pd.out)}); err != nil {
			return err
		}
		all := make([]int64, cnt)
		if err := pd.receive(all); err != nil {
			return err
		}
		copy(counts, all[:k])
		copy(sums, all[k:])
		return nil
	})
}

// Spread (proclus.Engine.Spread): proclus_spread over the current assignment.
func (pd *ProclusData) Spread(center []float64, off, dims []int, sums []int64) error {
	k := len(off) - 1
	var p pcPack
	oCen, oOff, oDims := p.f64(center), p.ints(off), p.ints(dims)
	cnt := len(dims)
	return pd.dev.do(func() error {
		if err := pd.send(&p, cnt); err != nil {
			return err
		}
		if err := launchParams(pd.dev, "proclus_spread", pd.grid(), [3]int{pcThreads, 1, 1}, cnt*8, &pcSpreadParams{
			X: uint64(pd.x), N: int64(pd.rows), D: int64(pd.dims), K: int64(k), Assign: uint64(pd.cur), Center: pd.at(oCen),
			Off: pd.at(oOff), Dims: pd.at(oDims), Scale: uint64(pd.scale), Out: uint64(pd.out)}); err != nil {
			return err
		}
		return pd.receive(sums)
	})
}

func (pd *ProclusData) copyAssign(dst, src uintptr) error {
	return pd.dev.do(func() error {
		if err := cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), int64(pd.rows)*4); err != nil {
			return fmt.Errorf("cuMemcpyDtoD(assignment): %w", err)
		}
		return nil
	})
}

// KeepBest (proclus.Engine) copies the current assignment to the best, on the device.
func (pd *ProclusData) KeepBest() error { return pd.copyAssign(pd.best, pd.cur) }

// UseBest (proclus.Engine) copies the best assignment to the current, on the device.
func (pd *ProclusData) UseBest() error { return pd.copyAssign(pd.cur, pd.best) }

// Assignment (proclus.Engine) downloads the current assignment.
func (pd *ProclusData) Assignment(dst []int32) error {
	if len(dst) != pd.rows {
		return fmt.Errorf("%w: %d rows but len(dst) = %d", errShape, pd.rows, len(dst))
	}
	return pd.dev.do(func() error { return download(pd.dev, "assignment", dst, cu.DevicePtr(pd.cur)) })
}
