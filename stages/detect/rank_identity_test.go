package detect

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// rowsOf lists the rows of column-major cols as value tuples, sorted: the multiset of records.
func rowsOf(cols [][]float32) [][3]float32 {
	out := make([][3]float32, len(cols[0]))
	for i := range out {
		for j := range 3 {
			out[i][j] = cols[j][i]
		}
	}
	slices.SortFunc(out, func(a, b [3]float32) int { return slices.Compare(a[:], b[:]) })
	return out
}

// shuffled returns cols with their rows permuted (the same records in another window order).
func shuffled(cols [][]float32, seed uint64) [][]float32 {
	perm := rand.New(rand.NewPCG(seed, 1)).Perm(len(cols[0]))
	return pick(cols, perm)
}

// TestRankerFollowsRecordsNotPositions: the ranking part of a model is a function of the
// window's records, not of their order: the same records in another order give the same sample
// R (the same points, in the same order), the same calibration and therefore the same scores.
// On the code that drew R and the calibration records by window position with a seeded
// permutation, the shuffled window gave another R and other scores.
func TestRankerFollowsRecordsNotPositions(t *testing.T) {
	d := testData(3000, 5)
	cfg := testConfig()
	cfg.Score.Sample, cfg.AlarmRate = 500, 0.02
	build := func(cols [][]float32) *Ranker {
		r, err := buildRanker(cols, sortedColumns(cols), d.Features, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := build(d.Cols), build(shuffled(d.Cols, 77))
	for j := range a.Ref.Points {
		if !slices.Equal(a.Ref.Points[j], b.Ref.Points[j]) {
			t.Fatalf("feature %d: the shuffled window's sample R differs", j)
		}
	}
	if !slices.Equal(a.Combined(), b.Combined()) || !slices.Equal(a.Center, b.Center) || !slices.Equal(a.Unit, b.Unit) {
		t.Fatal("the shuffled window's calibration differs")
	}
	// Every record scored by both: the same raw and combined scores.
	q, n := d.Cols, len(d.Cols[0])
	ta, tb, da, db := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	a.Tail.Score(q, ta)
	b.Tail.Score(q, tb)
	a.Ref.ScoreBatch(a.distanceSpace(q, nil), da, 0)
	b.Ref.ScoreBatch(b.distanceSpace(q, nil), db, 0)
	for i := range da {
		if da[i] != db[i] || a.combine(ta[i], da[i]) != b.combine(tb[i], db[i]) {
			t.Fatalf("record %d: distance score %v, combined %v in file order; %v, %v shuffled",
				i, da[i], a.combine(ta[i], da[i]), db[i], b.combine(tb[i], db[i]))
		}
	}
}

// TestRankerSampleCountsCopies: R is a uniform sample of the window's records, so a value that
// half the window repeats (a stuck sensor) fills about half of R; choosing by a hash of the
// values alone would put all of its copies in R or none.
func TestRankerSampleCountsCopies(t *testing.T) {
	d := testData(4000, 6)
	cols := pick(d.Cols, make([]int, 4000)) // all rows copies of row 0 ...
	for j := range cols {
		copy(cols[j][2000:], d.Cols[j][2000:]) // ... except the second half
	}
	cfg := testConfig()
	cfg.Score.Sample = 1000
	r, err := buildRanker(cols, sortedColumns(cols), d.Features, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stuck, s := 0, r.distanceSpace(pick(cols, []int{0}), nil) // R's points are in the distance space
	for i := range r.Ref.Points[0] {
		if r.Ref.Points[0][i] == s[0][0] && r.Ref.Points[1][i] == s[1][0] && r.Ref.Points[2][i] == s[2][0] {
			stuck++
		}
	}
	// Hypergeometric: 1000 of 4000 with 2000 marked, sd about 14: 440..560 is beyond 4 sd.
	if stuck < 440 || stuck > 560 {
		t.Fatalf("%d of R's 1000 records are the stuck value, want about 500", stuck)
	}
	if got := rowsOf(r.Ref.Points); len(got) != 1000 {
		t.Fatalf("R has %d records", len(got))
	}
}

// TestRecordKeysParallel: the keys on several goroutines (shards of the hash space) are the
// serial pass's, copies included.
func TestRecordKeysParallel(t *testing.T) {
	d := testData(100000, 8)
	cols := pick(d.Cols, make([]int, 100000)) // copies of row 0 ...
	for j := range cols {
		copy(cols[j][30000:], d.Cols[j][30000:]) // ... then distinct rows
	}
	want := recordKeysOn(cols, 3, 1)
	for _, w := range []int{2, 3, 8} {
		if !slices.Equal(recordKeysOn(cols, 3, w), want) {
			t.Fatalf("%d workers: other keys than one", w)
		}
	}
	seen := map[uint64]bool{}
	for _, k := range want {
		seen[k.key] = true
	}
	if len(seen) != 100000 {
		t.Fatal("copies share a key")
	}
}

// BenchmarkRankerSamples: choosing R (2048) and the calibration records (4096) of a window of
// 1M records of 8 features by identity (sample.go), against the two seeded permutations of
// window positions it replaced.
func BenchmarkRankerSamples(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	cols := make([][]float32, 8)
	for j := range cols {
		cols[j] = make([]float32, 1<<20)
		for i := range cols[j] {
			cols[j][i] = float32(rng.NormFloat64())
		}
	}
	b.Run("identity", func(b *testing.B) {
		for b.Loop() {
			keys := recordKeys(cols, 1)
			smallestKeys(keys, 2048, saltSample)
			smallestKeys(keys, 4096, saltCalibration)
		}
	})
	b.Run("position", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 0x72616e6b))
		for b.Loop() {
			_ = r.Perm(1 << 20)[:2048]
			_ = r.Perm(1 << 20)[:4096]
		}
	})
}
