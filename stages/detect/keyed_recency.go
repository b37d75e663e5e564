package detect

import (
	"runtime"
	"sync"
)

// recency is the keys' least-recently-seen order (keys.max_keys and keys.max_bytes evict the
// key seen least recently): a log of touches in stream order, each a key and its clock. A key's
// live touch is its latest (keyState.seen); the others are stale and skipped, so a touch is an
// append (no list to relink: with a million keys each relink is cache misses on the stage's
// goroutine) and the parallel path (keyed_parallel.go) writes a batch's touches from every core
// at the records' own positions. The log is compacted to the live touches, in order, once it
// holds twice as many as at the last compaction (amortised: one copy per touch).
type recency struct {
	log   []touch
	head  int     // log[:head] is consumed (evicted or stale)
	clock uint64  // the last touch's
	kept  int     // live touches at the last compaction
	spare []touch // the log before the last compaction, cleared: where the next one goes
}

// touch is a key seen at a clock.
type touch struct {
	st *keyState
	at uint64
}

// live says whether t is its key's latest touch and the key is still held.
func (t touch) live() bool { return !t.st.gone && t.st.seen == t.at }

// touch makes st the key seen most recently.
func (r *recency) touch(st *keyState) {
	r.clock++
	st.seen = r.clock
	r.log = append(r.log, touch{st, r.clock})
	r.maybeCompact()
}

// reserve appends n touches for the parallel path to write (at: the clock of the first; the
// i-th is written as touch{st, at + i}, and st.seen = at + i by the key's worker in stream
// order): the batch's records' touches in stream order.
func (r *recency) reserve(n int) (base int, at uint64) {
	base, at = len(r.log), r.clock+1
	if cap(r.log)-len(r.log) < n {
		r.log = append(make([]touch, 0, 2*len(r.log)+n), r.log...)
	}
	r.log = r.log[:len(r.log)+n]
	r.clock += uint64(n)
	return base, at
}

// oldest is the key seen least recently (nil when none is held).
func (r *recency) oldest() *keyState {
	for r.head < len(r.log) {
		if t := r.log[r.head]; t.st != nil && t.live() {
			return t.st
		}
		r.log[r.head] = touch{} // (the evicted key's state may go)
		r.head++
	}
	return nil
}

// each calls f for every held key, least recently seen first.
func (r *recency) each(f func(st *keyState)) {
	r.eachWhile(func(st *keyState) bool { f(st); return true })
}

// eachWhile is each until f returns false.
func (r *recency) eachWhile(f func(st *keyState) bool) {
	for _, t := range r.log[r.head:] {
		if t.st != nil && t.live() && !f(t.st) {
			return
		}
	}
}

// compactGrain is the fewest touches per worker of a compaction.
const compactGrain = 1 << 16

// maybeCompact keeps the live touches alone once the log holds more than twice as many touches
// as were live at the last compaction (and 4096 more), on every core for a long log.
func (r *recency) maybeCompact() {
	n := len(r.log) - r.head
	if n <= 2*r.kept+4096 {
		return
	}
	log := r.log[r.head:]
	workers := min(runtime.GOMAXPROCS(0), (n+compactGrain-1)/compactGrain)
	parts := make([][]touch, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := w*n/workers, (w+1)*n/workers
			var keep []touch
			for _, t := range log[lo:hi] {
				if t.st != nil && t.live() {
					keep = append(keep, t)
				}
			}
			parts[w] = keep
		}()
	}
	wg.Wait()
	kept := 0
	for _, p := range parts {
		kept += len(p)
	}
	// The compacted log goes into the spare, the log before the last compaction (pages the
	// process has written before: a new allocation's first writes were 4% of the stage's CPU at
	// a million keys on the H100 host, 430 ns a touch, docs/BENCHMARKS.md §13.1.4), and the old
	// log, cleared (its evicted keys' states may go), becomes the spare.
	out := r.spare[:0]
	if cap(out) < 2*kept+4096 {
		out = make([]touch, 0, 2*kept+4096)
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	old := r.log[:cap(r.log)]
	onChunks(len(old), workers, func(lo, hi int) { clear(old[lo:hi]) })
	r.log, r.head, r.kept, r.spare = out, 0, kept, old[:0]
}
