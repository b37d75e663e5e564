package detect

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestRecentRingRanks: against the held scores, Recent is -log10 of the conformal tail
// probability (1 + #{held >= x}) / (m + 1); beyond the largest it is log10(m + 1) plus the
// excess; it never falls as x rises; a NaN is neither ranked nor held; a resize keeps the newest.
func TestRecentRingRanks(t *testing.T) {
	var r recentRing
	if v := r.rank(3, 4, 0); v != 3 {
		t.Fatalf("empty ring: %v, want the score itself", v)
	}
	for _, x := range []float64{1, 2, 0.5} {
		r.rank(x, 4, 0)
	}
	// held: 3, 1, 2, 0.5 (m = 4)
	probe := func(x float64) float64 {
		c := r.clone() // probing must not add to r (rank adds x to the ring)
		return c.rank(x, 4, 0)
	}
	for _, tc := range []struct{ x, want float64 }{
		{2, math.Log10(5) - math.Log10(3)},   // 2 and 3 at or above
		{0.1, math.Log10(5) - math.Log10(5)}, // all four: 0
		{4.5, math.Log10(5) + 1.5},           // beyond the largest (3) by 1.5
	} {
		if got := probe(tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("rank(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	prev := math.Inf(-1)
	for x := -1.0; x < 10; x += 0.01 {
		v := probe(x)
		if v < prev {
			t.Fatalf("rank(%v) = %v fell below %v", x, v, prev)
		}
		prev = v
	}
	if v := r.rank(math.NaN(), 4, 0); !math.IsNaN(v) || r.filled != 4 || r.next != 0 {
		t.Fatalf("NaN: %v, filled %d next %d", v, r.filled, r.next)
	}
	r.rank(7, 4, 0) // replaces the oldest (3): held 7, 1, 2, 0.5
	r.resize(2, 0)  // keeps the newest two: 0.5 and 7
	if got := probe(6); r.filled != 2 || math.Abs(got-(math.Log10(3)-math.Log10(2))) > 1e-12 {
		t.Errorf("after resize: filled %d, rank(6) = %v", r.filled, got)
	}
}

// TestRecentRanksAcrossSeries: the case detect.recent_scores is for (NAB's corpus-wide
// threshold, a fleet paged on one threshold). Series B's level jumps 40 sd and stays there: its
// records are significant for the window (outcasts: a fault does not become normal by
// repeating) and their combined scores stay above series A's one spike of 15 sd, so one
// threshold on the combined score pages on B's continuing fault before A's spike. Recent ranks
// each record among its own series' last recent_scores scores: B's continuing records fall below
// min_score (log10(51) = 1.7 within their recent range, a little more where one rises beyond
// it) and A's spike stays far above them. The flags do not change.
func TestRecentRanksAcrossSeries(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords = 5000, 1000
	cfg.Distance.N = 5
	const n, at = 8000, 6000
	a, _ := sensorStream(n, 11, func(i int, _ *rand.Rand) (float32, bool) {
		if i == at {
			return 30, true // 15 sd of the temperature's noise
		}
		return 0, false
	}, nil)
	b, _ := sensorStream(n, 12, nil, func(i int) float32 {
		if i >= 3000 {
			return 80 // 40 sd
		}
		return 0
	})
	scoresA, recentA, flagsA, _, _ := streamScoresRecent(t, cfg, a)
	scoresB, recentB, flagsB, _, _ := streamScoresRecent(t, cfg, b)
	topScoreB, topRecentB := math.Inf(-1), math.Inf(-1)
	for i := 3100; i < n; i++ {
		topScoreB, topRecentB = max(topScoreB, scoresB[i]), max(topRecentB, recentB[i])
	}
	t.Logf("A's spike: score %.2f recent %.2f; B after its first 100 shifted records: top score %.2f, top recent %.2f", scoresA[at], recentA[at], topScoreB, topRecentB)
	if !(scoresA[at] < topScoreB) {
		t.Fatalf("the combined score already ranks A's spike (%.2f) above B's fault (%.2f): the case is not made", scoresA[at], topScoreB)
	}
	if !(topRecentB < cfg.MinScore) || !(recentA[at] > topRecentB+1) {
		t.Errorf("recent: A's spike %.2f, B's continuing fault up to %.2f: want the fault below min_score %g and the spike above it by > 1", recentA[at], topRecentB, cfg.MinScore)
	}
	off := cfg
	off.RecentScores = 0
	_, flagsA0, _, _ := streamScores(t, off, a)
	_, flagsB0, _, _ := streamScores(t, off, b)
	for i := range n {
		if flagsA[i] != flagsA0[i] || flagsB[i] != flagsB0[i] {
			t.Fatalf("row %d: recent_scores changed a flag", i)
		}
	}
}

// naiveRecent is the recent score by its definition, the reference for recentRing: a scan of
// the held scores (held: in any order) for #{held >= x} and their largest; beyond the largest,
// the horizon's block maxima (peaks, in any order) sorted, and covered the records the ring and
// the blocks hold.
func naiveRecent(held, peaks []float64, covered int, x float64) float64 {
	if len(held) == 0 {
		return x
	}
	ge, top := 0, math.Inf(-1)
	for _, y := range held {
		if y >= x {
			ge++
		}
		top = max(top, y)
	}
	n := float64(len(held) + 1)
	if ge > 0 {
		return math.Log10(n) - math.Log10(float64(1+ge))
	}
	desc := slices.Clone(peaks)
	slices.SortFunc(desc, func(a, b float64) int { return cmp.Compare(b, a) })
	c := 0
	for c < len(desc) && desc[c] >= x {
		c++
	}
	rank := math.Log10(float64(max(len(held), covered)+1)) - math.Log10(float64(1+c))
	if c >= recentPeaks {
		return max(math.Log10(n), rank)
	}
	third := math.Inf(-1) // the recentPeaks-th largest block maximum (below x here)
	if len(desc) >= recentPeaks {
		third = desc[recentPeaks-1]
	}
	return rank + (x - max(top, third))
}

// TestRecentRingMatchesDefinition: the ring's rank (a binary search in its index by score) equals
// the definition's scan bit for bit, over random streams with ties (quantised scores), ±Inf,
// NaN (not held), and resizes of recent_scores up and down, across the index's widths, with
// and without a horizon of block maxima (recent_horizon, restarted by a resize; seed printed).
func TestRecentRingMatchesDefinition(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 20))
	var ring recentRing
	var held []float64  // oldest first
	var since []float64 // every score held since the horizon (re)started, for its blocks
	m, blocks := 1+r.IntN(50), r.IntN(8)
	for i := range 20000 {
		if r.IntN(2000) == 0 { // detect.recent_scores or recent_horizon changed
			m0, b0 := m, blocks
			switch m, blocks = 1+r.IntN(120), r.IntN(40); r.IntN(4) {
			case 0: // an index of 2 bytes a position
				m = 257 + r.IntN(500)
			case 1: // of 3 (not filled here: its insertions only)
				m = 1<<16 + 1 + r.IntN(10)
			}
			held = held[max(0, len(held)-m):]
			if m != m0 || blocks != b0 {
				since = nil
			}
		}
		x := randomRecentScore(r, true)
		got := ring.rank(x, m, blocks)
		want := math.NaN()
		if !math.IsNaN(x) {
			var peaks []float64 // the maxima of the last `blocks` complete blocks of m
			complete := len(since) / m
			for k := max(0, complete-blocks); k < complete; k++ {
				peaks = append(peaks, slices.Max(since[k*m:(k+1)*m]))
			}
			covered := 0
			if blocks > 0 {
				covered = len(peaks)*m + len(since)%m
			}
			want = naiveRecent(held, peaks, covered, x)
			held = append(held, x)[max(0, len(held)+1-m):]
			if since = append(since, x); blocks > 0 && len(since) > (blocks+1)*m {
				since = since[m:] // (whole blocks only: the chunking above stays aligned)
			}
		}
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("record %d (x %v, m %d, blocks %d, %d held): rank %v, want %v", i, x, m, blocks, len(held), got, want)
		}
	}
}

// randomRecentScore is a score for the recent ranks' definition tests: NaN and +Inf (and -Inf
// with negInf) now and then, ties half the time, the rest uniform.
func randomRecentScore(r *rand.Rand, negInf bool) float64 {
	switch k := r.IntN(100); {
	case k == 0:
		return math.NaN()
	case k == 1:
		return math.Inf(1)
	case k == 2 && negInf:
		return math.Inf(-1)
	case k < 50:
		return float64(r.IntN(8)) / 2 // ties
	default:
		return 10 * r.Float64()
	}
}

// BenchmarkRecentRank: one record's recent score at the default recent_scores and recent_horizon
// (50 and 60 blocks since §12.12; 100 and none before; the episode since §12.14), the ring
// against the definition's scan over the same stream of scores (both in one run).
func BenchmarkRecentRank(b *testing.B) {
	cfg := Default()
	m, blocks := cfg.RecentScores, cfg.RecentBlocks()
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = 10 * r.Float64()
	}
	b.Run("ring", func(b *testing.B) { // the stage's path: the rank, then the episode (§12.14)
		var ring recentRing
		for i := 0; b.Loop(); i++ {
			ring.score(xs[i%len(xs)], m, blocks)
		}
	})
	b.Run("scan", func(b *testing.B) { // the ring before: a scan of the held scores
		held := make([]float64, 0, m)
		next := 0
		for i := 0; b.Loop(); i++ {
			x := xs[i%len(xs)]
			naiveRecent(held, nil, 0, x) // (the horizon's scan, for the few beyond the ring, not counted)
			if len(held) < m {
				held = append(held, x)
			} else {
				held[next], next = x, (next+1)%m
			}
		}
	})
}

// TestRecentHorizonReturningBurst: the case recent_horizon is for (NAB's low-FP profile,
// docs/BENCHMARKS.md §12.12: a CPU that bursts once a day, a volume that spikes every few hours).
// A series of ordinary scores in [0, 2) bursts to 30 every 288 records (daily at 5 minutes),
// beyond its last recent_scores scores every time. Without a horizon each return ranks about 30,
// far above min_score, for ever. With the default horizon (3000 records), the first recentPeaks
// bursts still stand out (fewer than recentPeaks blocks reached them), every later one ranks by
// its count among the horizon's blocks, below min_score; a burst higher than the returns (45)
// still stands out by its excess over them.
func TestRecentHorizonReturningBurst(t *testing.T) {
	cfg := Default()
	m, blocks := cfg.RecentScores, cfg.RecentBlocks()
	if m > 288 || blocks*m < 3000 {
		t.Fatalf("defaults: recent_scores %d, %d blocks; the case below needs a ring shorter than the period and a horizon of 3000", m, blocks)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var with, without recentRing
	const period, bursts = 288, 10
	for i := range period * bursts {
		x := 2 * r.Float64()
		if i%period == period-1 {
			x = 30
		}
		if i == period*bursts-1 {
			x = 45
		}
		v, v0 := with.rank(x, m, blocks), without.rank(x, m, 0)
		if i%period != period-1 {
			continue
		}
		nth := i / period // bursts before this one
		t.Logf("burst %d (%g): recent %.2f with the horizon, %.2f without", nth+1, x, v, v0)
		if v0 < 25 {
			t.Errorf("burst %d without a horizon: recent %.2f, want about its excess (>= 25)", nth+1, v0)
		}
		switch {
		case x == 45:
			if v < 15 {
				t.Errorf("the higher burst: recent %.2f, want >= 15 (its excess of 15 over the returns)", v)
			}
		case nth < recentPeaks:
			if v < cfg.MinScore {
				t.Errorf("burst %d: recent %.2f, want >= min_score %g (fewer than %d blocks reached it)", nth+1, v, cfg.MinScore, recentPeaks)
			}
		default:
			if v >= cfg.MinScore {
				t.Errorf("burst %d: recent %.2f, want < min_score %g (%d blocks of the horizon reached it)", nth+1, v, cfg.MinScore, nth)
			}
		}
	}
}
