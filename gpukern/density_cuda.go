//go:build cuda

package gpukern

import (
	"errors"
	"unsafe"

	"gorgonia.org/cu"
)

// densityBlock is the number of threads (objects) per block of density_records/clusters. Small
// blocks: per-object work varies a lot (an early flag stops the search), and a block's slowest
// thread holds its slot.
const densityBlock = 64

// densityInputs are the offsets in a pack of a density launch's inputs (-1: none).
type densityInputs struct {
	means, sds, index, lo, hi, off int64
}

// densityPointers are those inputs on the device (0: none).
type densityPointers struct {
	means, sds, index, lo, hi, off uint64
}

func (in densityInputs) at(base cu.DevicePtr) densityPointers {
	at := func(o int64) uint64 {
		if o < 0 {
			return 0
		}
		return uint64(base) + uint64(o)
	}
	return densityPointers{at(in.means), at(in.sds), at(in.index), at(in.lo), at(in.hi), at(in.off)}
}

// packDensity adds a density launch's inputs to pk: the objects (records, or the model's
// clusters), the records' stream indices, and the exact method's regions.
func packDensity(pk *pack, m *DensityModel, obj densityObjects, p DensityParams, lo, hi []float64, off []int64) densityInputs {
	in := densityInputs{-1, -1, -1, -1, -1, -1}
	if obj.clusters {
		in.means = pk.add(unsafe.Pointer(unsafe.SliceData(m.objMean)), int64(len(m.objMean))*8)
		in.sds = pk.add(unsafe.Pointer(unsafe.SliceData(m.objSD)), int64(len(m.objSD))*8)
		in.index = pk.add(unsafe.Pointer(unsafe.SliceData(m.objIndex)), int64(len(m.objIndex))*8)
	} else {
		in.means = pk.addCols(obj.means, obj.n)
		if p.Index != nil { // the records' own streams (0: firstIndex + i in the kernel)
			in.index = pk.add(unsafe.Pointer(&p.Index[0]), int64(obj.n)*8)
		}
		if obj.sds != nil {
			in.sds = pk.addCols(obj.sds, obj.n)
		}
	}
	in.lo = pk.add(unsafe.Pointer(unsafe.SliceData(lo)), int64(len(lo))*8)
	in.hi = pk.add(unsafe.Pointer(unsafe.SliceData(hi)), int64(len(hi))*8)
	in.off = pk.add(unsafe.Pointer(unsafe.SliceData(off)), int64(len(off))*8)
	return in
}

// densityModelOn returns m on the device: resident (KeepDensityModel; its bounds table uploaded
// with the first call that samples), or uploaded for this call, which release frees. Inside do
// only.
func (d *Device) densityModelOn(m *DensityModel, b *DensityBounds) (mb *densityBuffers, release func() error, err error) {
	if mb = d.dens[m]; mb != nil {
		if b != nil && mb.cells == 0 {
			if err = mb.uploadBounds(d, b); err != nil {
				return nil, nil, err
			}
		}
		return mb, func() error { return nil }, nil
	}
	if mb, err = uploadDensityModel(d, m, b); err != nil {
		return nil, nil, err
	}
	return mb, mb.free, nil
}

// launchDensity launches density_records (or density_clusters) on stream, writing the n results
// at out as newDensityResult lays them out (prob, mask, flag). Inside do only.
func (d *Device) launchDensity(stream cu.Stream, m *DensityModel, mb *densityBuffers, obj densityObjects, p DensityParams, b *DensityBounds, in densityPointers, out cu.DevicePtr) error {
	n := obj.n
	exact := int64(0)
	if p.Exact {
		exact = 1
	}
	cells := mb.cells
	if b == nil { // this call samples nothing, or samples without the bounds (densityPlain)
		cells = 0
	}
	c := densCommon{N: int64(n), R: int64(m.dims), Mu: uint64(mb.mu), Coef: uint64(mb.coef), Inv2: uint64(mb.inv2),
		K: int64(m.k), Eta: p.Eta, Delta: p.Delta, Samples: int64(p.Samples), Mode: int64(p.Mode), Seed: p.Seed,
		Exact: exact, RegLo: in.lo, RegHi: in.hi, RegOff: in.off, BLo: uint64(mb.lower),
		BHi: uint64(mb.upper), BOrigin: uint64(mb.origin), BInvStep: uint64(mb.invStep), Cells: cells,
		Prob: uint64(out), Mask: uint64(out) + uint64(n)*8, Flag: uint64(out) + uint64(n)*16}
	grid, block := [3]int{(n + densityBlock - 1) / densityBlock, 1, 1}, [3]int{densityBlock, 1, 1}
	if obj.clusters {
		a := densClustersParams{Means: in.means, SDs: in.sds, Index: in.index, C: c}
		return launchParamsOn(d, stream, "density_clusters", grid, block, 0, &a)
	}
	a := densRecordsParams{Means: in.means, SDs: in.sds, Index: in.index, FirstIndex: p.FirstIndex, C: c}
	return launchParamsOn(d, stream, "density_records", grid, block, 0, &a)
}

// densityBuffers is a density model on the device: its kernels' parameters and the density
// bounds table (cells = 0 when the table was not uploaded).
type densityBuffers struct {
	mu, coef, inv2, lower, upper, origin, invStep cu.DevicePtr
	cells                                         int64
}

func (mb *densityBuffers) free() error {
	return frees(mb.mu, mb.coef, mb.inv2, mb.lower, mb.upper, mb.origin, mb.invStep)
}

// uploadDensityModel copies the model and, when b is not nil, its bounds table. Inside do only.
func uploadDensityModel(d *Device, m *DensityModel, b *DensityBounds) (mb *densityBuffers, err error) {
	mb = &densityBuffers{}
	defer func() {
		if err != nil {
			err = errors.Join(err, mb.free())
			mb = nil
		}
	}()
	if mb.mu, err = upload(d, "model means", m.mu); err != nil {
		return
	}
	if mb.coef, err = upload(d, "model coefficients", m.coef); err != nil {
		return
	}
	if mb.inv2, err = upload(d, "model 1/(2 var)", m.inv2); err != nil {
		return
	}
	if b != nil {
		err = mb.uploadBounds(d, b)
	}
	return
}

// uploadBounds adds the density bounds table to mb (which has none). Inside do only.
func (mb *densityBuffers) uploadBounds(d *Device, b *DensityBounds) (err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, frees(mb.lower, mb.upper, mb.origin, mb.invStep))
			mb.lower, mb.upper, mb.origin, mb.invStep = 0, 0, 0, 0
		}
	}()
	if mb.lower, err = upload(d, "density lower bounds", b.Lower); err != nil {
		return err
	}
	if mb.upper, err = upload(d, "density upper bounds", b.Upper); err != nil {
		return err
	}
	if mb.origin, err = upload(d, "bounds grid origins", b.Origin); err != nil {
		return err
	}
	if mb.invStep, err = upload(d, "bounds grid inverse steps", b.InvStep); err != nil {
		return err
	}
	mb.cells = int64(b.Cells)
	return nil
}

// keepDensityModel uploads m to stay on the device; its bounds table follows with the first
// call that samples (the exact independent method, the pipeline's default, never reads it).
func (d *Device) keepDensityModel(m *DensityModel) error {
	return d.do(func() error {
		if d.dens[m] != nil {
			return nil
		}
		mb, err := uploadDensityModel(d, m, nil)
		if err != nil {
			return err
		}
		d.dens[m] = mb
		return nil
	})
}

// dropDensityModel frees m's resident copy, if any.
func (d *Device) dropDensityModel(m *DensityModel) error {
	return d.do(func() error {
		mb := d.dens[m]
		if mb == nil {
			return nil
		}
		delete(d.dens, m)
		return mb.free()
	})
}
