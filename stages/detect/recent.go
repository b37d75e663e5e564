package detect

import (
	"cmp"
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The recent score (batch.Score.Recent; detect.recent_scores, docs/DESIGN.md "Flags"): the
// combined score says how rare a record is under its model, which is only as right as the
// model; a series the model does not fit (a level it has not learnt, a quantised or spiky
// signal whose fitted tail is too steep) gets large scores record after record, and a
// threshold over many series then pages on that series' ordinary records before another
// series' anomalies. Recent ranks the record's combined score among the last recent_scores
// combined scores of its own series (its key under key_by: key, else the stream): -log10 of its
// tail probability there, (1 + #{recent >= s}) / (m + 1) over the m held, the conformal
// p-value; beyond the largest recent score it keeps rising by the combined score's excess over
// it (the same decimal log units), so a record far beyond its series' recent past still ranks
// by how far. For a series the model fits, Recent is about the combined score (both are
// -log10 of a tail probability); for one it does not, the series' ordinary records fall back
// to their rank among its own recent records.
//
// A record beyond its last recent_scores is not necessarily new to its series: a burst that
// comes back every day, or every few hundred records of a spiky series, is beyond the ring each
// time (the series NAB's low-FP profile lost most on, docs/BENCHMARKS.md §12.12). With
// detect.recent_horizon, a series also keeps the maxima of its last blocks of recent_scores
// records, over the horizon: a record beyond the ring that recentPeaks or more of those blocks
// reached is ranked by their count, -log10((1 + c) / (N + 1)) over the N records the blocks
// cover (an upper bound of its rank there: each such block holds at least one record at or
// above it), and never below the ring's range; a record fewer blocks reached rises from that
// rank by its excess over the recentPeaks-th largest block maximum (or the ring's largest, if
// larger), so a few earlier events (an earlier fault, the first model's early records) do not
// hide a new one. Without a horizon (0), N = the ring's m, c = 0, and the excess is over the
// ring's largest (the definition before §12.12, bit for bit). The flag still follows the
// combined score (min_score, the cap, the outcasts): Recent is for ranking and thresholding
// across series, not a verdict, and a fault that repeats becomes ordinary in it while the
// verdict keeps it significant for a window (issue 20 item 4).
//
// An episode ranks once (recentRing.episode, docs/BENCHMARKS.md §12.14): a record whose rank does
// not rise above the largest rank of its series' current block of recent_scores records and the
// block before (its episode's peak so far) gets its rank minus that peak (<= 0), so every record
// that is new (above its series' recent peak) ranks above every record that is not. A series
// whose model has gone stale rises record after record (a drifting plant scored by a model of
// its first minutes: SKAB's valve experiments at replay's cadence), and each new maximum of its
// combined score ranked high again: a threshold across series spent itself on these repeats.
// Only the first and the rising records of an episode count now, as only the first alert of
// an episode pages (detect.alert_cooldown folds the rest). Its cost: a second, lesser anomaly
// of a series within one to two blocks of a larger one ranks below the new records of every
// series (the flags still flag both).

// recentRing is a series' last combined scores, a ring (owned by the stage's goroutine), and
// an index of the ring's positions in ascending order of their scores: a record's rank is then a
// binary search and its insertion a move of part of the index, for 1 more byte a score up to
// 256 scores (2 past 256, 3 past 65,536; recentBytes). A scan of the held scores per
// record cost twice as much on the stage's one goroutine, for a value that under sink.emit:
// outliers is mostly not emitted (BenchmarkRecentRank at recent_scores 100: 265 -> 110 ns,
// docs/BENCHMARKS.md §14). The index replaced a sorted copy of the scores (8 bytes a score: a
// key's ring was 1.8 KB of heap, now 1.0 KB; §13.0.2) with the same ranks bit for bit: within
// a run of equal scores the index holds the newest first (a score is inserted before every held
// score >= it), so the oldest, which a full ring's new score replaces, is its run's last.
type recentRing struct {
	s      []float64 // in arrival order; once full, next is the oldest
	idx    []byte    // the held positions of s by ascending score, width bytes each (little-endian)
	width  int
	next   int
	filled int
	// the horizon (recent_horizon): the maxima of the last len(peaks) completed blocks of m
	// records, a ring (pnext the oldest once pfilled is len(peaks)), and the current block's
	// largest score so far over its cnt records
	peaks          []float64
	pnext, pfilled int
	cur            float64
	cnt            int
	// the episode (episode): the largest rank of the last complete block of m ranked records and
	// of the current block so far (its cnt records: the horizon's blocks; 0 before any: ranks are
	// >= 0). Two float64 and a shared count keep a key's state in its allocation size class (288
	// bytes).
	epPrev, epCur float64
}

// recentPeaks is how many of the horizon's blocks must have reached a record beyond the ring for
// it to rank by their count alone: a burst that returns is ordinary from its sixth occurrence
// on, and the excess of a new event is measured past the fifth-largest block maximum, so that a
// few earlier events do not hide it (chosen with recent_scores on NAB's held-in half and SKAB's
// even experiments among 1, 2, 3, 4, 5 and 8; docs/BENCHMARKS.md §12.12).
const recentPeaks = 5

// indexWidth is the bytes an index entry of a ring of m scores takes.
func indexWidth(m int) int {
	switch {
	case m <= 1<<8:
		return 1
	case m <= 1<<16:
		return 2
	}
	return 3 // (recent_scores is at most 1<<20)
}

// at is the position of s that the index's k-th entry holds.
func (r *recentRing) at(k int) int {
	if r.width == 1 { // (the default's: the binary search's inner step)
		return int(r.idx[k])
	}
	e := r.idx[k*r.width:]
	p := int(e[0])
	for b := 1; b < r.width; b++ {
		p |= int(e[b]) << (8 * b)
	}
	return p
}

// put sets the index's k-th entry to position p.
func (r *recentRing) put(k, p int) {
	e := r.idx[k*r.width:]
	for b := range r.width {
		e[b] = byte(p >> (8 * b))
	}
}

// search is the first of the index's n entries whose score is >= x (after: > x).
func (r *recentRing) search(n int, x float64, after bool) int {
	lo, hi := 0, n
	if r.width == 1 && !after { // (the default's rank: its hot loop without the width's steps)
		idx, s := r.idx[:n], r.s
		for lo < hi {
			h := int(uint(lo+hi) >> 1)
			if s[idx[h]] < x {
				lo = h + 1
			} else {
				hi = h
			}
		}
		return lo
	}
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if y := r.s[r.at(h)]; y < x || (after && y == x) {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// rank returns the recent score of combined score x against the ring and the horizon's block
// maxima, then adds x to them (capacity m, blocks of the horizon: the ring is resized to them,
// keeping the newest scores and starting the horizon afresh, when detect.recent_scores or
// recent_horizon changed). NaN for a NaN x (not added); x itself while the ring is empty.
func (r *recentRing) rank(x float64, m, blocks int) float64 {
	if math.IsNaN(x) || m <= 0 {
		return math.NaN()
	}
	if len(r.s) != m || r.width != indexWidth(m) || len(r.peaks) != blocks {
		r.resize(m, blocks)
	}
	n, w := r.filled, r.width
	j := r.search(n, x, false) // the first held score >= x
	v := x
	if ge := n - j; n > 0 && ge == 0 {
		v = r.beyond(x, r.s[r.at(n-1)], m)
	} else if n > 0 {
		v = float64(math.Log10(float64(n+1))) - float64(math.Log10(float64(1+ge)))
	}
	if n < m {
		copy(r.idx[(j+1)*w:(n+1)*w], r.idx[j*w:n*w])
		r.put(j, r.next)
	} else { // x takes the oldest's place: the entries between them move by one
		i := r.search(n, r.s[r.next], true) - 1 // the oldest: the last of its run of equal scores
		if j <= i {
			copy(r.idx[(j+1)*w:(i+1)*w], r.idx[j*w:i*w])
			r.put(j, r.next)
		} else {
			copy(r.idx[i*w:(j-1)*w], r.idx[(i+1)*w:j*w])
			r.put(j-1, r.next)
		}
	}
	r.s[r.next] = x
	r.next = (r.next + 1) % m
	r.filled = min(r.filled+1, m)
	if r.cnt == 0 || x > r.cur {
		r.cur = x
	}
	if r.cnt++; r.cnt == m { // the block is complete: its maximum joins the horizon (if any)
		if len(r.peaks) > 0 {
			r.peaks[r.pnext] = r.cur
			r.pnext = (r.pnext + 1) % len(r.peaks)
			r.pfilled = min(r.pfilled+1, len(r.peaks))
		}
		r.cnt = 0
	}
	return v
}

// score is the recent score of combined score x (batch.Score.Recent): its rank among the series'
// recent scores (rank), ranked once per episode (episode). NaN for a NaN x (not added).
func (r *recentRing) score(x float64, m, blocks int) float64 {
	v := r.rank(x, m, blocks)
	if math.IsNaN(v) {
		return v
	}
	return r.episode(v)
}

// episode is rank v (just ranked: rank counted it in its block) as its episode ranks it: v itself
// above the largest rank of the current block of ranked records and of the block before (the
// peak), else v minus the peak (<= 0: how far below the episode's peak; 0 at it, also where both
// are +Inf). v then joins the current block's peak; a block rank just completed rolls over.
func (r *recentRing) episode(v float64) float64 {
	peak, out := max(r.epPrev, r.epCur), v
	switch {
	case v == peak:
		out = 0
	case v < peak:
		out = v - peak
	}
	r.epCur = max(r.epCur, v)
	if r.cnt == 0 { // (rank completed the block with this record)
		r.epPrev, r.epCur = r.epCur, 0
	}
	return out
}

// beyond is the recent score of x above every held score (the largest: top): its rank among the
// horizon's records by the blocks that reached it, and its excess past the recentPeaks-th
// largest block maximum while fewer reached it (without a horizon: log10(m + 1) + x - top over
// the ring's m). O(blocks), for the few records beyond their series' ring.
func (r *recentRing) beyond(x, top float64, m int) float64 {
	n := float64(r.filled)
	covered := max(n, float64(r.pfilled*m+r.cnt)) // the records the ring and the blocks hold
	c := 0
	var big [recentPeaks]float64 // the largest block maxima below x, descending
	for k := range big {
		big[k] = math.Inf(-1)
	}
	for _, p := range r.peaks[:r.pfilled] {
		if p >= x {
			c++
			continue
		}
		for k := range big {
			if p > big[k] {
				copy(big[k+1:], big[k:len(big)-1])
				big[k] = p
				break
			}
		}
	}
	rank := float64(math.Log10(covered+1)) - float64(math.Log10(float64(1+c)))
	if c >= recentPeaks {
		return max(math.Log10(n+1), rank)
	}
	// the recentPeaks-th largest block maximum: the (recentPeaks - c)-th largest below x
	return rank + (x - max(top, big[recentPeaks-1-c]))
}

// bytes is what recentBytes counts for the ring as it is sized now.
func (r *recentRing) bytes() int64 { return recentBytes(len(r.s), len(r.peaks)) }

// clone is an independent copy of the ring.
func (r *recentRing) clone() recentRing {
	c := *r
	c.s, c.idx, c.peaks = slices.Clone(r.s), slices.Clone(r.idx), slices.Clone(r.peaks)
	return c
}

// resize keeps the newest min(filled, m) scores in a ring of capacity m (order within the ring
// does not matter to rank: only the held scores do), and starts a horizon of blocks block
// maxima and the episode's blocks afresh (a block is m records).
func (r *recentRing) resize(m, blocks int) {
	r.peaks, r.pnext, r.pfilled, r.cnt = make([]float64, blocks), 0, 0, 0
	r.epPrev, r.epCur = 0, 0 // (the episode's blocks restart with the horizon's)
	keep := min(r.filled, m)
	s := make([]float64, m)
	for i := range keep { // oldest first, so the next write replaces the oldest kept
		s[keep-1-i] = r.s[(r.next-1-i+2*len(r.s))%len(r.s)]
	}
	r.s, r.next, r.filled = s, keep%m, keep
	pos := make([]int, keep)
	for i := range pos {
		pos[i] = i
	}
	// by score, and within equal scores newest (the larger position here) first
	slices.SortFunc(pos, func(a, b int) int {
		if c := cmp.Compare(s[a], s[b]); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	})
	r.width = indexWidth(m)
	r.idx = make([]byte, m*r.width)
	for k, p := range pos {
		r.put(k, p)
	}
}

// rankRecent sets every scored record's Recent in stream order: against its key's ring under
// key_by: key (a key evicted within the batch uses none: NaN; a scorer's key without a model
// of its own, the stage's), else the stage's. r is the global model's ranker, which scored the
// stream's records (recent_far_side).
//
// Under recent_far_side: log the stream's series ranks its combined score less w times the part
// that the distance's calibration extrapolated linearly beyond its largest score (the score
// less Ranker.combineFar's), w the recent past's weight (recent_past_weight; 1 without
// recent_past): a model built from a file's first minutes scores a plant that has drifted
// since far beyond its reference, where the linear extrapolation makes one sensor's ordinary
// step decades (docs/BENCHMARKS.md §12.16 part 2), and those single-row blips outranked faults;
// under stale the discount applies where the model has gone stale, as the recent past (§12.23).
func (s *Stage) rankRecent(b *batch.Batch, r *Ranker) {
	m, blocks := s.cfg.RecentScores, s.cfg.RecentBlocks()
	if s.keyed != nil && s.keyed.rankRecentKeyed(b, m, blocks) {
		return // (ranked on the keys' workers: keyed_parallel.go)
	}
	keys, past := b.Keys(), s.pastDecades(b)
	far := s.cfg.RecentFarSide == FarSideLog && r != nil
	for i := range b.Scores {
		sc := &b.Scores[i]
		sc.Recent = math.NaN()
		if !sc.Scored || m <= 0 {
			continue
		}
		if s.keyed == nil {
			x, w := sc.Score, 1.0
			if past != nil { // (recent_past: recent_past.go)
				w = s.pastWeight(sc.Score)
			}
			if far {
				x -= float64(w * r.farExcess(sc.Score, sc.DensityScore, sc.DistanceScore))
			}
			if past != nil {
				x += float64(w * past[i])
			}
			sc.Recent = s.recent.score(x, m, blocks)
			continue
		}
		if st, ok := s.keyed.keys[string(recordKey(keys, i))]; ok {
			s.keyed.bytes += recentBytes(m, blocks) - st.recent.bytes() // (recent_scores or recent_horizon changed)
			sc.Recent = st.recent.score(sc.Score, m, blocks)
		} else if s.keyed.follower && sc.Warming {
			// A scorer holds no state for a key it has no model of (role all holds every key
			// from its first record): such records rank among the stream's recent scores.
			sc.Recent = s.recent.score(sc.Score, m, blocks)
		}
	}
}
