package detect

import (
	"slices"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// centredColumns is means (the rows of the batch b that rows names, all where nil) with each
// value of a rolling column still warming (batch.Batch.Warming: ingest.derive's mean, std or robust_z of
// a series that holds fewer than `last` values, stages/ingest/derive_warmup.go) replaced by the
// model m's centre of that column, the window's median in raw units (Ranker.Center): the
// values the explanation reads (explainDeviations), where a column at its median has no
// deviation, so no reason cites a warming column. The detectors score a warming value from
// the record's neighbours in its other columns instead (imputedColumns, warmup_impute.go:
// warm26 scored it at this centre, which a fleet's records, each at its own key's level, are
// far from). The columns without a warming record are means' own slices; the others copies
// (the batch's buffer, which the sink writes, keeps the derived value). The window is pushed
// the derived values, and a warming record is left out of the next builds' and
// recalibrations' reference as a significant one is (leaveOutWarming). The cyclic columns of
// unread (Stage.unreadCycles: the model's window did not span their period, cycles.go) are at
// the centre on every row.
func centredColumns(m *Model, b *batch.Batch, means [][]float32, rows []int, unread []bool) [][]float32 {
	if m == nil || m.Ranker == nil {
		return means
	}
	u := unreadCells{warm: warmingCols(b, len(means)), all: unread}
	var out [][]float32
	for j := range means {
		if !u.column(j) || j >= len(m.Ranker.Center) {
			continue
		}
		if out == nil {
			out = slices.Clone(means)
		}
		col, c := slices.Clone(means[j]), float32(m.Ranker.Center[j])
		for t := range col {
			if u.at(j, batchRow(rows, t)) {
				col[t] = c
			}
		}
		out[j] = col
	}
	if out == nil {
		return means
	}
	return out
}

// warmCells is a keys' pass's view of the batch's warming values (keyedScorer.score): raw is
// the columns the keys' models score, each column with a warming record a copy whose warming
// values centre sets to the centre of the key's model that scores the record, when it is
// queued (the model it meets); the keys' windows are pushed the batch's own values, marked
// warming (at), and left out of the keys' builds (keyed_warmup.go). With cyclic time columns
// (cycles.go) those are copies too, set to the centre where the key's model's window spans less
// than their period (keyState.span), and the records' times (ts) keep each key's reading
// interval (noteTime).
type warmCells struct {
	cols   []*array.Float32 // per column: the batch's array where it has a warming record, else nil
	raw    [][]float32
	cycles []cycleCols
	ts     *array.Timestamp
}

// newWarmCells is b's warmCells over its columns raw, nil when no record of b is warming and
// the stream has no cyclic columns.
func newWarmCells(b *batch.Batch, raw [][]float32, cycles []cycleCols) *warmCells {
	var w *warmCells
	for j := range raw {
		a := b.Warming(j)
		if a == nil {
			continue
		}
		if w == nil {
			w = &warmCells{cols: make([]*array.Float32, len(raw)), raw: slices.Clone(raw)}
		}
		w.cols[j], w.raw[j] = a, slices.Clone(raw[j])
	}
	if len(cycles) > 0 {
		if w == nil {
			w = &warmCells{cols: make([]*array.Float32, len(raw)), raw: slices.Clone(raw)}
		}
		w.cycles, w.ts = cycles, b.Timestamps()
		for _, c := range cycles {
			for _, j := range [2]int{c.sin, c.cos} {
				if w.cols[j] == nil { // (a warming column is a copy already; a time pair never warms)
					w.raw[j] = slices.Clone(raw[j])
				}
			}
		}
	}
	return w
}

// scoring is the columns the keys' models score: raw itself without a warming record.
func (w *warmCells) scoring(raw [][]float32) [][]float32 {
	if w == nil {
		return raw
	}
	return w.raw
}

// centre sets record i's warming values to the centre of its key's model (st.model: the
// median of the column in the key's window), and where that model's window spans less than a
// cyclic pair's period, the pair to its imputation from the key's records nearest in the other
// columns (imputedColumns' rule: a fleet's sensors that follow the day put the key's centre of
// the day at a time their readings were not: 1,181 flags of 100,000 against 783 without the
// columns, 637 with the imputation, on a fleet of 5 keys a reading every 150 s, a daily cycle of
// 3 sd; the warming values, at the centre, count as read there). Records of different keys are centred by different workers: each writes its own
// rows only.
func (w *warmCells) centre(i int, st *keyState) {
	r := st.model
	if w == nil || r == nil {
		return
	}
	for j, a := range w.cols {
		if a != nil && j < len(r.Center) && a.IsNull(i) {
			w.raw[j][i] = float32(r.Center[j])
		}
	}
	if len(w.cycles) == 0 {
		return
	}
	var im *imputer // (from the pool at the first unread pair: its unread mask too, no allocation a record)
	span := st.span(r)
	for _, c := range w.cycles {
		if span < c.period && max(c.sin, c.cos) < len(r.Center) {
			if im == nil {
				im = keyImputers.Get().(*imputer)
				im.unread = slices.Grow(im.unread[:0], len(w.raw))[:len(w.raw)]
				clear(im.unread)
			}
			im.unread[c.sin], im.unread[c.cos] = true, true
		}
	}
	if im == nil {
		return
	}
	im.reset(r, r.standardisedRef(), len(w.raw)).impute(w.raw, unreadCells{all: im.unread}, i, i)
	keyImputers.Put(im)
}

// noteTime notes record i's time in its key's reading interval (with cyclic columns only).
func (w *warmCells) noteTime(i int, st *keyState) {
	if w == nil || w.ts == nil || w.ts.IsNull(i) {
		return
	}
	st.noteTime(int64(w.ts.Value(i)))
}

// leaveOutWarming marks the records of b (pushed to the window from the stream index first)
// that hold a warming column as left out of the next models' reference (the outcasts' mark,
// alarm.go: withoutOutcasts, under its floor): after a restart every key's series starts
// afresh, and a fleet of 1000 keys put 32,000 partial windows (of `last` 32) into a window of
// 50,000, which widened the global model and cost its next models spikes (docs/BENCHMARKS.md
// §12.59, warm26b's addendum; TestWarmingKeptOutOfTheReference). Such a record is still
// counted, a member and scored; only the reference leaves it out. Only the records already
// pushed are marked: pushBatch calls it again after the rows its first build's cut held back
// (TestWarmingKeptOutAcrossTheFirstBuildsCut).
func (r *windowRing) leaveOutWarming(b *batch.Batch, first uint64) {
	for j := range b.Features {
		a := b.Warming(j)
		if a == nil {
			continue
		}
		for i := range b.Len() {
			if a.IsNull(i) {
				r.setSignificant(first + uint64(i))
			}
		}
	}
}
