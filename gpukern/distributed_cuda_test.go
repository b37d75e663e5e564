//go:build cuda

package gpukern_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// TestDistributedParityShares: nodes made together (NewDistributedNodes, as internal/accel makes
// them) each run their share of one device's ss_candpart slices (nodeCandSlices: 4 and 3 at 2
// and 3 nodes here, against one device's 7), and the run returns the CPU SolvingSet's top-n and
// w* bit for bit and the CPU nodes' solving set iteration by iteration. TestDistributedParity
// makes its nodes one by one, which keeps one device's count over each node's rows (1 slice at
// its sizes), so this is the only parity test of the split.
func TestDistributedParityShares(t *testing.T) {
	if testing.Short() {
		t.Skip("60,000 rows: beyond the sanitizers' time (gpucheck.sh runs them with -test.short)")
	}
	devs := allDevices(t)
	cols := synth.G2D(60000, 21).Cols
	rows := len(cols[0])
	p := solvingset.Params{K: 10, N: 10, M: 100, Seed: 2}
	want, err := solvingset.SolvingSet(cols, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, nodes := range []int{2, 3} {
		one, share := gpukern.CandSlicesForTest(rows, p.M), gpukern.NodeCandSlicesForTest(rows/nodes, rows, p.M)
		if !(1 < share && share < one) {
			t.Fatalf("%d nodes: %d slices a node against one device's %d: the case is not made", nodes, share, one)
		}
		ds := make([]*gpukern.Device, nodes) // several nodes may share a device
		for i := range ds {
			ds[i] = devs[i%len(devs)]
		}
		owned, err := gpukern.NewDistributedNodes(ds, cols, p.K, p.M, solvingset.PruneMargin(p.K))
		if err != nil {
			t.Fatal(err)
		}
		got, err := solvingset.DistributedSolvingSet(accel.SolvingSetNodes(owned), len(cols), p, false)
		for _, n := range owned {
			err = errors.Join(err, n.Close())
		}
		if err != nil {
			t.Fatalf("%d nodes: %v", nodes, err)
		}
		if got.WStar != want.WStar || !slices.Equal(got.Outliers, want.Outliers) {
			t.Errorf("%d nodes: w* %v outliers %v; CPU SolvingSet %v %v", nodes, got.WStar, got.Outliers, want.WStar, want.Outliers)
		}
		cpu, err := solvingset.DistributedSolvingSet(cpuNodes(cols, nodes, p.K), len(cols), p, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.SolvingSet, cpu.SolvingSet) || got.Iterations != cpu.Iterations {
			t.Errorf("%d nodes: solving set of %d rows in %d iterations; CPU nodes %d in %d", nodes, len(got.SolvingSet), got.Iterations, len(cpu.SolvingSet), cpu.Iterations)
		}
		t.Logf("%d nodes on %d device(s): %d slices a node (one device %d), %d iterations, |S| %d", nodes, len(devs), share, one, got.Iterations, len(got.SolvingSet))
	}
}
