// Package microcluster is the window stage: it keeps the most recent W records of the stream, column-major, as a ring
// buffer. It is the data the model is rebuilt from; Push can report the records it evicts,
// for summaries that subtract their contribution (counts kept over the window).
//
// A Window is owned by one goroutine (the detect stage's); it has no locks.
package microcluster

import (
	"fmt"
	"sync"
)

// Window is a ring buffer of the last Cap records: means (and, optionally, uncertainties)
// per dimension.
type Window struct {
	capacity int
	dims     int
	cols     [][]float32 // [dim][slot]
	sds      [][]float32 // [dim][slot]; nil for certain data
	next     int         // slot the next record goes to
	size     int         // records held, <= capacity
	total    uint64      // records ever pushed
}

// New makes an empty window of capacity records in dims dimensions.
func New(capacity, dims int, uncertain bool) (*Window, error) {
	if capacity < 1 || dims < 1 {
		return nil, fmt.Errorf("window: capacity and dims must be >= 1, got %d and %d", capacity, dims)
	}
	w := &Window{capacity: capacity, dims: dims, cols: make([][]float32, dims)}
	for j := range dims {
		w.cols[j] = make([]float32, capacity)
	}
	if uncertain {
		w.sds = make([][]float32, dims)
		for j := range dims {
			w.sds[j] = make([]float32, capacity)
		}
	}
	return w, nil
}

// Len is the number of records held; Cap the capacity; Total the records ever pushed.
func (w *Window) Len() int      { return w.size }
func (w *Window) Cap() int      { return w.capacity }
func (w *Window) Total() uint64 { return w.total }

// Evicted holds the records that a Push displaced, column-major.
type Evicted struct {
	Cols [][]float32
	SDs  [][]float32 // nil for certain data
	n    int
}

// Len is the number of evicted records.
func (e *Evicted) Len() int { return e.n }

// Reset empties e for reuse, keeping its buffers.
func (e *Evicted) Reset() {
	for j := range e.Cols {
		e.Cols[j] = e.Cols[j][:0]
	}
	for j := range e.SDs {
		e.SDs[j] = e.SDs[j][:0]
	}
	e.n = 0
}

// Push appends a batch (means[j][i], and sds[j][i] or nil) and, when ev is not nil, appends
// the records it evicted to ev, oldest first. A batch larger than the window keeps only its
// last Cap records; the earlier ones are reported as evicted too, so every pushed record is
// eventually reported exactly once (what Add/Remove bookkeeping needs). A nil ev costs
// nothing per evicted record.
func (w *Window) Push(means, sds [][]float32, ev *Evicted) error {
	if len(means) != w.dims {
		return fmt.Errorf("window: batch has %d dims, window %d", len(means), w.dims)
	}
	if (sds == nil) != (w.sds == nil) {
		return fmt.Errorf("window: batch uncertainty presence differs from the window's")
	}
	m := len(means[0])
	for j := range means {
		if len(means[j]) != m || (sds != nil && len(sds[j]) != m) {
			return fmt.Errorf("window: ragged batch in dim %d", j)
		}
	}
	if ev != nil {
		if len(ev.Cols) != w.dims {
			ev.Cols = make([][]float32, w.dims)
		}
		if w.sds != nil && len(ev.SDs) != w.dims {
			ev.SDs = make([][]float32, w.dims)
		}
	}
	// A batch larger than the window overwrites its own first records: they are evicted
	// after everything the ring held, which is older.
	start := max(0, m-w.capacity)
	for i := start; i < m; i++ {
		s := w.next
		if w.size == w.capacity {
			if ev != nil {
				w.evictSlot(ev, s)
			}
		} else {
			w.size++
		}
		for j := range w.dims {
			w.cols[j][s] = means[j][i]
			if sds != nil {
				w.sds[j][s] = sds[j][i]
			}
		}
		w.next = (s + 1) % w.capacity
	}
	if ev != nil && start > 0 {
		for j := range w.dims {
			ev.Cols[j] = append(ev.Cols[j], means[j][:start]...)
			if sds != nil {
				ev.SDs[j] = append(ev.SDs[j], sds[j][:start]...)
			}
		}
		ev.n += start
	}
	w.total += uint64(m)
	return nil
}

func (w *Window) evictSlot(ev *Evicted, s int) {
	for j := range w.dims {
		ev.Cols[j] = append(ev.Cols[j], w.cols[j][s])
		if w.sds != nil {
			ev.SDs[j] = append(ev.SDs[j], w.sds[j][s])
		}
	}
	ev.n++
}

// Snapshot copies the window's records in arrival order (oldest first), column-major: the
// input of a model rebuild, which runs off the hot path on its own copy.
func (w *Window) Snapshot() (cols, sds [][]float32) {
	first := (w.next - w.size + w.capacity) % w.capacity
	cp := func(src []float32) []float32 {
		out := make([]float32, 0, w.size)
		if first+w.size <= w.capacity {
			return append(out, src[first:first+w.size]...)
		}
		out = append(out, src[first:]...)
		return append(out, src[:w.next]...)
	}
	// One goroutine per column: a build snapshots the window on the stage's goroutine, which
	// scores nothing meanwhile (at W = 1M with uncertainties 64 MB, about 70 ms on one core).
	var wg sync.WaitGroup
	copyAll := func(src [][]float32) [][]float32 {
		out := make([][]float32, w.dims)
		for j := range w.dims {
			wg.Go(func() { out[j] = cp(src[j]) })
		}
		return out
	}
	cols = copyAll(w.cols)
	if w.sds != nil {
		sds = copyAll(w.sds)
	}
	wg.Wait()
	return cols, sds
}
