package solvingset

import (
	"testing"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// BenchmarkBruteForce is the oracle's nested loop on 20,000 x 4 Gaussian rows (k = 50, n = 10):
// 2e8 distances, rows claimed by the workers, per-worker heaps merged.
func BenchmarkBruteForce(b *testing.B) {
	cols := synth.Gaussian(20_000, 4, 1).Cols
	p := Params{K: 50, N: 10, M: 100, Seed: 1}
	for b.Loop() {
		if _, err := BruteForce(cols, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(20_000*19_999/2*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
