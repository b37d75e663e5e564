package gpukern_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// TestHypercubeParity: hc_encode's keys equal hypercube.Grid.Encode's and hc_density's cell
// densities equal hypercube.Tree.Density's exactly (integer counts), on random and adversarial
// data; the whole detector (host steps in internal/accel) is TestHypercubeGPUMatchesCPU there.
func TestHypercubeParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name     string
		bins     int
		minSplit int
		make     func(r *rand.Rand) [][]float32
	}{
		{"uniform 200k x 10 b=7", 7, 0, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 200_000, 10) }},
		{"blobs 100k x 18 b=7", 7, 0, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 100_000, 18, 6) }},
		{"blobs 50k x 28 b=7 full tree", 7, 1, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 50_000, 28, 5) }},
		{"blobs 30k x 6 b=7 one leaf", 7, 1 << 30, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 30_000, 6, 4) }},
		{"d=128 b=7 uniform", 7, 0, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 5000, 128) }},
		{"d=128 b=3 clustered", 3, 0, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 5000, 128, 3) }},
		{"b=2", 2, 0, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 20000, 12) }},
		{"b=65536 multi-word", hypercube.MaxBins, 0, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 20000, 9, 3) }},
		{"one dimension", 7, 0, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 10000, 1, 3) }},
		{"duplicates", 5, 0, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 30000, 6)
			for j := range c {
				for i := range c[j] {
					c[j][i] = c[j][i%13]
				}
			}
			return c
		}},
		{"all points in one cell", 7, 0, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 4000, 3)
			for j := range c {
				for i := range c[j] {
					c[j][i] = 2.5
				}
			}
			return c
		}},
		{"empty neighbours b=200", 200, 0, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 3000, 5) }},
		{"x at bin edges and 1.0", 4, 0, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 10000, 4)
			for j := range c {
				for i := range c[j] {
					c[j][i] = float32(r.IntN(9)) / 8
				}
			}
			return c
		}},
		{"one row", 7, 0, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 1, 4) }},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cols := c.make(newRand(t, uint64(500+ci)))
			rows := len(cols[0])
			grid, err := hypercube.FitGrid(cols, c.bins)
			if err != nil {
				t.Fatal(err)
			}
			gg := accel.HypercubeGrid(grid)
			want := make([]uint64, rows*grid.Words())
			grid.Encode(cols, want)
			got := make([]uint64, len(want))
			if err := gpukern.HypercubeEncode(d, cols, gg, got); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("key word %d (row %d): GPU %#x, CPU %#x", i, i/grid.Words(), got[i], want[i])
			}
			cells := hypercube.Distinct(grid, want, rows)
			minSplit := c.minSplit
			if minSplit == 0 {
				minSplit = hypercube.DefaultMinSplit
			}
			tree, err := hypercube.BuildTree(cells, minSplit)
			if err != nil {
				t.Fatal(err)
			}
			wantW := make([]int64, cells.Len())
			tree.Density(cells, wantW, 0)
			gotW := make([]int64, cells.Len())
			if err := gpukern.HypercubeDensity(d, gg, cells.Keys, cells.Count, accel.HypercubeNodes(tree), gotW); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(gotW, wantW); i >= 0 {
				t.Fatalf("cell %d: GPU w %d, CPU %d", i, gotW[i], wantW[i])
			}
			t.Logf("%d cells, %d tree nodes", cells.Len(), len(tree.Nodes))
		})
	}
}

func TestHypercubeErrors(t *testing.T) {
	cols := [][]float32{{0, 1}}
	grid, err := hypercube.FitGrid(cols, 7)
	if err != nil {
		t.Fatal(err)
	}
	gg := accel.HypercubeGrid(grid)
	if err := gpukern.HypercubeEncode(nil, cols, gg, make([]uint64, 2)); !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("nil device: %v, want ErrNoDevice", err)
	}
	wide := make([][]float32, gpukern.HypercubeMaxDims+1)
	for j := range wide {
		wide[j] = []float32{0, 1}
	}
	one := []gpukern.HypercubeNode{{Leaf: true, Brk: 1, Up: 1, Lo: 0, Hi: 1}}
	for name, run := range map[string]func() error{
		"129 dims": func() error { return gpukern.HypercubeEncode(nil, wide, gg, make([]uint64, 2)) },
		"ragged":   func() error { return gpukern.HypercubeEncode(nil, [][]float32{{0, 1}, {0}}, gg, make([]uint64, 2)) },
		"grid of other dimensions": func() error {
			return gpukern.HypercubeEncode(nil, [][]float32{{0, 1}, {0, 1}}, gg, make([]uint64, 2))
		},
		"short keys": func() error { return gpukern.HypercubeEncode(nil, cols, gg, make([]uint64, 1)) },
		"keys and counts differ": func() error {
			return gpukern.HypercubeDensity(nil, gg, []uint64{1, 2}, []int32{1}, one, make([]int64, 1))
		},
		"short densities": func() error {
			return gpukern.HypercubeDensity(nil, gg, []uint64{1}, []int32{1}, one, nil)
		},
		"no tree": func() error { return gpukern.HypercubeDensity(nil, gg, []uint64{1}, []int32{1}, nil, make([]int64, 1)) },
	} {
		err := run()
		if err == nil || errors.Is(err, gpukern.ErrNoDevice) {
			t.Errorf("%s: %v, want an input error before the device is used", name, err)
		}
	}
}
