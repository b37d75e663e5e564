package detect

import (
	"github.com/outlierd/outlierd/internal/core/batch"
)

// The hypercube's counts and warming records (derive28; docs/BENCHMARKS.md §12.71).
//
// A record with a warming column (a rolling derived column whose window was still filling: its
// value is a partial window's, warmup.go) is left out of the models' reference (leaveOutWarming)
// and of its key's builds (keyed_warmup.go); the hypercube's counts, which follow the window push
// by push, counted it at that value: a fleet's cold start, or every key's first `last` records
// after a restart, put its partial windows (a std near 0, the stuck sensor's cells) into the
// counts that every record is then judged by. Now the counts leave them out as the reference
// does, under the reference's floor (leavesOut, outcastFloor: where fewer than that share of the
// window is not warming they are counted, as a build then reads the window whole, so the counts
// are never of a nearly empty window, which flags every record). The stage decides per push (the
// window with the batch), marks what it left out in the window's ring (windowRing.uncounted) so
// that an eviction removes exactly what was added, and recounts at each Reset (a new model, a
// reconfiguration) by the same rule over the window as it is. A record left out is scored at its
// imputed values (warmup_impute.go) counting itself (Query.Uncounted: w + 1), as a counted record
// is in its own cell: max_neighbours' "the record itself counts" holds for it too.

// warmingRows marks b's records with a warming column, nil when none has one.
func warmingRows(b *batch.Batch) []bool {
	var out []bool
	for j := range b.Features {
		a := b.Warming(j)
		if a == nil {
			continue
		}
		if out == nil {
			out = make([]bool, b.Len())
		}
		for i := range out {
			out[i] = out[i] || a.IsNull(i)
		}
	}
	return out
}

// following reports whether a follower follows the window's pushes now.
func (s *Stage) following() bool {
	for _, f := range s.followers {
		if f.Following() {
			return true
		}
	}
	return false
}

// uncountedRows are the rows of a push (warm: their warming marks, nil none) that the followers'
// counts leave out: the warming ones, unless the window with them would hold fewer than the
// floor's share not warming (leavesOut); nil when none is left out or nothing follows.
func (s *Stage) uncountedRows(warm []bool) []bool {
	if warm == nil || !s.following() {
		return nil
	}
	n := 0
	for _, w := range warm {
		if w {
			n++
		}
	}
	if !leavesOut(s.recs.held()+len(warm), s.recs.warmHeld+n, s.cfg.Window) {
		return nil
	}
	return warm
}

// countsLeaveOut is the window's records (oldest first) that a recount of the followers leaves
// out, by uncountedRows' rule over the window as it is, and marks them so in the ring; nil when
// none.
func (s *Stage) countsLeaveOut() []bool {
	r := s.recs
	leave := leavesOut(r.held(), r.warmHeld, s.cfg.Window)
	for k, w := range r.warm {
		r.uncounted[k] = leave && w
	}
	if !leave {
		return nil
	}
	return r.marks(r.warm, r.held())
}

// uncountedFrom are the marks of n records from the stream index lo on, the ring's records
// left out of the counts, the push's own (from the stream index first, marks out) for those
// past the ring; nil when none is.
func (r *windowRing) uncountedFrom(lo uint64, n int, first uint64, out []bool) []bool {
	var marks []bool
	c := uint64(len(r.uncounted))
	for k := range n {
		i := lo + uint64(k)
		var left bool
		if i < first {
			left = r.uncounted[i%c]
		} else {
			left = out != nil && out[i-first]
		}
		if left {
			if marks == nil {
				marks = make([]bool, n)
			}
			marks[k] = true
		}
	}
	return marks
}

// uncountedQuery is Query.Uncounted of b's rows (nil: all): those the ring marks left out of the
// counts, nil when none is (or b was not pushed: a scorer's, or one scored alone).
func (s *Stage) uncountedQuery(b *batch.Batch, rows []int) []bool {
	first, pushed := s.pending[b]
	if !pushed || s.recs.warmHeld == 0 || !s.following() {
		return nil
	}
	n := b.Len()
	if rows != nil {
		n = len(rows)
	}
	var out []bool
	c := uint64(len(s.recs.uncounted))
	for t := range n {
		i := first + uint64(batchRow(rows, t))
		if i < s.recs.pushed && s.recs.pushed-i <= uint64(s.recs.held()) && s.recs.uncounted[i%c] {
			if out == nil {
				out = make([]bool, n)
			}
			out[t] = true
		}
	}
	return out
}

// rowsKept is column-major cols less the rows out marks (out nil: cols itself).
func rowsKept(cols [][]float32, out []bool) [][]float32 {
	if out == nil || len(cols) == 0 {
		return cols
	}
	kept := make([][]float32, len(cols))
	for j, c := range cols {
		d := make([]float32, 0, len(c))
		for i, v := range c {
			if !out[i] {
				d = append(d, v)
			}
		}
		kept[j] = d
	}
	return kept
}
