// Package hugepage asks the kernel to back the Go heap with transparent huge pages (2 MB)
// where its setting leaves that to the program (/sys/kernel/mm/transparent_hugepage/enabled:
// madvise, the default of many distributions), as the JVM's -XX:+UseTransparentHugePages does.
// The Go runtime asks for none. With models per key (stages/detect, key_by) the heap is
// gigabytes of key states read at random, a record's key a TLB miss each with 4 KB pages: on
// the H100 host of docs/BENCHMARKS.md §13.1.14 the keyed detect stage at a million keys ran
// 11-19 % faster on huge pages. A hint: it changes no result, and where the kernel cannot or
// will not, nothing changes. The costs are why the runtime itself asks for none since Go 1.21.4
// (golang/go#61718, #63334, #64332): a fault in advised memory may wait for the kernel to
// compact memory for a huge page (a stall where memory is fragmented), MADV_COLLAPSE copies
// (here on the keeper's goroutine, holding no lock of the runtime's), a huge page backs 2 MB
// where the heap may use less, and khugepaged may make whole again pages the runtime handed back,
// so resident memory can exceed the heap by more than with 4 KB pages.
package hugepage

import (
	"sync"
	"time"
)

// Stats say what the passes over the heap asked for so far.
type Stats struct {
	// Advised is the heap's bytes marked for huge pages (MADV_HUGEPAGE: its later faults take
	// them, and khugepaged may make its small pages huge); Collapsing the bytes whose small pages
	// were asked to be made huge at once (MADV_COLLAPSE, Linux 6.1 and later: best effort; its
	// answer says little, a call that made most of its range huge may still return EINVAL or
	// EAGAIN, so a chunk is asked at most collapseTries times and what the heap holds is read
	// from /proc/self/smaps' AnonHugePages, not from here).
	Advised, Collapsing int64
	// Err is the last pass's error (reading the process's mappings, or an advice refused), if any.
	Err error
}

// keeper is the process's one goroutine advising the heap while a caller of Keep holds it.
var keeper struct {
	mu      sync.Mutex
	holders int
	stop    chan struct{}
	done    chan struct{}
	state   heapState
}

// interval is how often the keeper looks for heap grown since its last pass: a heap growing by
// gigabytes while a million keys warm up is advised within a second of each arena's mapping.
const interval = time.Second

// Keep starts advising the heap (a pass now, then one each interval) and returns the function
// that releases the caller's hold, and the figures so far: where this Keep starts the keeper,
// those of a pass it makes before it returns (advice only, no collapse), so that an advice the
// kernel refuses is said at once (first.Err). The goroutine ends when the last hold is
// released. Calls nest: one goroutine for the process however many stages keep the heap.
func Keep() (release func(), first Stats) {
	keeper.mu.Lock()
	defer keeper.mu.Unlock()
	keeper.holders++
	if keeper.holders == 1 {
		keeper.state.pass(nil, false) // advice only: the keeper collapses (heap_linux.go)
		stop, done := make(chan struct{}), make(chan struct{})
		keeper.stop, keeper.done = stop, done
		go func() {
			defer close(done)
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				keeper.state.pass(stop, true)
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
	}
	first = keeper.state.stats()
	var once sync.Once
	return func() {
		once.Do(func() {
			keeper.mu.Lock()
			keeper.holders--
			var done chan struct{}
			if keeper.holders == 0 {
				close(keeper.stop)
				done = keeper.done
			}
			keeper.mu.Unlock()
			if done != nil {
				<-done
			}
		})
	}, first
}
