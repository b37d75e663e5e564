package detect

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
)

// Cyclic time columns and the window's span (tod29; docs/BENCHMARKS.md §12.75).
//
// ingest.derive's time_of_day and day_of_week place a record's time on a cycle as a (sin, cos)
// pair. The pair is context: every time of the day comes once a day, so a record's time says
// nothing alone, only beside its readings ("normal at noon, abnormal at midnight"). A model can
// read that context only once its window has seen the whole cycle. A window that spans less (a
// reading a second: the default window of 50,000 spans 13.9 hours) holds an arc of the day, and
// a new record's time lies past the arc's newest end by the time since the model was built: its
// time alone put it at the window's edge (a clean 1 Hz stream with time_of_day had 3.2 % of its
// records flagged at the default window, none without the column: the lead's new-user pass of
// 2026-11-29). So a model reads a pair only when its window spanned the pair's period in event
// time (Model.WindowSpan); otherwise the pair is not read, for any record the model scores, as a
// warming value is not (warmup_impute.go: imputed from the record's neighbours in its other
// columns, never named in an explanation). The window keeps the records' true times, so the
// first model whose window spans the period reads them.

// Cycle is a pair of feature columns placing a record's time on a cycle of Period: its sine
// and cosine (ingest.derive's time_of_day, a day; day_of_week, a week).
type Cycle struct {
	Sin, Cos string
	Period   time.Duration
}

// cycleCols is a Cycle by its columns' indices.
type cycleCols struct {
	sin, cos int
	period   time.Duration
	name     string // its columns, for the log
}

// resolveCycles finds each cycle's columns among features.
func resolveCycles(cycles []Cycle, features []string) ([]cycleCols, error) {
	var out []cycleCols
	for _, c := range cycles {
		s, k := slices.Index(features, c.Sin), slices.Index(features, c.Cos)
		if s < 0 || k < 0 || s == k || c.Period <= 0 {
			return nil, fmt.Errorf("detect: cyclic columns %q, %q (period %s): not two of the stream's features %v", c.Sin, c.Cos, c.Period, features)
		}
		out = append(out, cycleCols{sin: s, cos: k, period: c.Period, name: c.Sin + ", " + c.Cos})
	}
	return out, nil
}

// noTime marks a window record without a time (windowRing.times).
const noTime = math.MinInt64

// pushTimes notes the event times (ms) of the batch's rows [lo, hi), pushed to the ring from
// the stream index first, when the ring keeps times (the stage has cyclic columns).
func (r *windowRing) pushTimes(first uint64, ts *array.Timestamp, lo, hi int) {
	if r.times == nil {
		return
	}
	c := uint64(len(r.times))
	for i := max(lo, hi-len(r.times)); i < hi; i++ {
		t := int64(noTime)
		if ts != nil && !ts.IsNull(i) {
			t = int64(ts.Value(i))
		}
		r.times[(first+uint64(i-lo))%c] = t
	}
}

// span is the event time the ring's records cover: from its oldest records' time to its newest
// records' (records without a time left out), each end the median time of the ring's oldest
// (newest) hundredth in arrival order, so that a few records with a wrong clock (the year 2100,
// or 0 from a device before its first sync; the decoder accepts both) cannot make a window of a
// few hours "span a day" (newuser29's finding, §12.77: the newest less the oldest time had one
// such record flag 5,825 of 60,000 clean records). 0 with fewer than two times.
func (r *windowRing) span() time.Duration {
	if r.times == nil {
		return 0
	}
	held := r.held()
	k := max(1, held/100)
	c := uint64(len(r.times))
	end := func(from int) (int64, bool) { // the median time of the records [from, from+k) in arrival order
		ts := make([]int64, 0, k)
		for i := from; i < from+k; i++ {
			if t := r.times[(r.pushed-uint64(held)+uint64(i))%c]; t != noTime {
				ts = append(ts, t)
			}
		}
		if len(ts) == 0 {
			return 0, false
		}
		slices.Sort(ts)
		return ts[len(ts)/2], true
	}
	lo, okLo := end(0)
	hi, okHi := end(held - k)
	if !okLo || !okHi || hi <= lo {
		return 0
	}
	return time.Duration(hi-lo) * time.Millisecond
}

// unreadCycles marks the columns of the cycles m's window did not span (nil: every cycle read).
func (s *Stage) unreadCycles(m *Model) []bool {
	var out []bool
	for _, c := range s.cycles {
		if m.WindowSpan < c.period {
			if out == nil {
				out = make([]bool, len(s.features))
			}
			out[c.sin], out[c.cos] = true, true
		}
	}
	return out
}

// noteCycles logs, when it changes, which cyclic columns the serving model m does not read.
func (s *Stage) noteCycles(m *Model) {
	var unread []string
	var need time.Duration
	for _, c := range s.cycles {
		if m.WindowSpan < c.period {
			unread, need = append(unread, c.name), max(need, c.period)
		}
	}
	now := strings.Join(unread, "; ")
	if now != "" && s.win.Len() >= s.cfg.Window {
		now += " (full window)" // (logged again once the window is full: then window_needed says how long a window reads them)
	}
	if now == s.cyclesUnread {
		return
	}
	s.cyclesUnread = now
	if now == "" {
		s.deps.Log.Info().Uint64("model_version", m.Version).Dur("window_span", m.WindowSpan).
			Msg("the time of day / week columns are read: the model's window spans their period")
		return
	}
	ev := s.deps.Log.Warn().Uint64("model_version", m.Version).Str("columns", strings.Join(unread, "; ")).Dur("window_span", m.WindowSpan).Dur("period", need)
	if m.WindowSpan > 0 && s.win.Len() >= s.cfg.Window { // (at this rate, a window of so many records would span it)
		ev = ev.Int("window_needed", int(math.Ceil(float64(s.win.Len())*float64(need)/float64(m.WindowSpan))))
	}
	ev.Msg("cyclic time columns not read: the model's window spans less than their period (a record's time alone would put it at the window's edge); they are read once a window spans it (detect.window: window_needed records at this rate)")
}

// A key's model (key_by: key) reads the cyclic columns on the same rule, its window's span
// estimated as its records times the key's reading interval (keyState.gapMs: an average of the
// intervals between the key's records, kept by every process that scores the key, builder or
// scorer, so no model format carries it; not saved: after a restart a key's cyclic columns are
// unread until its second record). A key that reads every 20 s (a fleet of 20 at 1 Hz) holds 67
// minutes in its 200 records; one that reads every 10 minutes, 33 hours.

// keyGapWeight is the weight of a key's newest interval in its average (an exponential average
// over about the last 8: a rate that changes is followed within a few records).
const keyGapWeight = 0.125

// noteTime folds the key's record at ms (epoch ms) into its reading interval. An interval of a
// record out of time order (negative) is left out, and the key's latest time is the record's
// own either way: a record whose clock is wrong (the year 2100) costs one interval, where a
// latest time kept at the maximum left every later interval out and the interval at the bad
// gap for good. An interval counts at most keyGapRange times the average (or a keyGapRange-th
// of it): one wrong clock moves the average by at most about (keyGapRange - 1) x keyGapWeight,
// a rate that changes for good is followed within a few dozen records.
func (st *keyState) noteTime(ms int64) {
	if st.lastMs != 0 && ms >= st.lastMs {
		g := float32(ms - st.lastMs)
		if st.gapMs == 0 {
			st.gapMs = max(g, math.SmallestNonzeroFloat32) // (0 is "none yet")
		} else {
			g = min(max(g, st.gapMs/keyGapRange), float32(st.gapMs*keyGapRange))
			st.gapMs += float32(keyGapWeight * (g - st.gapMs)) // (the product rounded first: no fused multiply-add, .ci/nofma.sh)
		}
	}
	st.lastMs = ms
}

// keyGapRange bounds one interval's part in a key's average (noteTime).
const keyGapRange = 4

// span is the event time r's window (its records: len(r.Tail.Sorted[0])) spans at the key's
// reading interval; 0 before the key's second record.
func (st *keyState) span(r *Ranker) time.Duration {
	if st.gapMs == 0 || r.Tail == nil || len(r.Tail.Sorted) == 0 {
		return 0
	}
	return time.Duration(float64(len(r.Tail.Sorted[0])) * float64(st.gapMs) * float64(time.Millisecond))
}
