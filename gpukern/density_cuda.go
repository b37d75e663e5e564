//go:build cuda

package gpukern

import (
	"errors"

	"gorgonia.org/cu"

	"github.com/outlierd/outlierd/stages/detect/density"
)

// densityBlock is the number of threads (objects) per block of density_records/clusters. Small
// blocks: per-object work varies a lot (an early flag stops the search), and a block's slowest
// thread holds its slot.
const densityBlock = 64

// detectDensity uploads the objects, the model and (exact) the regions, runs density_records or
// density_clusters and downloads the results.
func (d *Device) detectDensity(m *DensityModel, obj densityObjects, p DensityParams, lo, hi []float64, off []int64, b *density.Bounds) (densityResult, error) {
	n := obj.n
	res := densityResult{prob: make([]float64, n), mask: make([]uint64, n), flag: make([]int32, n)}
	err := d.do(func() (err error) {
		var xp, ep, ixp, mup, cp, ip, lop, hip, offp, pp, mp, fp, blp, bhp, bop, bsp cu.DevicePtr
		defer func() {
			err = errors.Join(err, frees(xp, ep, ixp, mup, cp, ip, lop, hip, offp, pp, mp, fp, blp, bhp, bop, bsp))
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
			if obj.sds != nil {
				if ep, err = uploadCols(d, "sds", obj.sds, n); err != nil {
					return err
				}
			}
		}
		if mup, err = upload(d, "model means", m.mu); err != nil {
			return err
		}
		if cp, err = upload(d, "model coefficients", m.coef); err != nil {
			return err
		}
		if ip, err = upload(d, "model 1/(2 var)", m.inv2); err != nil {
			return err
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
		cells := int64(0)
		if b != nil {
			cells = int64(b.Cells)
			if blp, err = upload(d, "density lower bounds", b.Lower); err != nil {
				return err
			}
			if bhp, err = upload(d, "density upper bounds", b.Upper); err != nil {
				return err
			}
			if bop, err = upload(d, "bounds grid origins", b.Origin); err != nil {
				return err
			}
			if bsp, err = upload(d, "bounds grid inverse steps", b.InvStep); err != nil {
				return err
			}
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
		common := []any{int64(n), int64(m.dims), mup, cp, ip, int64(m.k), p.Eta, p.Delta, int64(p.Samples), int64(p.Mode),
			p.Seed, exact, lop, hip, offp, blp, bhp, bop, bsp, cells, pp, mp, fp}
		grid, block := [3]int{(n + densityBlock - 1) / densityBlock, 1, 1}, [3]int{densityBlock, 1, 1}
		if obj.clusters {
			err = d.launch("density_clusters", grid, block, 0, append([]any{xp, ep, ixp}, common...)...)
		} else {
			err = d.launch("density_records", grid, block, 0, append([]any{xp, ep, p.FirstIndex}, common...)...)
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
