package detect

import (
	"runtime"
	"slices"
	"sync"

	"github.com/outlierd/outlierd/internal/algo/radix"

	"github.com/outlierd/outlierd/internal/algo/rank"
)

// The CPU work of the hot path and of a build spread over the cores (issue 12 item 5: at
// W = 1,000,000 the tail score's binary searches in 4 MB sorted columns took 5.5 µs per record
// on one core, 70% of the stage's time on the GPU, and a build's serial per-feature sorts most
// of its 4.2-4.9 s; docs/BENCHMARKS.md §4.5). Each piece of work writes its own rows or its own
// feature, so the results are the serial code's, bit for bit.

// tailChunkRows is the fewest rows a goroutine of the tail score takes: below it the
// goroutine costs more than the searches it saves (about 5 µs per record at W = 1M, 1 µs at
// W = 50,000).
const tailChunkRows = 128

// tailScores scores q (column-major raw values) with t into out on up to GOMAXPROCS
// goroutines and returns a wait that blocks until every row is written: the caller runs other
// work (the distance score, on the GPU) meanwhile. cols is the caller's scratch for the
// chunks' column headers (returned, grown as needed).
func tailScores(t *rank.Tail, q [][]float32, out []float64, cols [][]float32) (wait func(), scratch [][]float32) {
	n := len(out)
	workers := min(runtime.GOMAXPROCS(0), max(1, n/tailChunkRows))
	if workers == 1 {
		t.Score(q, out)
		return func() {}, cols
	}
	if cap(cols) < workers*len(q) {
		cols = make([][]float32, workers*len(q))
	}
	cols = cols[:workers*len(q)]
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		sub := cols[w*len(q) : (w+1)*len(q)]
		for j := range q {
			sub[j] = q[j][lo:hi]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Score(sub, out[lo:hi])
		}()
	}
	return wg.Wait, cols
}

// sortedColumns returns a copy of each column, ascending, one goroutine per feature: the one
// sort of a build, shared by the normalisation's quantiles, the distance score's
// standardisation and the tail score's distributions (three sorts of the window per feature
// before, 24 sorts of 1M values per build at W = 1M with 8 features).
func sortedColumns(cols [][]float32) [][]float32 {
	out := make([][]float32, len(cols))
	onWorkers(len(cols), func(j int) { // (a goroutine a feature)
		out[j] = slices.Clone(cols[j])
		radix.Float32s(out[j], nil)
	})
	return out
}
