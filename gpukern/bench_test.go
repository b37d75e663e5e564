package gpukern_test

import (
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// BenchmarkKNNWeightsHost: the brief's target, 1,000,000 queries vs |S| = 2000 in 10 dimensions,
// k = 50, through the host entry point (transfers of S, Q and the weights included).
func BenchmarkKNNWeightsHost(b *testing.B) {
	d := openDevice(b)
	r := newRand(b, 1)
	S, Q := testcols.Uniform(r, 2000, 10), testcols.Uniform(r, 1_000_000, 10)
	out := make([]float64, 1_000_000)
	if err := gpukern.KNNWeights(d, S, Q, 50, out); err != nil { // warm-up: JIT, first allocations
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := gpukern.KNNWeights(d, S, Q, 50, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWeightsHost: every row's exact weight (the all-rows pass of topn --label-column),
// 567,000 x 3 uniform rows, k = 50 (the size of the 2MASS set of issue 12), transfers included.
func BenchmarkWeightsHost(b *testing.B) {
	const n = 567_000
	d := openDevice(b)
	X := testcols.Uniform(newRand(b, 3), n, 3)
	out := make([]float64, n)
	b.ResetTimer()
	for range b.N {
		if err := gpukern.Weights(d, X, 50, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClusterHost: 6,000,000 x 10, q = 200, 4 passes on resident data through the exported
// Cluster (the upload of the centroids and the download of the assignment and features included).
func BenchmarkClusterHost(b *testing.B) {
	const n, dims, q = 6_000_000, 10, 200
	d := openDevice(b)
	r := newRand(b, 2)
	X, E := testcols.Uniform(r, n, dims), testcols.Uniform(r, n, dims)
	init := make([][]float32, dims)
	for j := range init {
		init[j] = make([]float32, q)
		for c := range init[j] {
			init[j][c] = X[j][c*29989]
		}
	}
	xs, err := d.Upload(X)
	if err != nil {
		b.Fatal(err)
	}
	defer xs.Free()
	es, err := d.Upload(E)
	if err != nil {
		b.Fatal(err)
	}
	defer es.Free()
	assign := make([]int32, n)
	if _, err := gpukern.Cluster(xs, es, init, 4, microcluster.ReduceChunkRows(len(assign)), assign); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := gpukern.Cluster(xs, es, init, 4, microcluster.ReduceChunkRows(len(assign)), assign); err != nil {
			b.Fatal(err)
		}
	}
}
