package detect

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRecentEpisodeRanksOnce: the case the episode rule is for (docs/BENCHMARKS.md §12.14, SKAB's
// valve experiments at replay's cadence). Series A's model has gone stale: its combined scores
// drift up record after record (0.2 a record, noise of 2), so record after record rises beyond
// its last recent_scores scores. Series B is ordinary until its fault, a small jump (1, half
// its noise's range) that stays. One threshold across both must take B's onset with as few of
// A's drift records as it can: by rank alone each record of A's drift beyond its ring ranks by
// its rank among the horizon plus its excess again, and 24 of them reach B's onset; with the
// rule a record that does not rise above its series' peak rank over the current and previous
// block ranks below 0, and A keeps only the records that rise above that peak (5).
func TestRecentEpisodeRanksOnce(t *testing.T) {
	cfg := Default()
	m, blocks := cfg.RecentScores, cfg.RecentBlocks()
	r := rand.New(rand.NewPCG(5, 6))
	const n, drift, fault = 600, 200, 400
	var a, a0, b, b0 recentRing
	var aScore, aRank []float64
	var onset, onset0 float64
	for i := range n {
		xa := 2 * r.Float64()
		if i >= drift {
			xa += 0.2 * float64(i-drift)
		}
		aScore, aRank = append(aScore, a.score(xa, m, blocks)), append(aRank, a0.rank(xa, m, blocks))
		xb := 2 * r.Float64()
		if i >= fault {
			xb += 1
		}
		v, v0 := b.score(xb, m, blocks), b0.rank(xb, m, blocks)
		if i == fault {
			onset, onset0 = v, v0
		}
	}
	above := func(s []float64, at float64) int {
		c := 0
		for _, v := range s[drift:] {
			if v >= at {
				c++
			}
		}
		return c
	}
	with, without := above(aScore, onset), above(aRank, onset0)
	t.Logf("B's onset: recent %.2f (rank alone %.2f); A's drift records at or above it: %d of %d (rank alone: %d)", onset, onset0, with, n-drift, without)
	if onset0 != onset {
		t.Errorf("B's onset is new in its series (above its peak): recent %v, want its rank %v", onset, onset0)
	}
	// A's records that reach B's onset by rank alone rise beyond A's ring by about as much as
	// B's onset rises beyond B's; only those above A's own peak so far stay (a third is a wide
	// margin around the 5 of 24 this seed gives; 10 bounds them absolutely).
	if without < 15 {
		t.Fatalf("rank alone puts only %d of A's drift records at or above B's onset: the case is not made", without)
	}
	if with > without/3 || with > 10 {
		t.Errorf("A's drift has %d records at or above B's onset (rank alone: %d): want at most a third of them and at most 10", with, without)
	}
	for i, v := range aScore { // every record that is not new is below every new one
		if v > 0 && v != aRank[i] {
			t.Fatalf("A's record %d: recent %v above 0 but not its rank %v", i, v, aRank[i])
		}
	}
}

// TestRecentEpisodeMatchesDefinition: score is the rank minus the peak rank of the current and
// previous block of m ranked records where it does not rise above that peak (0 at it), the
// blocks counted from the ring's start and restarted by a resize; NaN is neither ranked nor
// counted (random streams with ties, ±Inf and NaN; seed fixed: the definition, not the ring's
// search, is under test here).
func TestRecentEpisodeMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var ring, plain recentRing
	m, blocks := 1+r.IntN(60), r.IntN(6)
	var ranks []float64 // the ranks since the blocks (re)started
	for i := range 20000 {
		if r.IntN(3000) == 0 {
			m0, b0 := m, blocks
			m, blocks = 1+r.IntN(60), r.IntN(6)
			if m != m0 || blocks != b0 {
				ranks = nil
			}
		}
		x := randomRecentScore(r, false)
		got, v := ring.score(x, m, blocks), plain.rank(x, m, blocks)
		want := v
		if !math.IsNaN(v) {
			peak := 0.0 // ranks are >= 0 (or the first record's x itself: >= 0 here)
			for _, p := range ranks[max(0, (len(ranks)/m-1)*m):] {
				peak = max(peak, p)
			}
			switch {
			case v == peak:
				want = 0
			case v < peak:
				want = v - peak
			}
			ranks = append(ranks, v)
		}
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("record %d (x %v, m %d): score %v, want %v", i, x, m, got, want)
		}
	}
}
