//go:build cuda

package gpukern

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// densityBlock is the number of threads (records) per block of density_independent.
const densityBlock = 128

func (d *Device) detectRecords(m *DensityModel, means, sds [][]float32, n int, p DensityParams, out []DensityVerdict) error {
	prob := make([]float64, n)
	dim := make([]int32, n)
	flag := make([]int32, n)
	err := d.do(func() (err error) {
		var xp, ep, mup, cp, ip, pp, dp, fp cu.DevicePtr
		defer func() { err = errors.Join(err, frees(xp, ep, mup, cp, ip, pp, dp, fp)) }()
		if xp, err = uploadCols("means", means, n); err != nil {
			return err
		}
		if sds != nil {
			if ep, err = uploadCols("sds", sds, n); err != nil {
				return err
			}
		}
		if mup, err = upload("model means", m.mu); err != nil {
			return err
		}
		if cp, err = upload("model coefficients", m.coef); err != nil {
			return err
		}
		if ip, err = upload("model 1/(2 var)", m.inv2); err != nil {
			return err
		}
		if pp, err = alloc("eta-probabilities", int64(n)*8); err != nil {
			return err
		}
		if dp, err = alloc("dimensions", int64(n)*4); err != nil {
			return err
		}
		if fp, err = alloc("flags", int64(n)*4); err != nil {
			return err
		}
		if err = d.launch("density_independent", [3]int{(n + densityBlock - 1) / densityBlock, 1, 1}, [3]int{densityBlock, 1, 1}, 0,
			xp, ep, int64(n), int64(m.dims), mup, cp, ip, int64(m.k), p.Eta, p.Delta, int64(p.Samples), p.Seed, p.FirstIndex,
			pp, dp, fp); err != nil {
			return err
		}
		if err = download("eta-probabilities", prob, pp); err != nil {
			return err
		}
		if err = download("dimensions", dim, dp); err != nil {
			return err
		}
		return download("flags", flag, fp)
	})
	if err != nil {
		return fmt.Errorf("gpukern.DetectRecords: %w", err)
	}
	for i := range out {
		out[i] = DensityVerdict{Outlier: flag[i] != 0, EtaProbability: prob[i], Dim: int(dim[i])}
	}
	return nil
}
