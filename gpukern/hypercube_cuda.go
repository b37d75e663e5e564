//go:build cuda

package gpukern

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// hcBlock is the number of threads (rows, or cells) per block of both kernels (the paper's 256).
const hcBlock = 256

// hypercubeEncode uploads the columns and the grid and downloads the packed keys of every row.
func (d *Device) hypercubeEncode(cols [][]float32, g *HypercubeGrid, keys []uint64) error {
	rows := len(cols[0])
	err := d.do(func() (err error) {
		var xp, lp, sp, kp cu.DevicePtr
		defer func() { err = errors.Join(err, frees(xp, lp, sp, kp)) }()
		if xp, err = uploadCols(d, "columns", cols, rows); err != nil {
			return err
		}
		if lp, err = upload(d, "grid minima", g.Min); err != nil {
			return err
		}
		if sp, err = upload(d, "grid scales", g.Scale); err != nil {
			return err
		}
		if kp, err = alloc("keys", int64(len(keys))*8); err != nil {
			return err
		}
		if rows == 0 {
			return nil
		}
		grid := (rows + hcBlock - 1) / hcBlock
		a := hcEncodeParams{X: uint64(xp), N: int64(rows), D: int64(len(cols)), Lo: uint64(lp), Scale: uint64(sp),
			Bins: int64(g.Bins), Bits: int64(g.Bits), Per: int64(g.PerWord), W: int64(g.Words), Keys: uint64(kp)}
		if err = launchParams(d, "hc_encode", [3]int{grid, 1, 1}, [3]int{hcBlock, 1, 1}, 0, &a); err != nil {
			return err
		}
		return download(d, "keys", keys, kp)
	})
	if err != nil {
		return fmt.Errorf("hc_encode: %w", err)
	}
	return nil
}

// hypercubeDensity uploads the distinct cells and the tree and downloads w of every cell.
func (d *Device) hypercubeDensity(g *HypercubeGrid, keys []uint64, count []int32, nodes []HypercubeNode, w []int64) error {
	ncell := len(count)
	quad, hi := hcNodes(nodes)
	loc := make([]int32, len(g.Min))
	for j := range loc {
		loc[j] = int32(j/g.PerWord)<<8 | int32((g.PerWord-1-j%g.PerWord)*g.Bits)
	}
	masks := append(g.SWAR[0][:], g.SWAR[1][:]...)
	err := d.do(func() (err error) {
		var kp, cp, np, hp, lp, mp, wp cu.DevicePtr
		defer func() { err = errors.Join(err, frees(kp, cp, np, hp, lp, mp, wp)) }()
		if kp, err = upload(d, "cell keys", keys); err != nil {
			return err
		}
		if cp, err = upload(d, "cell counts", count); err != nil {
			return err
		}
		if np, err = upload(d, "tree nodes", quad); err != nil {
			return err
		}
		if hp, err = upload(d, "tree leaf ends", hi); err != nil {
			return err
		}
		if lp, err = upload(d, "dimension locations", loc); err != nil {
			return err
		}
		if mp, err = upload(d, "neighbour masks", masks); err != nil {
			return err
		}
		if wp, err = alloc("densities", int64(ncell)*8); err != nil {
			return err
		}
		grid := (ncell + hcBlock - 1) / hcBlock
		a := hcDensityParams{Keys: uint64(kp), Count: uint64(cp), NCell: int64(ncell), Nodes: uint64(np), Hi: uint64(hp),
			NNodes: int64(len(nodes)), D: int64(len(g.Min)), Bits: int64(g.Bits), Loc: uint64(lp), W: int64(g.Words),
			Masks: uint64(mp), Out: uint64(wp)}
		if err = launchParams(d, "hc_density", [3]int{grid, 1, 1}, [3]int{hcBlock, 1, 1}, 0, &a); err != nil {
			return err
		}
		return download(d, "densities", w, wp)
	})
	if err != nil {
		return fmt.Errorf("hc_density: %w", err)
	}
	return nil
}
