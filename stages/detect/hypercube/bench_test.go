package hypercube

import (
	"testing"
)

// BenchmarkDetect: uniform data in the paper's SuSy shape, scaled down for the dev machine (the
// full 5,000,000 x 18 and 10,000,000 x 28 runs are gpukern's BenchmarkHypercube, CPU and GPU).
func BenchmarkDetect(b *testing.B) {
	for _, c := range []struct {
		name string
		n, d int
	}{{"500k x 18", 500_000, 18}, {"200k x 28", 200_000, 28}} {
		b.Run(c.name, func(b *testing.B) {
			cols := uniform(newRand(b, 1), c.n, c.d)
			b.ResetTimer()
			for range b.N {
				res, err := Detect(cols, Params{Bins: DefaultBins})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Cells.Len()), "cells")
			}
		})
	}
}
