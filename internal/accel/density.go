package accel

import (
	"errors"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
)

// The density glue: the CPU model's host tables, parameters and verdicts in gpukern's types.

// DensityModelOf is the GPU model of cpu = density.NewModel(mc, cpu.H): the same tuples and
// bandwidths, and cpu's exact-method regions and density bounds table (built once per model).
func DensityModelOf(cpu *density.Model, mc *microcluster.MicroClusters) (*gpukern.DensityModel, error) {
	if cpu == nil || mc == nil {
		return nil, errors.New("accel.DensityModelOf: nil model")
	}
	return gpukern.NewDensityModel(&gpukern.ClusterFeatures{CF1: mc.CF1, CF2: mc.CF2, EF2: mc.EF2, N: mc.N}, cpu.H, DensityTables(cpu))
}

// DensityTables is m's host tables as the density kernels take them.
func DensityTables(m *density.Model) gpukern.DensityTables { return densityTables{m} }

type densityTables struct{ m *density.Model }

// Regions flattens m.Regions(eta): dimension j's intervals are lo/hi[off[j]:off[j+1]].
func (t densityTables) Regions(eta float64) (lo, hi []float64, off []int64, err error) {
	rg, err := t.m.Regions(eta)
	if err != nil {
		return nil, nil, nil, err
	}
	off = make([]int64, len(rg)+1)
	for j, iv := range rg {
		for _, x := range iv {
			lo, hi = append(lo, x.Lo), append(hi, x.Hi)
		}
		off[j+1] = int64(len(lo))
	}
	return lo, hi, off, nil
}

// Bounds is m.Bounds() (the same slices).
func (t densityTables) Bounds() *gpukern.DensityBounds {
	b := t.m.Bounds()
	return &gpukern.DensityBounds{Cells: b.Cells, Origin: b.Origin, InvStep: b.InvStep, Lower: b.Lower, Upper: b.Upper}
}

// densityModes maps the CPU's modes to the kernels' (the kernels take the number, so each is
// named here rather than converted).
var densityModes = map[density.Mode]gpukern.DensityMode{
	density.Independent: gpukern.DensityIndependent,
	density.Rollup:      gpukern.DensityRollup,
	density.Restricted:  gpukern.DensityRestricted,
	density.Averaging:   gpukern.DensityAveraging,
}

// DensityParams is p as the kernels' parameters (Workers has no GPU meaning). An unknown mode
// stays unknown (-1), and gpukern refuses it as density.Params.Validate does.
func DensityParams(p density.Params) gpukern.DensityParams {
	mode, ok := densityModes[p.Mode]
	if !ok {
		mode = -1
	}
	return gpukern.DensityParams{Eta: p.Eta, Delta: p.Delta, Samples: p.Samples, Mode: mode, Seed: p.Seed,
		FirstIndex: p.FirstIndex, Index: p.Index, Exact: p.Exact}
}

// GPUDetectRecords is gm's gpukern.DetectRecords with the CPU's parameters and verdicts.
func GPUDetectRecords(g *gpukern.Device, gm *gpukern.DensityModel, means, sds [][]float32, p density.Params, out []density.Verdict) error {
	v := make([]gpukern.DensityVerdict, len(out))
	if err := gpukern.DetectRecords(g, gm, means, sds, DensityParams(p), v); err != nil {
		return err
	}
	for i, x := range v {
		out[i] = density.Verdict(x)
	}
	return nil
}

// GPUDetectClusters is gm's gpukern.DetectClusters with the CPU's parameters and verdicts.
func GPUDetectClusters(g *gpukern.Device, gm *gpukern.DensityModel, p density.Params) ([]density.Verdict, error) {
	v, err := gpukern.DetectClusters(g, gm, DensityParams(p))
	if err != nil {
		return nil, err
	}
	out := make([]density.Verdict, len(v))
	for i, x := range v {
		out[i] = density.Verdict(x)
	}
	return out, nil
}
