package gpukern_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// gpuNodes makes DistributedNodes over consecutive, nearly equal partitions of cols, node i on
// devs[i % len(devs)].
func gpuNodes(t testing.TB, devs []*gpukern.Device, cols [][]float32, nodes, k, m int) []solvingset.Node {
	t.Helper()
	rows := len(cols[0])
	var out []solvingset.Node
	for i := range nodes {
		lo, hi := rows*i/nodes, rows*(i+1)/nodes
		part := make([][]float32, len(cols))
		for j := range cols {
			part[j] = cols[j][lo:hi]
		}
		n, err := gpukern.NewDistributedNode(devs[i%len(devs)], part, k, m, solvingset.PruneMargin(k))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		out = append(out, n)
	}
	return out
}

// allDevices opens every device (at least device 0, else the test skips).
func allDevices(t testing.TB) []*gpukern.Device {
	t.Helper()
	devs := []*gpukern.Device{openDevice(t)}
	for i := 1; ; i++ {
		d, err := gpukern.Open(i)
		if errors.Is(err, gpukern.ErrNoDevice) {
			return devs
		}
		if err != nil {
			t.Fatalf("Open(%d): %v", i, err)
		}
		t.Cleanup(func() { d.Close() })
		devs = append(devs, d)
	}
}

// TestDistributedParity: the distributed solving set on GPU nodes (1 to 3 nodes, spread over
// every device there is; several nodes may share one) returns the CPU SolvingSet's top-n rows,
// weights (bit for bit) and w*, lazy or not. Sizes are kept small enough for racecheck
// (gpucheck.sh runs the Parity tests under it).
func TestDistributedParity(t *testing.T) {
	devs := allDevices(t)
	t.Logf("%d device(s)", len(devs))
	for _, c := range []struct {
		name string
		cols [][]float32
		p    solvingset.Params
	}{
		{"g2d 12k", synth.G2D(12000, 11).Cols, solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}},
		{"10-D 8k n=25 m=37", synth.Gaussian(8000, 10, 13).Cols, solvingset.Params{K: 10, N: 25, M: 37, Seed: 3}},
		{"ties: 2-D grid", gridCols(60), solvingset.Params{K: 4, N: 7, M: 50, Seed: 4}},
	} {
		want, err := solvingset.SolvingSet(c.cols, c.p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range []struct {
			nodes int
			lazy  bool
		}{{1, false}, {2, true}, {3, false}, {3, true}} {
			nodes, lazy := run.nodes, run.lazy
			{
				label := fmt.Sprintf("%s nodes=%d lazy=%v", c.name, nodes, lazy)
				got, err := solvingset.DistributedSolvingSet(gpuNodes(t, devs, c.cols, nodes, c.p.K, c.p.M), len(c.cols), c.p, lazy)
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				if got.WStar != want.WStar || !slices.Equal(got.Outliers, want.Outliers) {
					t.Errorf("%s: w* %v outliers %v; CPU SolvingSet %v %v", label, got.WStar, got.Outliers, want.WStar, want.Outliers)
				}
				t.Logf("%s: %d iterations, |S| %d, %d list values, %d refetches (CPU: %d, %d)", label, got.Iterations, len(got.SolvingSet),
					got.ListValues, got.Refetches, want.Iterations, len(want.SolvingSet))
			}
		}
	}
}

// BenchmarkDistributedSolvingSet: SolvingSet on 10,000,000 points (2-D and 10-D Gaussians, k=50,
// n=10, m=100): one device (gpukern.SolvingSet), and the distributed solving set with one node
// per device over 1 and all devices, in one run. b.N is the number of full runs; the log line
// gives the medians.
func BenchmarkDistributedSolvingSet(b *testing.B) {
	devs := allDevices(b)
	for _, dims := range []int{2, 10} {
		cols := synth.Gaussian(10_000_000, dims, 21).Cols
		p := solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}
		b.Run(fmt.Sprintf("d=%d/one-device", dims), func(b *testing.B) {
			var times []time.Duration
			for range b.N {
				t0 := time.Now()
				if _, err := gpukern.SolvingSet(devs[0], cols, gpuParams(p, len(cols[0]))); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			b.Logf("median %s over %d runs", median(times), len(times))
		})
		for _, nd := range slices.Compact([]int{1, len(devs)}) {
			b.Run(fmt.Sprintf("d=%d/distributed-%d", dims, nd), func(b *testing.B) {
				nodes := gpuNodes(b, devs[:nd], cols, nd, p.K, p.M)
				var times []time.Duration
				for range b.N {
					// A run moves rows into S: fresh nodes for every run but the first.
					if len(times) > 0 {
						nodes = gpuNodes(b, devs[:nd], cols, nd, p.K, p.M)
					}
					t0 := time.Now()
					r, err := solvingset.DistributedSolvingSet(nodes, dims, p, true)
					if err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(t0))
					b.Logf("%d iterations, |S| %d, w* %v", r.Iterations, len(r.SolvingSet), r.WStar)
				}
				b.Logf("median %s over %d runs (node upload excluded)", median(times), len(times))
			})
		}
	}
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}
