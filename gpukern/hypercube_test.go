package gpukern_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// TestHypercubeParity: the GPU's cells, counts, row cells, densities, w_max and scores equal
// hypercube.Detect's exactly (integer counts, and the same float64 formula for the scores), on
// random and adversarial data.
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
			want, err := hypercube.Detect(cols, hypercube.Params{Bins: c.bins, MinSplit: c.minSplit})
			if err != nil {
				t.Fatal(err)
			}
			got, err := gpukern.Hypercube(d, cols, gpukern.HypercubeParams{Bins: c.bins, MinSplit: c.minSplit})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Cells.Keys, want.Cells.Keys) || !slices.Equal(got.Cells.Count, want.Cells.Count) {
				t.Fatalf("cells differ: GPU %d, CPU %d", got.Cells.Len(), want.Cells.Len())
			}
			if i := firstDiff(got.Cells.RowCell, want.Cells.RowCell); i >= 0 {
				t.Fatalf("row %d: GPU cell %d, CPU %d", i, got.Cells.RowCell[i], want.Cells.RowCell[i])
			}
			if i := firstDiff(got.W, want.W); i >= 0 {
				t.Fatalf("cell %d: GPU w %d, CPU %d", i, got.W[i], want.W[i])
			}
			if got.WMax != want.WMax {
				t.Fatalf("w_max: GPU %d, CPU %d", got.WMax, want.WMax)
			}
			if i := firstDiff(got.Scores, want.Scores); i >= 0 {
				t.Fatalf("row %d: GPU score %v, CPU %v", i, got.Scores[i], want.Scores[i])
			}
			t.Logf("%d cells, w_max %d", got.Cells.Len(), got.WMax)
		})
	}
}

func TestHypercubeErrors(t *testing.T) {
	if _, err := gpukern.Hypercube(nil, [][]float32{{0, 1}}, gpukern.HypercubeParams{Bins: 7}); !errors.Is(err, gpukern.ErrNoDevice) {
		t.Errorf("nil device: %v, want ErrNoDevice", err)
	}
	wide := make([][]float32, hypercube.MaxDims+1)
	for j := range wide {
		wide[j] = []float32{0, 1}
	}
	for name, run := range map[string]func() error{
		"bins=1": func() error {
			_, err := gpukern.Hypercube(nil, [][]float32{{0, 1}}, gpukern.HypercubeParams{Bins: 1})
			return err
		},
		"129 dims": func() error { _, err := gpukern.Hypercube(nil, wide, gpukern.HypercubeParams{Bins: 7}); return err },
		"ragged": func() error {
			_, err := gpukern.Hypercube(nil, [][]float32{{0, 1}, {0}}, gpukern.HypercubeParams{Bins: 7})
			return err
		},
	} {
		err := run()
		if err == nil || errors.Is(err, gpukern.ErrNoDevice) {
			t.Errorf("%s: %v, want an input error before the device is used", name, err)
		}
	}
}

// The benchmark data: uniform in [0,1]^d in the shapes of the paper's SuSy (5,000,000 x 18) and
// Higgs (10,000,000 x 28; the paper's Higgs has 11,000,000 rows), generated once per process.
var hcData = map[string]func() [][]float32{
	"5Mx18":  sync.OnceValue(func() [][]float32 { return testcols.Uniform(rand.New(rand.NewPCG(18, 1)), 5_000_000, 18) }),
	"10Mx28": sync.OnceValue(func() [][]float32 { return testcols.Uniform(rand.New(rand.NewPCG(28, 1)), 10_000_000, 28) }),
}

// BenchmarkHypercube: b = 7, MinSplit 20 (the paper's GPU settings), GPU through the host entry
// point (fit, transfers, host sort and tree included; the per-step times are reported), and the
// CPU twin (every core) on the same machine.
func BenchmarkHypercube(b *testing.B) {
	for _, shape := range []string{"5Mx18", "10Mx28"} {
		b.Run("gpu-"+shape, func(b *testing.B) {
			d := openDevice(b)
			cols := hcData[shape]()
			p := gpukern.HypercubeParams{Bins: 7}
			if _, err := gpukern.Hypercube(d, cols, p); err != nil { // warm-up: JIT, first allocations
				b.Fatal(err)
			}
			b.ResetTimer()
			var res *gpukern.HypercubeResult
			var err error
			var tm gpukern.HypercubeTimings
			for range b.N {
				if res, err = gpukern.Hypercube(d, cols, p); err != nil {
					b.Fatal(err)
				}
				tm.Fit += res.Timings.Fit
				tm.Encode += res.Timings.Encode
				tm.Distinct += res.Timings.Distinct
				tm.Tree += res.Timings.Tree
				tm.Search += res.Timings.Search
				tm.Finish += res.Timings.Finish
			}
			n := float64(b.N)
			b.ReportMetric(float64(res.Cells.Len()), "cells")
			b.ReportMetric(float64(res.WMax), "w_max")
			b.ReportMetric(tm.Fit.Seconds()*1e3/n, "fit-ms")
			b.ReportMetric(tm.Encode.Seconds()*1e3/n, "encode-ms")
			b.ReportMetric(tm.Distinct.Seconds()*1e3/n, "sort-ms")
			b.ReportMetric(tm.Tree.Seconds()*1e3/n, "tree-ms")
			b.ReportMetric(tm.Search.Seconds()*1e3/n, "search-ms")
			b.ReportMetric(tm.Finish.Seconds()*1e3/n, "finish-ms")
		})
		b.Run("cpu-"+shape, func(b *testing.B) {
			if ok, _ := gpukern.Available(); !ok || os.Getenv("GPUKERN_SKIP_CPU") == "1" {
				b.Skip("the CPU twin is timed only on the GPU machine, beside the GPU")
			}
			cols := hcData[shape]()
			b.ResetTimer()
			for range b.N {
				res, err := hypercube.Detect(cols, hypercube.Params{Bins: 7})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Cells.Len()), "cells")
			}
		})
	}
}
