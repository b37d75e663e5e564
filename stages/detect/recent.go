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
// to their rank among its own recent records. The flag still follows the combined score
// (min_score, the cap, the outcasts): Recent is for ranking and thresholding across series,
// not a verdict, and a fault that repeats becomes ordinary in it while the verdict keeps it
// significant for a window (issue 20 item 4).

// recentRing is a series' last combined scores, a ring (owned by the stage's goroutine), and
// an index of the ring's positions in ascending order of their scores: a record's rank is then a
// binary search and its insertion a move of part of the index, for 1 more byte a score at the
// default 100 (2 past 256 scores, 3 past 65,536; recentBytes). A scan of the held scores per
// record cost twice as much on the stage's one goroutine, for a value that under sink.emit:
// outliers is mostly not emitted (BenchmarkRecentRank at the default 100: 265 -> 110 ns,
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
}

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

// rank returns the recent score of combined score x against the ring, then adds x to it
// (capacity m: the ring is resized to it, keeping the newest, when detect.recent_scores
// changed). NaN for a NaN x (not added); x itself while the ring is empty.
func (r *recentRing) rank(x float64, m int) float64 {
	if math.IsNaN(x) || m <= 0 {
		return math.NaN()
	}
	if len(r.s) != m || r.width != indexWidth(m) {
		r.resize(m)
	}
	n, w := r.filled, r.width
	j := r.search(n, x, false) // the first held score >= x
	v := x
	if ge := n - j; n > 0 && ge == 0 {
		// beyond the series' recent records: their resolution, then the excess
		v = math.Log10(float64(n+1)) + (x - r.s[r.at(n-1)])
	} else if n > 0 {
		v = math.Log10(float64(n+1)) - math.Log10(float64(1+ge))
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
	return v
}

// clone is an independent copy of the ring.
func (r *recentRing) clone() recentRing {
	c := *r
	c.s, c.idx = slices.Clone(r.s), slices.Clone(r.idx)
	return c
}

// resize keeps the newest min(filled, m) scores in a ring of capacity m (order within the ring
// does not matter to rank: only the held scores do).
func (r *recentRing) resize(m int) {
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
// of its own, the stage's), else the stage's.
func (s *Stage) rankRecent(b *batch.Batch) {
	m := s.cfg.RecentScores
	if s.keyed != nil && s.keyed.rankRecentKeyed(b, m) {
		return // (ranked on the keys' workers: keyed_parallel.go)
	}
	keys := b.Keys()
	for i := range b.Scores {
		sc := &b.Scores[i]
		sc.Recent = math.NaN()
		if !sc.Scored || m <= 0 {
			continue
		}
		if s.keyed == nil {
			sc.Recent = s.recent.rank(sc.Score, m)
			continue
		}
		if st, ok := s.keyed.keys[string(recordKey(keys, i))]; ok {
			s.keyed.bytes += recentBytes(m) - recentBytes(len(st.recent.s)) // (recent_scores changed)
			sc.Recent = st.recent.rank(sc.Score, m)
		} else if s.keyed.follower && sc.Warming {
			// A scorer holds no state for a key it has no model of (role all holds every key
			// from its first record): such records rank among the stream's recent scores.
			sc.Recent = s.recent.rank(sc.Score, m)
		}
	}
}
