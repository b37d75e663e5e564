// Package fanout runs a loop's iterations on several goroutines.
package fanout

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each runs f(0) .. f(n-1) on workers goroutines, each taking the next index as it frees (so
// iterations of uneven cost balance), and waits; on the caller's goroutine, in order, when
// workers <= 1 or n <= 1 (no goroutine for one iteration: callers such as solvingset's
// parallelFor meet a single block on every small input).
func Each(workers, n int, f func(i int)) { EachWorker(workers, n, func(_, i int) { f(i) }) }

// EachWorker is Each whose f also gets w, the ordinal of the worker running it: w is in
// [0, min(workers, n)) (0 when workers <= 1), and one worker's calls are sequential, so f can
// keep per-worker scratch or partial results in a slice indexed by w without sharing them. Which
// worker takes which index depends on the scheduling: what f leaves per worker must be merged
// in a way that does not depend on it.
func EachWorker(workers, n int, f func(w, i int)) {
	if workers <= 1 || n <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(w, i)
			}
		})
	}
	wg.Wait()
}

// OnCores is Each on up to GOMAXPROCS goroutines.
func OnCores(n int, f func(i int)) { Each(runtime.GOMAXPROCS(0), n, f) }
