package detect

import (
	"os"
	"slices"
	"time"
)

// Blind marks re-judged once a cyclic pair is read (daily30; docs/bench/notes/daily30_rule.md).
//
// A model that leaves a cyclic pair unread (cycles.go: its window spans less than the pair's
// period) cannot tell a reading ordinary at its time of day from a fault, yet what it finds
// significant is marked and left out of later references (alarm.go). On a plant with a daily
// cycle that is the afternoon (a lagging model, docs/BENCHMARKS.md §12.43), and once a window
// spans the day and reads the pair, the marks still keep the afternoon out of its reference,
// so every afternoon is flagged again (§12.77's Left 2: 69,430 of 200,000 clean records at
// detect.window 90,000). Dropping the blind marks wholesale pardons the faults a blind model
// found as well (§12.77's candidates: fault recall 0.762 -> 0.272 / 0.517). So each blind mark
// is judged again, once, when the first model able to read the pair is due, by a model that
// reads the time and never holds the record's own neighbourhood in time: the window is cut into
// blocks of a 24th of the period (an hour a day) folded by parity, and each fold's blind-marked
// records are scored by a ranking model built from the other fold (its unmarked records, and
// its blind-marked ones farther than a 144th of the period, 10 minutes a day, from their
// block's edges). A record keeps its mark only where that score still reaches min_score. The
// cycle's swing is continuous in time, so the other fold's records within the hour around an
// afternoon record vouch for it; a fault shorter than the guard never has a record of its own in
// the model that judges it. Switched on by OUTLIERD_DAILY30=1 (unset: main's behaviour).

// rejudgeBlind switches the re-judgement on (env OUTLIERD_DAILY30=1).
var rejudgeBlind = os.Getenv("OUTLIERD_DAILY30") == "1"

const (
	rejudgeBlocks = 24  // a cycle's period in blocks (the folds alternate by block)
	rejudgeGuard  = 144 // a blind-marked record nearer a block's edge than period/rejudgeGuard vouches for no one
)

// setBlind marks record n (a stream index), if it is still in the window and blind marks are
// kept.
func (r *windowRing) setBlind(n uint64) {
	if r.blind != nil && n < r.pushed && r.pushed-n <= uint64(r.size) {
		r.blind[n%uint64(len(r.blind))] = true
	}
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
// now would read every pair: the first reference able to read them.
func (s *Stage) maybeRejudgeBlind(cols [][]float32) {
	if s.recs.blind == nil || s.model == nil || len(cols) == 0 {
		return
	}
	unread := s.unreadCycles(s.model)
	if unread == nil || s.unreadCycles(&Model{WindowSpan: s.recs.span()}) != nil {
		return
	}
	var period time.Duration // the shortest cycle the serving model leaves unread: the blocks'
	for _, c := range s.cycles {
		if unread[c.sin] && (period == 0 || c.period < period) {
			period = c.period
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

// rejudge judges the window's blind marks by the cross-fit maybeRejudgeBlind describes, with
// blocks of period/rejudgeBlocks; it returns how many were judged and how many kept their mark.
// A block whose model cannot be built keeps its marks (and says why).
func (s *Stage) rejudge(cols [][]float32, period time.Duration) (judged, kept int, err error) {
	n := len(cols[0])
	sig, blind, times := s.recs.significant(n), s.recs.marks(s.recs.blind, n), s.recs.timesOf(n)
	blockMs := max(1, period.Milliseconds()/rejudgeBlocks)
	guard := period.Milliseconds() / rejudgeGuard
	var unmarked [2][]int        // a fold's unmarked records
	toJudge := map[int64][]int{} // a block's blind-marked records
	vouch := map[int64][]int{}   // a block's blind-marked records away from its edges
	for i := range n {
		t := times[i]
		if t == noTime {
			continue
		}
		b := t / blockMs
		if t%blockMs < 0 { // (a time before 1970: the floor)
			b--
		}
		off := t - b*blockMs
		switch {
		case sig[i] && blind[i]:
			toJudge[b] = append(toJudge[b], i)
			if off > guard && blockMs-off > guard {
				vouch[b] = append(vouch[b], i)
			}
		case !sig[i]:
			unmarked[b&1] = append(unmarked[b&1], i)
		}
	}
	blocks := make([]int64, 0, len(toJudge))
	for b := range toJudge {
		blocks = append(blocks, b)
	}
	slices.Sort(blocks) // (the models' order does not change their verdicts; the log's error does)
	keep := min(s.cfg.MinScore, s.cfg.clearScore()) // (revoked only where an alarm would clear)
	drop := make([]bool, n)
	for _, b := range blocks {
		rows := toJudge[b]
		judged += len(rows)
		// The model of block b: the other fold's unmarked records and its neighbours' blind marks.
		refRows := slices.Concat(unmarked[1-b&1], vouch[b-1], vouch[b+1])
		rc := pick(cols, refRows)
		r, e := buildRanker(rc, sortedColumns(rc), s.features, s.cfg)
		if e != nil {
			err, kept = e, kept+len(rows)
			continue
		}
		q := pick(cols, rows)
		dens, dist := make([]float64, len(rows)), make([]float64, len(rows))
		r.Tail.Score(q, dens)
		r.Ref.ScoreBatch(r.distanceSpace(q, nil), dist, 0) // (not members of its window)
		for t, i := range rows {
			if r.combine(dens[t], dist[t]) >= keep {
				kept++
			} else {
				drop[i] = true
			}
		}
	}
	c, first := uint64(len(s.recs.sig)), s.recs.pushed-uint64(n)
	for _, rows := range toJudge {
		for _, i := range rows {
			k := (first + uint64(i)) % c
			s.recs.blind[k] = false // (judged once)
			if drop[i] {
				s.recs.sig[k] = false
			}
		}
	}
	return judged, kept, err
}
