//go:build cuda

package gpukern_test

import (
	"testing"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/algo/quality"
)

// TestProclusRestartsParity is issue 24's GPU twin: on planted subspace clusters of the issue's
// shape (internal/algo/proclus TestRestartsRecoverPlanted) the GPU's restarts, run
// ProclusConcurrentRuns at a time on one uploaded data set, keep the same restart with the same
// medoids, subspaces, assignment and costs as the CPU's for every seed 1..20, and recover the
// planted partition (ARI >= 0.95, the target); one restart at a time gives the same.
func TestProclusRestartsParity(t *testing.T) {
	d := openDevice(t)
	for _, g := range []uint64{1, 3} {
		pl, err := proclus.GeneratePlanted(10100, 20, 5, 4, 1.5, 100.0/10100, g)
		if err != nil {
			t.Fatal(err)
		}
		data, err := proclus.Prepare(pl.Cols)
		if err != nil {
			t.Fatal(err)
		}
		pd, err := d.UploadProclus(pl.Cols)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(1); seed <= 20; seed++ {
			p := proclus.Default()
			p.K, p.L, p.Seed = 5, 4, seed
			cpu, err := proclus.Run(pl.Cols, p)
			if err != nil {
				t.Fatal(err)
			}
			gpu, err := accel.RunProclus(pd, data, p)
			if err != nil {
				t.Fatal(err)
			}
			sameResult(t, "restarts", cpu, gpu)
			if gpu.Restart != cpu.Restart {
				t.Errorf("generator %d seed %d: GPU kept restart %d, CPU %d", g, seed, gpu.Restart, cpu.Restart)
			}
			if ari := quality.AdjustedRandIndex(gpu.Assignment, pl.Label); ari < 0.95 {
				t.Errorf("generator %d seed %d: GPU ARI %.4f < 0.95 (restart %d, costs %v)", g, seed, ari, gpu.Restart, gpu.RestartCosts)
			}
			if seed <= 3 {
				one, err := accel.RunProclusWith(pd, data, p, 1)
				if err != nil {
					t.Fatal(err)
				}
				sameResult(t, "restarts one at a time", cpu, one)
			}
		}
		if err := pd.Free(); err != nil {
			t.Fatal(err)
		}
	}
}
