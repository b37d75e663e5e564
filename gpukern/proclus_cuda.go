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
)

// UploadProclus copies column-major host data (cols[j][i]; the caller checks it finite, as
// proclus.Prepare does) to the device for PROCLUS runs and allocates its own run state (the
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
		return nil
	})
	if err == nil {
		pd.ProclusRun, err = pd.NewRun()
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gpukern.UploadProclus: %w", err), pd.Free())
	}
	return pd, nil
}

// NewRun allocates another run state over pd's columns (the distance cache is allocated by
// Begin): about ProclusRunBytes(rows, slots). Free (of the run or of pd) returns it.
func (pd *ProclusData) NewRun() (*ProclusRun, error) {
	if pd.x == 0 {
		return nil, fmt.Errorf("gpukern.ProclusData.NewRun: %w", errShape)
	}
	r := &ProclusRun{pd: pd}
	err := pd.dev.do(func() error {
		for _, a := range []struct {
			p     *uintptr
			what  string
			bytes int64
		}{
			{&r.cur, "assignment", int64(pd.rows) * 4}, {&r.best, "best assignment", int64(pd.rows) * 4},
			{&r.scale, "fixed-point scales", int64(pd.dims) * 8}, {&r.par, "parameters", pcParamBytes},
			{&r.out, "counters", ProclusMaxCounters * 8},
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
		return nil, errors.Join(fmt.Errorf("gpukern.ProclusData.NewRun: %w", err), r.Free())
	}
	pd.runs = append(pd.runs, r)
	return r, nil
}

// RunStates returns up to n run states over pd for runs with slots candidate medoids each: pd's
// own first, then those made by earlier calls, then new ones (NewRun), kept until Free. It makes
// a new one only while the device has twice its ProclusRunBytes free, so concurrent runs never
// take the memory that other work on the device needs; it returns at least pd's own.
func (pd *ProclusData) RunStates(n, slots int) ([]*ProclusRun, error) {
	if len(pd.runs) < n {
		var free int64
		if err := pd.dev.do(func() (err error) {
			free, _, err = cu.MemInfo()
			return err
		}); err != nil {
			return nil, fmt.Errorf("gpukern.ProclusData.RunStates: cuMemGetInfo: %w", err)
		}
		need := ProclusRunBytes(pd.rows, slots)
		for len(pd.runs) < n && free >= 2*need {
			if _, err := pd.NewRun(); err != nil {
				return nil, err
			}
			free -= need
		}
	}
	return pd.runs[:min(n, len(pd.runs))], nil
}

// Free returns the data's memory and that of every run state over it (their later use fails); a
// second call does nothing.
func (pd *ProclusData) Free() error {
	if pd == nil || pd.dev == nil {
		return nil
	}
	var errs []error
	for _, r := range pd.runs {
		errs = append(errs, r.Free())
	}
	pd.runs = nil
	errs = append(errs, pd.dev.do(func() error {
		err := frees(cu.DevicePtr(pd.x))
		pd.x = 0
		return err
	}))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gpukern.ProclusData.Free: %w", err)
	}
	return nil
}

// Free returns the run state's memory; a second call does nothing.
func (pr *ProclusRun) Free() error {
	if pr == nil || pr.pd == nil {
		return nil
	}
	ps := []*uintptr{&pr.dist, &pr.cur, &pr.best, &pr.scale, &pr.par, &pr.out}
	err := pr.pd.dev.do(func() error {
		var errs []error
		for _, p := range ps {
			errs = append(errs, frees(cu.DevicePtr(*p)))
			*p = 0
		}
		return errors.Join(errs...)
	})
	pr.distSlots = 0
	if err != nil {
		return fmt.Errorf("gpukern.ProclusRun.Free: %w", err)
	}
	return nil
}

// Begin (proclus.Engine.Begin) uploads the fixed-point scales and grows the distance cache to slots
// rows.
func (pr *ProclusRun) Begin(scales []float64, slots int) error {
	pd := pr.pd
	if len(scales) != pd.dims {
		return fmt.Errorf("%w: %d scales for %d dimensions", errShape, len(scales), pd.dims)
	}
	if pr.cur == 0 {
		return fmt.Errorf("%w: the run state is freed", errShape)
	}
	return pd.dev.do(func() error {
		if err := cu.MemcpyHtoD(cu.DevicePtr(pr.scale), unsafe.Pointer(&scales[0]), int64(len(scales))*8); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(scales): %w", err)
		}
		pd.dev.toDevice.Add(int64(len(scales)) * 8)
		if slots > pr.distSlots {
			if err := frees(cu.DevicePtr(pr.dist)); err != nil {
				return err
			}
			pr.dist, pr.distSlots = 0, 0
			p, err := alloc("FAST distance cache (B*k rows of rows float32)", int64(slots)*int64(pd.rows)*4)
			if err != nil {
				return err
			}
			pr.dist, pr.distSlots = uintptr(p), slots
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

// send copies the packed parameters to the device and zeroes cnt counters; inside do only.
func (pr *ProclusRun) send(p *pcPack, cnt int) error {
	pd := pr.pd
	if len(p.b) > pcParamBytes {
		return fmt.Errorf("PROCLUS parameters take %d bytes, at most %d", len(p.b), pcParamBytes)
	}
	if cnt > ProclusMaxCounters {
		return fmt.Errorf("PROCLUS needs %d counters, at most %d", cnt, ProclusMaxCounters)
	}
	if len(p.b) > 0 {
		if err := cu.MemcpyHtoD(cu.DevicePtr(pr.par), unsafe.Pointer(&p.b[0]), int64(len(p.b))); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(PROCLUS parameters): %w", err)
		}
		pd.dev.toDevice.Add(int64(len(p.b)))
	}
	if err := cu.MemsetD32(cu.DevicePtr(pr.out), 0, int64(cnt)*2); err != nil {
		return fmt.Errorf("cuMemsetD32(PROCLUS counters): %w", err)
	}
	return nil
}

// receive downloads cnt counters into dst (two's-complement int64); inside do only.
func (pr *ProclusRun) receive(dst []int64) error {
	pd := pr.pd
	if len(dst) == 0 {
		return nil
	}
	u := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), len(dst))
	return download(pd.dev, "PROCLUS counters", u, cu.DevicePtr(pr.out))
}

func (pr *ProclusRun) grid() [3]int {
	pd := pr.pd
	g := min((pd.rows+pcThreads-1)/pcThreads, pd.dev.smCount*pcBlocksPerSM)
	return [3]int{max(g, 1), 1, 1}
}

func (pr *ProclusRun) at(off int) uint64 { return uint64(pr.par) + uint64(off) }

// Locality (proclus.Engine.Locality): proclus_locality over the changed localities.
func (pr *ProclusRun) Locality(qs []ProclusQuery, sums, counts []int64) error {
	pd := pr.pd
	nq, d := len(qs), pd.dims
	slot, fresh := make([]int64, nq), make([]int64, nq)
	med, band := make([]float32, 0, nq*d), make([]float32, 0, 2*nq)
	for q, x := range qs {
		if x.Slot < 0 || x.Slot >= pr.distSlots {
			return fmt.Errorf("%w: query %d has slot %d of %d", errShape, q, x.Slot, pr.distSlots)
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
		if err := pr.send(&p, cnt); err != nil {
			return err
		}
		if err := launchParams(pd.dev, "proclus_locality", pr.grid(), [3]int{pcThreads, 1, 1}, cnt*8, &pcLocalityParams{
			X: uint64(pd.x), N: int64(pd.rows), D: int64(d), Nq: int64(nq), Slot: pr.at(oSlot), Fresh: pr.at(oFresh),
			Med: pr.at(oMed), Band: pr.at(oBand), Dist: uint64(pr.dist), Scale: uint64(pr.scale), Out: uint64(pr.out)}); err != nil {
			return err
		}
		all := make([]int64, cnt)
		if err := pr.receive(all); err != nil {
			return err
		}
		copy(sums, all[:nq*d])
		copy(counts, all[nq*d:])
		return nil
	})
}

// Assign (proclus.Engine.Assign): proclus_assign.
func (pr *ProclusRun) Assign(centers [][]float32, off, dims []int, radius []float64, counts, sums []int64) error {
	pd := pr.pd
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
		if err := pr.send(&p, cnt); err != nil {
			return err
		}
		if err := launchParams(pd.dev, "proclus_assign", pr.grid(), [3]int{pcThreads, 1, 1}, cnt*8, &pcAssignParams{
			X: uint64(pd.x), N: int64(pd.rows), D: int64(pd.dims), K: int64(k), Med: pr.at(oMed), Off: pr.at(oOff),
			Dims: pr.at(oDims), Radius: pr.at(oRad), UseRadius: use, Scale: uint64(pr.scale), Assign: uint64(pr.cur),
			Out: uint64(pr.out)}); err != nil {
			return err
		}
		all := make([]int64, cnt)
		if err := pr.receive(all); err != nil {
			return err
		}
		copy(counts, all[:k])
		copy(sums, all[k:])
		return nil
	})
}

// Spread (proclus.Engine.Spread): proclus_spread over the current assignment.
func (pr *ProclusRun) Spread(center []float64, off, dims []int, sums []int64) error {
	pd := pr.pd
	k := len(off) - 1
	var p pcPack
	oCen, oOff, oDims := p.f64(center), p.ints(off), p.ints(dims)
	cnt := len(dims)
	return pd.dev.do(func() error {
		if err := pr.send(&p, cnt); err != nil {
			return err
		}
		if err := launchParams(pd.dev, "proclus_spread", pr.grid(), [3]int{pcThreads, 1, 1}, cnt*8, &pcSpreadParams{
			X: uint64(pd.x), N: int64(pd.rows), D: int64(pd.dims), K: int64(k), Assign: uint64(pr.cur), Center: pr.at(oCen),
			Off: pr.at(oOff), Dims: pr.at(oDims), Scale: uint64(pr.scale), Out: uint64(pr.out)}); err != nil {
			return err
		}
		return pr.receive(sums)
	})
}

func (pr *ProclusRun) copyAssign(dst, src uintptr) error {
	pd := pr.pd
	return pd.dev.do(func() error {
		if err := cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), int64(pd.rows)*4); err != nil {
			return fmt.Errorf("cuMemcpyDtoD(assignment): %w", err)
		}
		return nil
	})
}

// KeepBest (proclus.Engine) copies the current assignment to the best, on the device.
func (pr *ProclusRun) KeepBest() error { return pr.copyAssign(pr.best, pr.cur) }

// UseBest (proclus.Engine) copies the best assignment to the current, on the device.
func (pr *ProclusRun) UseBest() error { return pr.copyAssign(pr.cur, pr.best) }

// Assignment (proclus.Engine) downloads the current assignment.
func (pr *ProclusRun) Assignment(dst []int32) error {
	pd := pr.pd
	if len(dst) != pd.rows {
		return fmt.Errorf("%w: %d rows but len(dst) = %d", errShape, pd.rows, len(dst))
	}
	return pd.dev.do(func() error { return download(pd.dev, "assignment", dst, cu.DevicePtr(pr.cur)) })
}
