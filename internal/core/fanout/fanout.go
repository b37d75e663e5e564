// Package fanout runs a loop's iterations on several goroutines.
package fanout

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each runs f(0) .. f(n-1) on workers goroutines, each taking the next index as it frees (so
// iterations of uneven cost balance), and waits; on the caller's goroutine, in order, when
// workers <= 1.
func Each(workers, n int, f func(i int)) {
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// OnCores is Each on up to GOMAXPROCS goroutines.
func OnCores(n int, f func(i int)) { Each(runtime.GOMAXPROCS(0), n, f) }
