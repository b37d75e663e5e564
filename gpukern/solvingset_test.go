package gpukern_test

import (
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// TestSolvingSetParity: the GPU returns the CPU twin's top-n exactly: the same rows with
// bit-identical weights and the same w*. This holds by construction: weights are canonical
// (ascending float64 sums of the same float32 distances), pruning is conservative in both, and
// every top-n point enters any solving set. The solving sets themselves are compared only in the
// log: they depend on the upper bounds' last bits, i.e. on the heap storage order, which the CPU
// twin is free to change (its batch heap fill of not-yet-full heaps already differs from the GPU's
// one-by-one inserts), so they may differ where two upper bounds tie to within rounding.
func TestSolvingSetParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name string
		cols [][]float32
		p    solvingset.Params
	}{
		{"g2d 30k", synth.G2D(30000, 11).Cols, solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}},
		{"g3d 20k k=5", synth.G3D(20000, 12).Cols, solvingset.Params{K: 5, N: 10, M: 100, Seed: 2}},
		{"10-D 8k n=25 m=37", synth.Gaussian(8000, 10, 13).Cols, solvingset.Params{K: 10, N: 25, M: 37, Seed: 3}},
		{"ties: 2-D grid", gridCols(60), solvingset.Params{K: 4, N: 7, M: 50, Seed: 4}},
		// the sanitizers' cases (racecheck takes minutes on the others): every kernel, the
		// selection's radix passes over ties (m < the slice's active points), 2-D and 10-D
		{"small: 2-D grid 24x24", gridCols(24), solvingset.Params{K: 4, N: 5, M: 20, Seed: 8}},
		{"small: 10-D 1500", synth.Gaussian(1500, 10, 17).Cols, solvingset.Params{K: 10, N: 5, M: 20, Seed: 9}},
		{"k=1 m=1", synth.G2D(3000, 14).Cols, solvingset.Params{K: 1, N: 3, M: 1, Seed: 5}},
		{"6-D 6k k=100 (CandNN queue of 256)", synth.Gaussian(6000, 6, 15).Cols, solvingset.Params{K: 100, N: 10, M: 60, Seed: 6}},
		{"g2d 300k (several CandNN early-exit steps)", synth.G2D(300000, 16).Cols, solvingset.Params{K: 50, N: 10, M: 100, Seed: 7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && len(c.cols[0]) > 100_000 {
				t.Skip("short: the sanitizer runs of gpucheck.sh skip the large case")
			}
			want, err := solvingset.SolvingSet(c.cols, c.p, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gpukern.SolvingSet(d, c.cols, gpuParams(c.p, len(c.cols[0])))
			if err != nil {
				t.Fatal(err)
			}
			if math.Float64bits(got.WStar) != math.Float64bits(want.WStar) {
				t.Errorf("w*: GPU %v, CPU %v", got.WStar, want.WStar)
			}
			if len(got.Outliers) != len(want.Outliers) {
				t.Fatalf("GPU %d outliers, CPU %d\nGPU %v\nCPU %v", len(got.Outliers), len(want.Outliers), got.Outliers, want.Outliers)
			}
			for i, o := range want.Outliers {
				g := got.Outliers[i]
				if g.Row != o.Row || math.Float64bits(g.Weight) != math.Float64bits(o.Weight) {
					t.Errorf("outlier %d: GPU row %d weight %v, CPU row %d weight %v", i, g.Row, g.Weight, o.Row, o.Weight)
				}
			}
			t.Logf("GPU %d iterations |S|=%d, CPU %d iterations |S|=%d, identical solving sets: %v",
				got.Iterations, len(got.SolvingSet), want.Iterations, len(want.SolvingSet), slices.Equal(got.SolvingSet, want.SolvingSet))
		})
	}
}

// gpuParams is internal/accel's conversion: the CPU twin's first candidates and pruning margin.
func gpuParams(p solvingset.Params, rows int) gpukern.SolvingSetParams {
	return gpukern.SolvingSetParams{K: p.K, N: p.N, M: p.M,
		First: solvingset.FirstCandidates(rows, min(p.M, rows), p.Seed), Margin: solvingset.PruneMargin(p.K),
		Out: solvingset.NewTopN(p.N)}
}

// gridCols is an n x n integer grid in 2-D: massive ties in distances, weights and UB.
func gridCols(n int) [][]float32 {
	cols := [][]float32{make([]float32, n*n), make([]float32, n*n)}
	for i := range n * n {
		cols[0][i], cols[1][i] = float32(i%n), float32(i/n)
	}
	return cols
}

func TestSolvingSetBadParams(t *testing.T) {
	cols := synth.G2D(100, 1).Cols
	nan := [][]float32{{0, 1, float32(math.NaN())}, {0, 1, 2}}
	cases := []struct {
		name string
		cols [][]float32
		p    gpukern.SolvingSetParams
	}{
		{"k=0", cols, gpukern.SolvingSetParams{K: 0, N: 1, M: 10}},
		{"k=rows", cols, gpukern.SolvingSetParams{K: 100, N: 1, M: 10}},
		{"n=0", cols, gpukern.SolvingSetParams{K: 5, N: 0, M: 10}},
		{"m=0", cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 0}},
		{"m too big", synth.Gaussian(20000, 10, 1).Cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 5000}},
		{"NaN", nan, gpukern.SolvingSetParams{K: 1, N: 1, M: 1, First: []int{0}, Margin: 1, Out: solvingset.NewTopN(1)}},
		{"no first candidates", cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 10, Margin: 1}},
		{"first candidate out of range", cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 1, First: []int{100}, Margin: 1, Out: solvingset.NewTopN(1)}},
		{"repeated first candidate", cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 2, First: []int{3, 3}, Margin: 1, Out: solvingset.NewTopN(1)}},
		{"margin below 1", cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 1, First: []int{0}, Margin: 0.5, Out: solvingset.NewTopN(1)}},
		{"no OUT", cols, gpukern.SolvingSetParams{K: 5, N: 1, M: 1, First: []int{0}, Margin: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := gpukern.SolvingSet(nil, c.cols, c.p); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// BenchmarkSolvingSetG2D: the brief's target, g2d 1,000,000 x 2, n=10, k=50, m=100, through the
// host entry point (upload included); the CPU twin on the same machine for the speed-up.
func BenchmarkSolvingSet(b *testing.B) {
	for _, c := range []struct {
		name string
		data *synth.Data
	}{
		{"g2d-1M", synth.G2D(1_000_000, 1)},
		{"gauss10d-1M", synth.Gaussian(1_000_000, 10, 2)},
	} {
		p := solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}
		gp := gpuParams(p, len(c.data.Cols[0]))
		b.Run("gpu-"+c.name, func(b *testing.B) {
			d := openDevice(b)
			run := func() (gpukern.SolvingSetResult, error) {
				gp.Out = solvingset.NewTopN(p.N) // OUT is per call (inside gpukern.SolvingSet before)
				return gpukern.SolvingSet(d, c.data.Cols, gp)
			}
			res, err := run() // warm-up
			if err != nil {
				b.Fatal(err)
			}
			before := d.KernelTimes()
			b.ResetTimer()
			for range b.N {
				if _, err := run(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(res.Iterations), "iterations")
			b.ReportMetric(float64(len(res.SolvingSet)), "|S|")
			reportKernelTimes(b, before, d.KernelTimes(), res.Iterations)
		})
		b.Run("cpu-"+c.name, func(b *testing.B) {
			if ok, _ := gpukern.Available(); !ok || os.Getenv("GPUKERN_SKIP_CPU") == "1" {
				b.Skip("the CPU reference is timed only on the GPU machine, in its own step of gpucheck.sh")
			}
			for range b.N {
				if _, err := solvingset.SolvingSet(c.data.Cols, p, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reportKernelTimes reports where a run's time goes (issue 22): each kernel's GPU time per run
// (CUDA events around every launch) as "<kernel>-ms", their sum as "kernels-ms", and the rest of
// the wall time, the host's share (the upload, allocations, launches, copies and their
// synchronisation, the device's do), per run as "host-ms" and per
// iteration as "host-us/iter".
func reportKernelTimes(b *testing.B, before, after map[string]gpukern.KernelTotal, iterations int) {
	var sum time.Duration
	for name, t := range after {
		dt := t.Time - before[name].Time
		if dt <= 0 {
			continue
		}
		sum += dt
		b.ReportMetric(dt.Seconds()*1e3/float64(b.N), name+"-ms")
	}
	b.ReportMetric(sum.Seconds()*1e3/float64(b.N), "kernels-ms")
	host := b.Elapsed() - sum
	b.ReportMetric(host.Seconds()*1e3/float64(b.N), "host-ms")
	if iterations > 0 {
		b.ReportMetric(host.Seconds()*1e6/float64(b.N)/float64(iterations), "host-us/iter")
	}
}
