//go:build cuda

package accel

import (
	"math/rand/v2"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// TestHypercubeGPUMatchesCPU: the hypercube detector with the host steps here and the kernels on
// the GPU gives hypercube.Detect's result exactly (grid, cells, row cells, w, w_max, scores); the
// kernels' own parity over adversarial data is gpukern's TestHypercubeParity.
func TestHypercubeGPUMatchesCPU(t *testing.T) {
	dev := openGPU(t)
	r := rand.New(rand.NewPCG(11, 12))
	cases := []struct {
		name     string
		cols     [][]float32
		bins     int
		minSplit int
	}{
		{"blobs 100k x 18 b=7", testcols.Blobs(r, 100_000, 18, 6), 7, 0},
		{"uniform 20k x 12 b=2 full tree", testcols.Uniform(r, 20_000, 12), 2, 1},
		{"blobs 20k x 9 b=65536 multi-word", testcols.Blobs(r, 20_000, 9, 3), hypercube.MaxBins, 0},
		{"one row", testcols.Uniform(r, 1, 4), 7, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := hypercube.Params{Bins: c.bins, MinSplit: c.minSplit}
			want, err := hypercube.Detect(c.cols, p)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := gpuHypercube(dev.gpu, c.cols, p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("results differ: GPU %d cells w_max %d, CPU %d cells w_max %d", got.Cells.Len(), got.WMax, want.Cells.Len(), want.WMax)
			}
		})
	}
	res, err := dev.Hypercube(cases[0].cols, 7)
	if err != nil || res.Cells.Len() == 0 {
		t.Fatalf("Device.Hypercube: %v", err)
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Errorf("%d calls fell back to the CPU: the GPU path was not the one compared", f)
	}
}

// The benchmark data: uniform in [0,1]^d in the shapes of the paper's SuSy (5,000,000 x 18) and
// Higgs (10,000,000 x 28; the paper's Higgs has 11,000,000 rows), generated once per process.
var hcData = map[string]func() [][]float32{
	"5Mx18":  sync.OnceValue(func() [][]float32 { return testcols.Uniform(rand.New(rand.NewPCG(18, 1)), 5_000_000, 18) }),
	"10Mx28": sync.OnceValue(func() [][]float32 { return testcols.Uniform(rand.New(rand.NewPCG(28, 1)), 10_000_000, 28) }),
}

// BenchmarkHypercube: b = 7, MinSplit 20 (the paper's GPU settings), the GPU path (fit,
// transfers, host sort and tree included; the per-step times are reported), and the CPU twin
// (every core) on the same machine. Moved from gpukern with the host steps.
func BenchmarkHypercube(b *testing.B) {
	for _, shape := range []string{"5Mx18", "10Mx28"} {
		b.Run("gpu-"+shape, func(b *testing.B) {
			dev := openGPU(b)
			cols := hcData[shape]()
			p := hypercube.Params{Bins: 7}
			if _, _, err := gpuHypercube(dev.gpu, cols, p); err != nil { // warm-up: JIT, first allocations
				b.Fatal(err)
			}
			b.ResetTimer()
			var res *hypercube.Result
			var tm HypercubeTimings
			for range b.N {
				r, t, err := gpuHypercube(dev.gpu, cols, p)
				if err != nil {
					b.Fatal(err)
				}
				res = r
				tm.Fit += t.Fit
				tm.Encode += t.Encode
				tm.Distinct += t.Distinct
				tm.Tree += t.Tree
				tm.Search += t.Search
				tm.Finish += t.Finish
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
			if os.Getenv("GPUKERN_SKIP_CPU") == "1" {
				b.Skip("GPUKERN_SKIP_CPU=1")
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
