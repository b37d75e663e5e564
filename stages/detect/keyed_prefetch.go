package detect

import (
	"unsafe"

	"github.com/outlierd/outlierd/internal/core/prefetch"
)

// The parallel path's prefetches (keyed_parallel.go; internal/core/prefetch): at a million keys
// a record's key's state, window, model and recent ring are cache misses that depend on one
// another; each loop asks for them a few records ahead, stage by stage (docs/BENCHMARKS.md
// §13.1.4).

// prefetchAhead is how many records ahead walk and decide ask for a stage of what a record will
// read (prefetch): far enough that a stage's misses are served before the next stage reads the
// pointers they bring (a few hundred ns), near enough that they are still in the cache when used.
const prefetchAhead = 8

// prefetchWalk asks for what walk reads and writes of the key of its record t+k*prefetchAhead,
// in three stages (each reads the pointers the stage before brought into the cache; at a
// million keys every one is a miss): the key's state; its window's column headers and the
// significance's line; the columns' lines at the window's next place. What is written is asked
// for writing (prefetch.ForWrite: the key's last writer was another core, a batch before).
func prefetchWalk(todo []int, sts []*keyState, t int) {
	a := 2 * prefetchAhead // (a record's walk is short: its misses need more records' lead)
	if u := t + 3*a; u < len(todo) {
		prefetch.ForWrite(sts[todo[u]]) // (its clock, window place and rebuild clock are written)
	}
	if u := t + 2*a; u < len(todo) {
		st := sts[todo[u]]
		prefetch.Slice(st.cols)
		if st.next < st.sig.len() {
			prefetch.ForWrite(st.sig.word(st.next))
		}
	}
	if u := t + a; u < len(todo) {
		st := sts[todo[u]]
		for _, c := range st.cols {
			if st.next < len(c) {
				prefetch.ForWrite(&c[st.next])
			}
		}
	}
}

// prefetchDecisions asks for what decideByKey reads and writes of the key of record
// t+k*prefetchAhead of the queue (raw scores tail, dist), in four stages (as prefetchWalk): the
// model's and the state's structs; the alarm cap's and the three calibrations' indexes (the
// searches' first level, rank.Calibration.Index: 2-3 lines each at a window of 200); the Density
// and Distance calibrations' leaves the record's searches will read (Leaf: 2-3 lines each, where
// the whole sorted arrays were 25 lines each, §13.1.9); the cap's ring at its next place and the
// record's significance's line. (decide asks for the final calibration's leaf at the last stage,
// once the record's mean of calibrated scores is known.) A hint: no result depends on it (the
// decisions were cache misses, 600-800 ns a record at a million keys, §13.1.3).
func prefetchDecisions(q []queued, tail, dist []float64, t int, fleet bool) {
	a := prefetchAhead
	if u := t + 4*a; u < len(q) {
		prefetch.Object(q[u].model)
		prefetch.Bytes(unsafe.Pointer(q[u].st), unsafe.Offsetof(keyState{}.cap)+8) // (up to its cap)
	}
	if u := t + 3*a; u < len(q) {
		r := q[u].model
		prefetch.ForWrite(q[u].st.cap)
		prefetch.Slice(r.Density.Index())
		prefetch.Slice(r.Distance.Index())
		prefetch.Slice(r.Final.Index())
		if fleet {
			prefetch.Object(r.Tail)
		}
	}
	if u := t + 2*a; u < len(q) {
		r := q[u].model
		prefetch.Slice(r.Density.Leaf(tail[u]))
		prefetch.Slice(r.Distance.Leaf(dist[u]))
		if fleet { // (keys.tail: fleet reads the model's medians and robust sd: keyed_fleet.go)
			prefetch.Bytes(r.Tail.DeviationMemory())
		}
	}
	if u := t + a; u < len(q) {
		st := q[u].st
		if c := st.cap; c.next < c.n {
			prefetch.ForWrite(c.ring().word(int(c.next)))
		}
		if q[u].ring < st.sig.len() {
			prefetch.ForWrite(st.sig.word(q[u].ring))
		}
	}
}

// prefetchRecent asks for what rankRecentKeyed reads of the key of record t+k*prefetchAhead of
// a worker's records, in two stages (as prefetchWalk): the key's state; its recent ring's scores,
// their index by score and the horizon's maxima.
func prefetchRecent(mine []int, sts []*keyState, t int) {
	a := prefetchAhead
	if u := t + 2*a; u < len(mine) {
		prefetch.Object(sts[mine[u]])
	}
	if u := t + a; u < len(mine) {
		r := &sts[mine[u]].recent
		prefetch.Slice(r.s)
		prefetch.Slice(r.idx)
		prefetch.Slice(r.peaks)
	}
}

// prefetchBuild asks for what keyBuild.window reads of the keys due after key t of due, in three
// stages (as prefetchWalk: each reads the pointers the stage before brought into the cache): the
// key's state; its window's column headers and significance; the columns' values (keys.window
// values a feature: the whole ring of a full window). ahead is how many builds run side by side
// (the workers take the due keys in order, one as one frees: a worker starting key t takes about
// key t+ahead next), so each stage has a build's time (tens of µs) to arrive. At a million keys
// every key's state and window are cache misses (docs/BENCHMARKS.md §13.1.16). A hint: no
// result depends on it.
func prefetchBuild(due []*keyState, t, ahead int) {
	if u := t + 3*ahead; u < len(due) {
		prefetch.Object(due[u])
	}
	if u := t + 2*ahead; u < len(due) {
		prefetch.Slice(due[u].cols)
		prefetch.Slice(due[u].sig.bits)
	}
	if u := t + ahead; u < len(due) {
		for _, c := range due[u].cols {
			prefetch.Slice(c)
		}
	}
}
