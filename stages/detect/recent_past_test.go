package detect

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// TestMedianMAD: the sorted values' median and MAD equal a sort's of the deviations (the mean of
// the two middle values for an even count), bit for bit, on random lengths with many ties (a
// quantised sensor's past, MAD 0 often), with few, and on one-sided pasts (every deviation on
// one side of the median but the median's own) (seed printed).
func TestMedianMAD(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for trial := range 20000 {
		n := 1 + r.IntN(120)
		a := make([]float64, n)
		for i := range a {
			switch trial % 3 {
			case 0:
				a[i] = float64(r.IntN(4)) // ties
			case 1:
				a[i] = r.NormFloat64()
			default:
				a[i] = math.Exp(3 * r.NormFloat64()) // skewed: long runs on one side
			}
		}
		slices.Sort(a)
		med := float64((a[(n-1)/2] + a[n/2]) / 2) // (rounded, as medianMAD rounds it)
		dev := make([]float64, n)
		for i, v := range a {
			dev[i] = math.Abs(v - med)
		}
		slices.Sort(dev)
		mad := (dev[(n-1)/2] + dev[n/2]) / 2
		if gm, gd := medianMAD(a); gm != med || gd != mad {
			t.Fatalf("trial %d, n %d: median %v MAD %v, want %v %v (sorted %v)", trial, n, gm, gd, med, mad, a)
		}
	}
}

// pastDefinition is pastRing.decades by its definition over the previous n rows: log10(1 + the
// largest robust z over the features), NaN values left out, a feature without spread adding 0.
func pastDefinition(rows [][]float32, i, n int) float64 {
	z := 0.0
	for j := range rows[i] {
		v := float64(rows[i][j])
		var col []float64
		for r := max(0, i-n); r < i; r++ {
			if u := float64(rows[r][j]); !math.IsNaN(u) {
				col = append(col, u)
			}
		}
		if math.IsNaN(v) || len(col) == 0 {
			continue
		}
		slices.Sort(col)
		med := float64((col[(len(col)-1)/2] + col[len(col)/2]) / 2) // (rounded, as medianMAD rounds it)
		dev, sum := make([]float64, len(col)), 0.0
		for k, u := range col {
			dev[k] = math.Abs(u - med)
			sum += dev[k]
		}
		slices.Sort(dev)
		scale := (dev[(len(dev)-1)/2] + dev[len(dev)/2]) / 2 / 0.6745
		if !(scale > 0) {
			scale = sum / float64(len(dev)) / 0.7979
		}
		if scale > 0 {
			z = max(z, math.Abs(v-med)/scale)
		}
	}
	return math.Log10(1 + z)
}

// TestPastRingMatchesDefinition: the ring's decades equal the definition's record by record,
// on a stream with a quantised feature (MAD 0 for long stretches), a constant one, NaNs and a
// resize (recent_past changed: the past starts afresh).
func TestPastRingMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const d = 3
	rows := make([][]float32, 3000)
	for i := range rows {
		rows[i] = []float32{float32(20 + r.NormFloat64()), float32(32 + r.IntN(2)*0), 5}
		if r.IntN(40) == 0 {
			rows[i][1] = 33 // a one-quantum step
		}
		if r.IntN(100) == 0 {
			rows[i][0] = float32(math.NaN())
		}
	}
	rows[2500][2] = 6 // the constant one moves
	var p pastRing
	start := 0
	for i, row := range rows {
		n := 100
		if i >= 1500 {
			n = 37
		}
		if p.n != n {
			p.resize(n, d)
			start = i
		}
		got := p.decades(row)
		want := pastDefinition(rows[start:], i-start, n)
		if got != want { // (the same float64 values, middle elements and summation order: exact)
			t.Fatalf("row %d: decades %v, want %v", i, got, want)
		}
	}
	if w := pastDefinition(rows, 2500, 37); w > 2 {
		t.Fatalf("the constant feature's move must add nothing (no spread): %v", w)
	}
}

// TestRecentPastAddsToTheRank: what recent_past does through the stage (docs/BENCHMARKS.md
// §12.19, §12.21). A plant drifts away from its first model (3 sd of the first records every 50,
// as a file's first model at replay's cadence sees it), then a second sensor steps by 3 sd.
// Every record's Recent is the ring's rank of its combined score plus its recent past's decades
// (pastDefinition over the previous 100 records) times the weight: 1 under recent_past_weight:
// one, and under stale the share of the previous 100 records whose combined score reached 2
// decades. The flags and combined scores are those without the option, and the step's first
// record stands further above every pre-fault record with it than without (the drift is
// ordinary against the last 100 records, the step is not).
func TestRecentPastAddsToTheRank(t *testing.T) {
	const rows, onset, past = 1000, 800, 100
	r := rand.New(rand.NewPCG(3, 3))
	d := &synth.Data{Features: []string{"a", "b"}, Cols: make([][]float32, 2), SD: make([][]float32, 2)}
	raw := make([][]float32, rows)
	for i := range rows {
		a, b := 70+0.06*float64(max(0, i-200))+r.NormFloat64(), 10+r.NormFloat64()
		if i >= onset {
			b += 3
		}
		raw[i] = []float32{float32(a), float32(b)}
		d.Cols[0], d.Cols[1] = append(d.Cols[0], raw[i][0]), append(d.Cols[1], raw[i][1])
		d.SD[0], d.SD[1] = append(d.SD[0], 0), append(d.SD[1], 0)
	}
	run := func(past int, w RecentPastWeight) (score, recent []float64, flags []bool) {
		cfg := Default()
		cfg.Window, cfg.MinRecords, cfg.RecentPast, cfg.RecentPastWeight = 5000, 200, past, w
		score, recent, flags, _, _ = streamScoresRecent(t, cfg, d)
		return
	}
	offScore, off, offFlags := run(0, PastWeightStale)
	top := func(v []float64) float64 { return slices.Max(v[300:onset]) }
	for _, w := range []RecentPastWeight{PastWeightOne, PastWeightStale} {
		onScore, on, onFlags := run(past, w)
		if !slices.Equal(offFlags, onFlags) || !slices.Equal(offScore, onScore) {
			t.Fatalf("%s: recent_past changed a flag or a combined score", w)
		}
		var ring recentRing
		cfg := Default()
		partial := 0 // records whose stale weight is neither 0 nor 1 (the weight is exercised)
		for i := range rows {
			weight := 1.0
			if w == PastWeightStale {
				weight = staleShare(onScore, i, past)
				if weight > 0 && weight < 1 {
					partial++
				}
			}
			want := ring.score(onScore[i]+float64(weight*pastDefinition(raw, i, past)), cfg.RecentScores, cfg.RecentBlocks())
			if math.Abs(on[i]-want) > 1e-12*max(1, math.Abs(want)) { // (the same arithmetic in another order: the share's division)
				t.Fatalf("%s, record %d: recent %v, want the rank of score %v plus %v x its past's decades: %v", w, i, on[i], onScore[i], weight, want)
			}
		}
		if w == PastWeightStale && partial < rows/4 {
			t.Errorf("stale: %d records of %d weighed strictly between 0 and 1: the test does not exercise the weight", partial, rows)
		}
		t.Logf("%s: %d partial weights; step's first record: recent %.2f, largest pre-fault %.2f (without recent_past %.2f, %.2f)", w, partial, on[onset], top(on), off[onset], top(off))
		if !(on[onset]-top(on) > off[onset]-top(off)) {
			t.Errorf("%s: the step's lead over the pre-fault records: %.2f with recent_past, %.2f without", w, on[onset]-top(on), off[onset]-top(off))
		}
	}
}

// staleShare is recent_past_weight: stale's weight of record i by its definition: the share of
// the previous n records (fewer at the start; 0 with none) whose combined score reached 2 decades.
func staleShare(score []float64, i, n int) float64 {
	if i == 0 {
		return 0
	}
	hits := 0
	for _, sc := range score[max(0, i-n):i] {
		if sc >= 2 {
			hits++
		}
	}
	return float64(hits) / float64(min(i, n))
}

// BenchmarkPastDecades: one record's recent past decades at recent_past 100 with SKAB's 8
// features (docs/BENCHMARKS.md §12.19: the option's cost per record on the stage's goroutine).
func BenchmarkPastDecades(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][]float32, 4096)
	for i := range rows {
		rows[i] = make([]float32, 8)
		for j := range rows[i] {
			rows[i][j] = float32(r.NormFloat64())
		}
		rows[i][7] = 32 + float32(r.IntN(2)) // a quantised one
	}
	var p pastRing
	p.resize(100, 8)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.decades(rows[i%len(rows)])
	}
}

// TestValidateRecentPast: recent_past is refused out of range and with key_by: key (the stream's
// series only), naming detect.recent_past; 100 with key_by: none passes.
func TestValidateRecentPast(t *testing.T) {
	for _, tc := range []struct {
		past  int
		keyed bool
		ok    bool
	}{{100, false, true}, {0, true, true}, {-1, false, false}, {1<<16 + 1, false, false}, {100, true, false}} {
		c := Default()
		c.RecentPast = tc.past
		if tc.keyed {
			c.KeyBy = KeyByKey
		}
		err := c.Validate()
		if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "detect.recent_past: ") {
			t.Errorf("recent_past %d, keyed %v: %v", tc.past, tc.keyed, err)
		}
	}
}
