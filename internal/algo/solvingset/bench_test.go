package solvingset

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

var g2d = sync.OnceValue(func() *synth.Data { return synth.G2D(1_000_000, 1) })

// BenchmarkSolvingSetG2D is the thesis' G2d run (1,000,000 x 2, n=10, k=50, m=100; one-core
// Java: 103.6 s, 21 iterations, |S| = 2016), on all cores and on one, so the speed-up shows in
// one run: go test -run XXX -bench SolvingSetG2D -benchtime 1x ./stages/detect/solvingset/
func BenchmarkSolvingSetG2D(b *testing.B) {
	d := g2d()
	rows := float64(d.Rows())
	for _, w := range []int{0, 1} {
		name := fmt.Sprintf("workers=%d", w)
		if w == 0 {
			name = fmt.Sprintf("workers=all(%d)", runtime.GOMAXPROCS(0))
		}
		b.Run(name, func(b *testing.B) {
			p := Params{K: 50, N: 10, M: 100, Seed: 1, Workers: w}
			var res Result
			var err error
			start := time.Now()
			for b.Loop() {
				if res, err = SolvingSet(d.Cols, p, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "seconds")
			b.ReportMetric(float64(res.Iterations), "iterations")
			b.ReportMetric(float64(len(res.SolvingSet)), "|S|")
			b.ReportMetric(float64(res.DistanceComputations)/(rows*(rows-1)/2), "dist/nested-loop")
		})
	}
}

// BenchmarkSolvingSetG3D is the thesis' G3d run (500,000 x 3, three Gaussians, n=10, k=50,
// m=100; one-core Java: 98.4 s, 32 iterations, |S| = 3092), on all cores.
func BenchmarkSolvingSetG3D(b *testing.B) {
	d := synth.G3D(500_000, 1)
	rows := float64(d.Rows())
	p := Params{K: 50, N: 10, M: 100, Seed: 1}
	var res Result
	var err error
	for b.Loop() {
		if res, err = SolvingSet(d.Cols, p, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "seconds")
	b.ReportMetric(float64(res.Iterations), "iterations")
	b.ReportMetric(float64(len(res.SolvingSet)), "|S|")
	b.ReportMetric(float64(res.DistanceComputations)/(rows*(rows-1)/2), "dist/nested-loop")
}

// BenchmarkKNNWeights scores 100,000 queries against a solving set of 2,000 points in 10
// dimensions with k = 50 (the Model's batch path).
func BenchmarkKNNWeights(b *testing.B) {
	S := synth.Gaussian(2000, 10, 1).Cols
	Q := synth.Gaussian(100_000, 10, 2).Cols
	out := make([]float64, 100_000)
	for b.Loop() {
		KNNWeights(S, Q, 50, 0, out)
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N), "seconds")
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
