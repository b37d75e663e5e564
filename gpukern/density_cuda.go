//go:build cuda

package gpukern

import (
	"errors"

	"gorgonia.org/cu"
)

// densityBlock is the number of threads (objects) per block of density_records/clusters. Small
// blocks: per-object work varies a lot (an early flag stops the search), and a block's slowest
// thread holds its slot.
const densityBlock = 64

// detectDensity uploads the objects, the model and (exact) the regions, runs density_records or
// density_clusters and downloads the results.
func (d *Device) detectDensity(m *DensityModel, obj densityObjects, p DensityParams, lo, hi []float64, off []int64, b *DensityBounds) (densityResult, error) {
	n := obj.n
	res := densityResult{prob: make([]float64, n), mask: make([]uint64, n), flag: make([]int32, n)}
	err := d.do(func() (err error) {
		var xp, ep, ixp, lop, hip, offp, pp, mp, fp cu.DevicePtr
		var mb *densityBuffers // the model: resident (KeepDensityModel), or uploaded for this call
		defer func() {
			err = errors.Join(err, frees(xp, ep, ixp, lop, hip, offp, pp, mp, fp))
			if mb != nil && d.dens[m] != mb {
				err = errors.Join(err, mb.free())
			}
		}()
		if obj.clusters {
			if xp, err = upload(d, "cluster centroids", m.objMean); err != nil {
				return err
			}
			if ep, err = upload(d, "cluster sqrt(Delta)", m.objSD); err != nil {
				return err
			}
			if ixp, err = upload(d, "cluster indices", m.objIndex); err != nil {
				return err
			}
		} else {
			if xp, err = uploadCols(d, "means", obj.means, n); err != nil {
				return err
			}
			if p.Index != nil { // the records' own streams (0: firstIndex + i in the kernel)
				if ixp, err = upload(d, "record stream indices", p.Index); err != nil {
					return err
				}
			}
			if obj.sds != nil {
				if ep, err = uploadCols(d, "sds", obj.sds, n); err != nil {
					return err
				}
			}
		}
		if mb = d.dens[m]; mb == nil {
			if mb, err = uploadDensityModel(d, m, b); err != nil {
				return err
			}
		} else if b != nil && mb.cells == 0 { // resident, and the first call that samples
			if err = mb.uploadBounds(d, b); err != nil {
				return err
			}
		}
		if lop, err = upload(d, "region lower ends", lo); err != nil {
			return err
		}
		if hip, err = upload(d, "region upper ends", hi); err != nil {
			return err
		}
		if offp, err = upload(d, "region offsets", off); err != nil {
			return err
		}
		if pp, err = alloc("eta-probabilities", int64(n)*8); err != nil {
			return err
		}
		if mp, err = alloc("subspaces", int64(n)*8); err != nil {
			return err
		}
		if fp, err = alloc("flags", int64(n)*4); err != nil {
			return err
		}
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
			Exact: exact, RegLo: uint64(lop), RegHi: uint64(hip), RegOff: uint64(offp), BLo: uint64(mb.lower),
			BHi: uint64(mb.upper), BOrigin: uint64(mb.origin), BInvStep: uint64(mb.invStep), Cells: cells,
			Prob: uint64(pp), Mask: uint64(mp), Flag: uint64(fp)}
		grid, block := [3]int{(n + densityBlock - 1) / densityBlock, 1, 1}, [3]int{densityBlock, 1, 1}
		if obj.clusters {
			a := densClustersParams{Means: uint64(xp), SDs: uint64(ep), Index: uint64(ixp), C: c}
			err = launchParams(d, "density_clusters", grid, block, 0, &a)
		} else {
			a := densRecordsParams{Means: uint64(xp), SDs: uint64(ep), Index: uint64(ixp), FirstIndex: p.FirstIndex, C: c}
			err = launchParams(d, "density_records", grid, block, 0, &a)
		}
		if err != nil {
			return err
		}
		if err = download(d, "eta-probabilities", res.prob, pp); err != nil {
			return err
		}
		if err = download(d, "subspaces", res.mask, mp); err != nil {
			return err
		}
		return download(d, "flags", res.flag, fp)
	})
	return res, err
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

// uploadDensityModel copies the model and, when b is not nil, its bounds table. Owner thread only.
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

// uploadBounds adds the density bounds table to mb (which has none). Owner thread only.
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
