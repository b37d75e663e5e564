package detect

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Blind marks re-judged once a cyclic pair is read, causally (daily31;
// docs/bench/notes/daily31_rule.md, docs/BENCHMARKS.md §12.85).
//
// A model that leaves a cyclic pair unread (cycles.go: its window spans less than the pair's
// period) cannot tell a reading ordinary at its time of day from a fault, yet what it finds
// significant is marked and left out of later references (alarm.go). On a plant with a daily
// cycle that is the afternoon (a lagging model, §12.43), and once a window spans the day and
// reads the pair, the marks still kept the afternoon out of its reference, so every afternoon
// was flagged again (§12.77's Left 2: 19,306 flags in the second day's afternoon of a clean 1 Hz
// stream at detect.window 90,000). Dropping the blind marks wholesale pardons the faults a blind
// model found as well (§12.77), and judging them by models holding the hours on both sides of a
// mark let a fault's later records, a later repeat or a later fault's residue vouch for it
// (§12.80). Every blind mark lies within the window's one period when the pair is first read,
// so no record of its time of day on another day exists: what can vouch for it is continuity,
// and only the records before it are what a model serving at its time could have held.
//
// So each blind mark is judged once, when the first model able to read the pair is due, by a
// fresher model that holds only records before it: the window cut into blocks of a 144th of
// the period (ten minutes a day), judged in time order, block b by a ranking model (buildRanker)
// of the window's records before start(b) - G, G the same ten minutes, that are unmarked (never
// marked, or revoked by an earlier block's judge), together with the blind marks of the hour
// before start(b) - G (the swing's continuity: a lagging model marks every record of a rise, so
// without them the judges stop where the marks begin, §12.85's candidate 1), in every column
// but the cyclic pairs the judge's own records do not span (cycles.go's rule). A record keeps
// its mark where that score reaches the alarm's clear level (flag_clear x min_score): reversing
// a judgement made at min_score needs the score to fall as far as an alarm must to end.
// Nothing at or after start(b) - G is in b's judge, so a fault shorter than G has no record of
// its own there, and no later fault or repeat vouches; an earlier fault's marks vouch within
// the hour after it (the limit, as for a fault longer than G: its first part vouches for its
// later part).

const (
	rejudgeBlocks = 144 // a cycle's period in blocks (judged in time order)
	rejudgeGuard  = 144 // a block's judge holds no record later than period/rejudgeGuard before the block
	rejudgeHour   = 24  // the blind marks of the period/rejudgeHour before the guard vouch
)

// setBlind marks record n (a stream index), if it is still in the window and blind marks are
// kept.
func (r *windowRing) setBlind(n uint64) {
	if r.blind != nil && n < r.pushed && r.pushed-n <= uint64(r.size) {
		r.blind[n%uint64(len(r.blind))] = true
	}
}

// blindTimed says whether a record of the window with an event time is marked blind (those
// are what rejudge judges).
func (r *windowRing) blindTimed() bool {
	c := uint64(len(r.blind))
	for i := r.pushed - uint64(r.held()); i < r.pushed; i++ {
		if r.blind[i%c] && r.times[i%c] != noTime {
			return true
		}
	}
	return false
}

// timesOf returns the event times of the newest size records, oldest first (the window's
// Snapshot order).
func (r *windowRing) timesOf(size int) []int64 {
	size = min(size, r.held())
	out := make([]int64, size)
	lo, hi := r.runs(size)
	copy(out[copy(out, r.times[lo[0]:lo[1]]):], r.times[hi[0]:hi[1]])
	return out
}

// maybeRejudgeBlind re-judges the window's blind marks (cols: the window's snapshot, oldest
// first) when the serving model leaves a cyclic pair unread and a model of the window's span
// now would read every pair: the first reference able to read them. Once a model that reads
// every pair serves, the blind marks its blind predecessor made after that re-judgement (the
// records it scored while this model was built, or were in flight then) are judged at the next
// reference, with the blocks of that re-judgement (review31: before, they were kept for good).
func (s *Stage) maybeRejudgeBlind(cols [][]float32) {
	if s.recs.blind == nil || s.model == nil || len(cols) == 0 {
		return
	}
	if s.unreadCycles(&Model{WindowSpan: s.recs.span()}) != nil {
		return
	}
	var period time.Duration // the shortest cycle the serving model leaves unread: the blocks'
	if unread := s.unreadCycles(s.model); unread != nil {
		for _, c := range s.cycles {
			if unread[c.sin] && (period == 0 || c.period < period) {
				period = c.period
			}
		}
		s.ext.blindPeriod = period
	} else {
		if !s.recs.blindTimed() {
			return
		}
		if period = s.ext.blindPeriod; period == 0 { // (marks restored by a restart, no re-judgement since: the shortest cycle's)
			for _, c := range s.cycles {
				if period == 0 || c.period < period {
					period = c.period
				}
			}
		}
	}
	start := time.Now()
	judged, kept, err := s.rejudge(cols, period)
	ev := s.deps.Log.Info()
	if err != nil {
		ev = s.deps.Log.Warn().Err(err)
	}
	ev.Int("judged", judged).Int("kept", kept).Float64("rejudge_ms", float64(time.Since(start).Microseconds())/1000).
		Msg("the marks of models blind to the time of day / week re-judged by models that read it (a fold of the window's hours each)")
}

// rejudge judges the window's blind marks by the causal judges maybeRejudgeBlind describes,
// with blocks of period/rejudgeBlocks; it returns how many were judged and how many kept their
// mark. A block whose judge cannot be built keeps its marks (and says why).
func (s *Stage) rejudge(cols [][]float32, period time.Duration) (judged, kept int, err error) {
	n := len(cols[0])
	sig, blind, times := s.recs.significant(n), s.recs.marks(s.recs.blind, n), s.recs.timesOf(n)
	blockMs := max(1, period.Milliseconds()/rejudgeBlocks)
	guard := period.Milliseconds() / rejudgeGuard
	byTime := make([]int, 0, n)  // the window's records with a time, in time order
	toJudge := map[int64][]int{} // a block's blind-marked records
	for i := range n {
		t := times[i]
		if t == noTime {
			continue
		}
		byTime = append(byTime, i)
		if sig[i] && blind[i] {
			b := t / blockMs
			if t%blockMs < 0 { // (a time before 1970: the floor)
				b--
			}
			toJudge[b] = append(toJudge[b], i)
		}
	}
	slices.SortStableFunc(byTime, func(a, b int) int { return cmp.Compare(times[a], times[b]) })
	blocks := make([]int64, 0, len(toJudge))
	for b := range toJudge {
		blocks = append(blocks, b)
	}
	slices.Sort(blocks)                             // (in time order: a revoked mark joins the later blocks' judges)
	keep := min(s.cfg.MinScore, s.cfg.clearScore()) // (revoked only where an alarm would clear)
	out := sig                                      // (the marks as judged so far: sig itself, a copy)
	for _, b := range blocks {
		rows := toJudge[b]
		judged += len(rows)
		before := b*blockMs - guard // the judge holds records before this time
		upto, _ := slices.BinarySearchFunc(byTime, before, func(i int, t int64) int { return cmp.Compare(times[i], t) })
		from := before - period.Milliseconds()/rejudgeHour // (blind marks from here vouch)
		var refRows []int
		for _, i := range byTime[:upto] {
			if !out[i] || blind[i] && times[i] >= from {
				refRows = append(refRows, i)
			}
		}
		r, read, e := s.judgeOf(cols, refRows, times)
		if e != nil {
			err, kept = e, kept+len(rows)
			continue
		}
		q := columnsOf(pick(cols, rows), read)
		dens, dist := make([]float64, len(rows)), make([]float64, len(rows))
		r.Tail.Score(q, dens)
		r.Ref.ScoreBatch(r.distanceSpace(q, nil), dist, 0) // (not members of its window)
		for t, i := range rows {
			if r.combine(dens[t], dist[t]) >= keep {
				kept++
			} else {
				out[i] = false
			}
		}
	}
	c, first := uint64(len(s.recs.sig)), s.recs.pushed-uint64(n)
	for _, rows := range toJudge {
		for _, i := range rows {
			k := (first + uint64(i)) % c
			s.recs.blind[k] = false // (judged once)
			if !out[i] {
				s.recs.sig[k] = false
			}
		}
	}
	return judged, kept, err
}

// judgeOf builds a block's judge: a ranking model of cols' rows refRows in the columns read
// (every column but the cyclic pairs whose period the rows' times do not span, cycles.go's
// rule for a model's window).
func (s *Stage) judgeOf(cols [][]float32, refRows []int, times []int64) (*Ranker, []int, error) {
	if len(refRows) < 2 {
		return nil, nil, fmt.Errorf("detect: a blind mark's judge needs at least 2 earlier records, has %d", len(refRows))
	}
	lo, hi := times[refRows[0]], times[refRows[0]]
	for _, i := range refRows {
		lo, hi = min(lo, times[i]), max(hi, times[i])
	}
	unread := s.unreadCycles(&Model{WindowSpan: time.Duration(hi-lo) * time.Millisecond})
	var read []int
	var names []string
	for j := range cols {
		if unread == nil || !unread[j] {
			read, names = append(read, j), append(names, s.features[j])
		}
	}
	rc := columnsOf(pick(cols, refRows), read)
	r, err := buildRanker(rc, sortedColumns(rc), names, s.cfg)
	return r, read, err
}

// columnsOf is cols' columns read, in order.
func columnsOf(cols [][]float32, read []int) [][]float32 {
	out := make([][]float32, len(read))
	for t, j := range read {
		out[t] = cols[j]
	}
	return out
}
