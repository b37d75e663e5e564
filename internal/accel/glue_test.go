package accel

import (
	"errors"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// TestDensityParamsModes: every CPU mode reaches the kernels as the kernels' mode of the same
// meaning, and a mode the CPU does not know is refused by gpukern before any device is used.
func TestDensityParamsModes(t *testing.T) {
	want := map[density.Mode]gpukern.DensityMode{
		density.Independent: gpukern.DensityIndependent, density.Rollup: gpukern.DensityRollup,
		density.Restricted: gpukern.DensityRestricted, density.Averaging: gpukern.DensityAveraging,
	}
	for m, g := range want {
		if got := DensityParams(density.Params{Mode: m}).Mode; got != g {
			t.Errorf("%v: kernel mode %d, want %d", m, got, g)
		}
	}
	cpu, mc := densityModel(t)
	gm, err := DensityModelOf(cpu, mc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = GPUDetectClusters(nil, gm, density.Params{Eta: 0.5, Delta: 0.5, Samples: 10, Mode: 9})
	if err == nil || errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("unknown mode: %v, want a parameter error", err)
	}
}

// TestDensityTablesRegions: the flattened regions are the CPU model's intervals in order, with
// one offset per dimension boundary.
func TestDensityTablesRegions(t *testing.T) {
	cpu, _ := densityModel(t)
	for _, eta := range []float64{0.5, 2} {
		rg, err := cpu.Regions(eta)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi, off, err := DensityTables(cpu).Regions(eta)
		if err != nil {
			t.Fatal(err)
		}
		if len(off) != len(rg)+1 || off[0] != 0 || int(off[len(rg)]) != len(lo) || len(hi) != len(lo) {
			t.Fatalf("eta %v: %d offsets, %d lo, %d hi for %d dimensions", eta, len(off), len(lo), len(hi), len(rg))
		}
		for j, iv := range rg {
			if int(off[j+1]-off[j]) != len(iv) {
				t.Fatalf("eta %v dimension %d: %d intervals, CPU %d", eta, j, off[j+1]-off[j], len(iv))
			}
			for i, x := range iv {
				if lo[off[j]+int64(i)] != x.Lo || hi[off[j]+int64(i)] != x.Hi {
					t.Fatalf("eta %v dimension %d interval %d differs", eta, j, i)
				}
			}
		}
	}
}

// densityModel is a small CPU density model over clustered synthetic data.
func densityModel(t *testing.T) (*density.Model, *microcluster.MicroClusters) {
	t.Helper()
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims, p.Seed = 2000, 3, 21
	data := synth.One(p)
	mc, _, err := microcluster.Cluster(data.Cols, data.SD, 30, 4, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := density.Bandwidths(mc)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := density.NewModel(mc, h)
	if err != nil {
		t.Fatal(err)
	}
	return cpu, mc
}
