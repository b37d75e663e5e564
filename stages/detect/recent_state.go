package detect

import (
	"cmp"
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// The stream's recent past in the alarm state (alarm_state.go, format 6; snapwin31): what
// scores.recent ranks a record against besides its combined score (recent.go: the stream's ring
// of last combined scores, its horizon's block maxima and its episode's peaks; recent_past.go:
// the stream's last recent_past records' features and, under recent_past_weight: stale, which of
// its last scored records reached staleDecades). Before, a restart started them empty: Recent
// was the combined score itself at the first record after it, then its rank among the few
// scores since, so that a record the uninterrupted run ranked as ordinary among its series' last
// recent_scores could rank as new, high enough to page on (a threshold across series is what
// Recent is for), for up to recent_scores records, and up to recent_horizon before the horizon's
// memory of a returning burst was back. Saved with the alarm state (the roles that rank: a
// builder ranks nothing), at the same point of the stream, a graceful restart ranks every record
// as the uninterrupted run (TestRestartKeepsRecentScores; pipeline
// TestGracefulRestartScoresAsUninterrupted*, which compare scores.recent too).
//
// The keys' rings (key_by: key: each key's, keyState.recent) are not saved: a key's ring is its
// recent_scores scores and its horizon's block maxima (928 bytes of this section a key at the
// defaults, 50 and 60: 93 MB at 100,000 keys), in the keys' state on role all and in a scorer's
// alarm state else, two formats to change for it; a key restarts its ring empty, as the
// stream's did before (docs/OPERATIONS.md, "Alarms across a restart").
//
// The section (after format 5's payload):
//
//	ring: m u32 (0: never ranked, nothing follows), if m > 0: next u32, filled u32, count u32
//	      (the current block's records), blocks u32, block next u32, blocks filled u32, the
//	      current block's largest f64, the episode's peaks (the block before, the current) 2 x
//	      f64, m x f64 (the scores by position: filled held, the newest at next - 1), blocks x f64
//	past: n u32 (0: none, nothing follows), if n > 0: d u32, d x { name (length u32, UTF-8) },
//	      next u32, filled u32, n x d f32 (the rows by position, row-major)
//	stale: n u32 (0: none, nothing follows), if n > 0: next u32, held u32, n x u8 (0 or 1)
//
// The index of the ring's scores and each feature's sorted values of the past are not saved:
// both follow from what is, and are rebuilt at the load as the live ones stand (ties in the
// ring's index newest first, recentRing's rule: TestRecentStateRoundTrip compares them).

// recentState is a copy of the stream's recent past, for a save (the next batch changes it).
type recentState struct {
	ring         recentRing
	past         pastRing // (sorted left nil: restoreRecent rebuilds it)
	pastFeatures []string
	stale        exceedRing
}

// recentCopy copies the stream's recent past.
func (s *Stage) recentCopy() *recentState {
	r := &recentState{ring: s.recent.clone(), stale: s.stale}
	r.stale.over = slices.Clone(s.stale.over)
	if s.past.n > 0 {
		r.past = pastRing{x: slices.Clone(s.past.x), n: s.past.n, d: s.past.d, next: s.past.next, filled: s.past.filled}
		r.pastFeatures = s.features
	}
	return r
}

// encodeRecent writes r's section (nil: every part empty).
func encodeRecent(e *sealed.Encoder, r *recentState) {
	if r == nil {
		r = &recentState{}
	}
	g := &r.ring
	e.U32(uint32(len(g.s)))
	if len(g.s) > 0 {
		for _, v := range []int{g.next, g.filled, g.cnt, len(g.peaks), g.pnext, g.pfilled} {
			e.U32(uint32(v))
		}
		e.F64(g.cur)
		e.F64(g.epPrev)
		e.F64(g.epCur)
		e.F64s(g.s)
		e.F64s(g.peaks)
	}
	p := &r.past
	e.U32(uint32(p.n))
	if p.n > 0 {
		e.U32(uint32(p.d))
		for _, f := range r.pastFeatures {
			e.Text(f)
		}
		e.U32(uint32(p.next))
		e.U32(uint32(p.filled))
		e.F32s(p.x)
	}
	st := &r.stale
	e.U32(uint32(len(st.over)))
	if len(st.over) > 0 {
		e.U32(uint32(st.next))
		e.U32(uint32(st.held))
		over := make([]byte, len(st.over))
		for i, o := range st.over {
			if o {
				over[i] = 1
			}
		}
		e.Raw(over)
	}
}

// ringPositions checks a ring's next and filled of n places (filled below n: next is filled,
// the ring never went round).
func ringPositions(what string, next, filled, n uint32) error {
	if next >= n || filled > n || filled < n && next != filled {
		return snapErr("%s of %d places at %d, %d filled", what, n, next, filled)
	}
	return nil
}

// decodeRecent reads the section into a recentState. Counts the bytes left cannot hold, a
// position outside its ring, a held score that is NaN (rank never holds one) or a stale mark
// other than 0 and 1 is refused before any allocation of the parts.
func decodeRecent(d *sealed.Decoder) (*recentState, error) {
	r := &recentState{}
	fits := func(what string, n, size uint64) error {
		if d.Err() != nil {
			return sealedErr(d.Err())
		}
		if n > uint64(d.Left())/size {
			return snapErr("recent past: %d %s cannot fit in the %d bytes left", n, what, d.Left())
		}
		return nil
	}
	m := d.U32("recent scores")
	if err := fits("recent scores", uint64(m), 8); err != nil {
		return nil, err
	}
	if m > 0 {
		next, filled, cnt := d.U32("recent next"), d.U32("recent filled"), d.U32("recent block count")
		blocks, pnext, pfilled := d.U32("recent blocks"), d.U32("recent block next"), d.U32("recent blocks filled")
		if err := fits("recent block maxima", uint64(blocks), 8); err != nil {
			return nil, err
		}
		if err := ringPositions("recent scores", next, filled, m); err != nil {
			return nil, err
		}
		if cnt >= m || m > 1<<20 || blocks > 1<<16 || blocks > 0 && ringPositions("recent block maxima", pnext, pfilled, blocks) != nil ||
			blocks == 0 && (pnext != 0 || pfilled != 0) {
			return nil, snapErr("recent past: a ring of %d scores, %d in its block, %d block maxima at %d, %d filled", m, cnt, blocks, pnext, pfilled)
		}
		g := &r.ring
		g.next, g.filled, g.cnt, g.pnext, g.pfilled = int(next), int(filled), int(cnt), int(pnext), int(pfilled)
		g.cur, g.epPrev, g.epCur = f64(d, "recent block largest"), f64(d, "recent episode before"), f64(d, "recent episode now")
		g.s, g.peaks = d.F64s(uint64(m), "recent scores"), d.F64s(uint64(blocks), "recent block maxima")
		if d.Err() != nil {
			return nil, sealedErr(d.Err())
		}
		for i := range g.filled {
			if math.IsNaN(g.s[(g.next-1-i+2*int(m))%int(m)]) {
				return nil, snapErr("recent past: a NaN among the held scores")
			}
		}
		g.reindex()
	}
	n := d.U32("recent past records")
	if n > 0 {
		dims := d.U32("recent past features")
		if d.Err() == nil && (dims < 1 || dims > maxSnapshotDims || n > 1<<16) {
			return nil, snapErr("recent past: %d records of %d features", n, dims)
		}
		r.pastFeatures = make([]string, dims)
		for j := range r.pastFeatures {
			r.pastFeatures[j] = d.Text(maxSnapshotName, "recent past feature")
		}
		next, filled := d.U32("recent past next"), d.U32("recent past filled")
		if err := fits("recent past values", uint64(n)*uint64(dims), 4); err != nil {
			return nil, err
		}
		if err := ringPositions("recent past", next, filled, n); err != nil {
			return nil, err
		}
		r.past = pastRing{x: d.F32s(uint64(n)*uint64(dims), "recent past values"), n: int(n), d: int(dims), next: int(next), filled: int(filled)}
	}
	sn := d.U32("stale records")
	if sn > 0 {
		next, held := d.U32("stale next"), d.U32("stale held")
		if err := fits("stale records", uint64(sn), 1); err != nil {
			return nil, err
		}
		if err := ringPositions("stale records", next, held, sn); err != nil {
			return nil, err
		}
		over := d.Take(uint64(sn), "stale records")
		if d.Err() != nil {
			return nil, sealedErr(d.Err())
		}
		st := exceedRing{over: make([]bool, sn), next: int(next), held: int(held)}
		for i, o := range over {
			if o > 1 || o == 1 && i >= st.held {
				return nil, snapErr("stale record %d (of %d held) marked %d", i, st.held, o)
			}
			st.over[i] = o == 1
			st.hits += int(o)
		}
		r.stale = st
	}
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	return r, nil
}

// f64 reads a float64 (its IEEE 754 bits).
func f64(d *sealed.Decoder, what string) float64 { return math.Float64frombits(d.U64(what)) }

// reindex rebuilds the ring's index from its held scores: their positions by ascending score,
// within equal scores the newest first (rank's order: a score goes before every held score >= it,
// and a full ring's new score replaces the oldest, its run's last).
func (r *recentRing) reindex() {
	m := len(r.s)
	age := func(p int) int { return (r.next - 1 - p + 2*m) % m } // (0: the newest)
	pos := make([]int, 0, r.filled)
	for i := range r.filled {
		pos = append(pos, (r.next-1-i+2*m)%m)
	}
	slices.SortFunc(pos, func(a, b int) int {
		if c := cmp.Compare(r.s[a], r.s[b]); c != 0 {
			return c
		}
		return cmp.Compare(age(a), age(b))
	})
	r.width = indexWidth(m)
	r.idx = make([]byte, m*r.width)
	for k, p := range pos {
		r.put(k, p)
	}
}

// restoreRecent installs r as the stream's recent past: the past's rows only when they are of the
// stream's features (else it starts empty, as at a change of recent_past). A ring of another
// recent_scores or recent_horizon, a past of another recent_past and a stale share of another
// recent_past are resized or started afresh at the next record, as a reload does.
func (s *Stage) restoreRecent(r *recentState) {
	s.recent, s.stale = r.ring, r.stale
	if r.past.n == 0 || !slices.Equal(r.pastFeatures, s.features) {
		s.past = pastRing{}
		return
	}
	p := r.past
	p.sorted = make([][]float64, p.d)
	for j := range p.sorted {
		p.sorted[j] = make([]float64, 0, p.n)
		for i := range p.filled {
			if v := p.x[i*p.d+j]; !math.IsNaN(float64(v)) {
				p.sorted[j] = append(p.sorted[j], float64(v))
			}
		}
		slices.Sort(p.sorted[j]) // (-0 and +0 may be held in another order than the live ring's: medianMAD reads them alike)
	}
	s.past = p
}
