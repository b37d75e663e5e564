package rank

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteTail is the tail score computed from the definition (pyod.models.ecod 3.x: the sum
// over features of max(U_l, U_r, U_skew) = max(U_l, U_r)), with counts by a full scan.
func bruteTail(cols [][]float32, q []float32, spread []float64) float64 {
	var sum float64
	for j, c := range cols {
		n := len(c)
		le, ge := 0, 0
		lo, hi := c[0], c[0]
		for _, v := range c {
			if v <= q[j] {
				le++
			}
			if v >= q[j] {
				ge++
			}
			lo, hi = min(lo, v), max(hi, v)
		}
		base := math.Log(float64(n))
		a := base - math.Log(float64(max(le, 1)))
		b := base - math.Log(float64(max(ge, 1)))
		if q[j] < lo {
			a += beyond((float64(lo)-float64(q[j]))/spread[j], base)
		}
		if q[j] > hi {
			b += beyond((float64(q[j])-float64(hi))/spread[j], base)
		}
		sum += max(a, b)
	}
	return sum
}

func TestTailMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d = 500, 4
	cols := make([][]float32, d)
	for j := range cols {
		cols[j] = make([]float32, n)
		for i := range cols[j] {
			switch j {
			case 0:
				cols[j][i] = float32(rng.NormFloat64())
			case 1:
				cols[j][i] = float32(rng.ExpFloat64()) // right-skewed
			case 2:
				cols[j][i] = float32(rng.IntN(3)) // discrete: ties
			default:
				cols[j][i] = 7 // constant
			}
		}
	}
	tl := NewTail(cols)
	if tl.Spread[3] != 1 {
		t.Fatalf("constant column's spread %v != 1", tl.Spread[3])
	}
	q := make([][]float32, d)
	for j := range q {
		q[j] = []float32{0, 5, -9, cols[j][3], 7.5}
	}
	q[2] = []float32{1, 2, 0, 4, -1}
	out := make([]float64, 5)
	tl.Score(q, out)
	for i := range out {
		row := []float32{q[0][i], q[1][i], q[2][i], q[3][i]}
		if want := bruteTail(cols, row, tl.Spread); math.Abs(out[i]-want) > 1e-9 {
			t.Errorf("row %d: score %v, definition %v", i, out[i], want)
		}
	}
	// A record further out ranks higher, also beyond the window's range.
	a, b := [][]float32{{4}, {1}, {1}, {7}}, [][]float32{{8}, {1}, {1}, {7}}
	sa, sb := make([]float64, 1), make([]float64, 1)
	tl.Score(a, sa)
	tl.Score(b, sb)
	if !(sb[0] > sa[0]) {
		t.Errorf("x0 = 8 scores %v, not above x0 = 4's %v", sb[0], sa[0])
	}
}

func TestCalibrationSurprisal(t *testing.T) {
	scores := []float64{5, 1, 3, 2, 4, 6, 7, 8, 9, 10} // 1..10
	c := NewCalibration(append(scores, math.NaN(), math.Inf(1)))
	if len(c.Sorted) != 10 {
		t.Fatalf("non-finite scores kept: %v", c.Sorted)
	}
	top := math.Log10(11)
	cases := []struct{ r, want float64 }{
		{10, top},                    // the largest: tail 1/(n+1)
		{1, top - math.Log10(10)},    // the smallest: tail n/(n+1)
		{5.5, top - math.Log10(5.5)}, // halfway between ranks 4 and 5 (0-based)
		{0, top - math.Log10(10)},    // below the range: as the smallest
	}
	for _, cs := range cases {
		if got := c.Surprisal(cs.r); math.Abs(got-cs.want) > 1e-12 {
			t.Errorf("Surprisal(%v) = %v, want %v", cs.r, got, cs.want)
		}
	}
	// Beyond the largest it keeps rising, continuously, at Slope.
	if got := c.Surprisal(12); math.Abs(got-(top+2*c.Slope)) > 1e-12 || c.Slope <= 0 {
		t.Errorf("Surprisal(12) = %v with slope %v", got, c.Slope)
	}
	// Monotone: ranks exactly as the raw score.
	prev := math.Inf(-1)
	for r := -1.0; r < 15; r += 0.01 {
		s := c.Surprisal(r)
		if s < prev {
			t.Fatalf("Surprisal not monotone at %v: %v < %v", r, s, prev)
		}
		prev = s
	}
}

// TestCalibrationKneeOutrunsWindowOutliers: a calibration whose top holds a few outliers (5 of
// 1005 scores at 10,000 against a bulk of 1..1000) still gives a new record far beyond the bulk
// a surprisal well above the bulk's top, rising with the score, although its rank among the
// calibration scores is below those outliers: the fitted tail beyond the knee (issue 20: the
// calibrated distances saturated at the window's edge).
func TestCalibrationKneeOutrunsWindowOutliers(t *testing.T) {
	var scores []float64
	for i := 1; i <= 1000; i++ {
		scores = append(scores, float64(i))
	}
	for range 5 {
		scores = append(scores, 10000)
	}
	c := NewCalibration(scores)
	emp := math.Log10(1006) - math.Log10(6) // the empirical surprisal just below the five: 2.22
	prev := c.Surprisal(1000)
	for _, r := range []float64{2000, 5000, 9000, 10000, 1e6, math.MaxFloat64 / 4} {
		s := c.Surprisal(r)
		if !(s > prev) || math.IsInf(s, 0) {
			t.Fatalf("Surprisal(%g) = %v after %v: want finite and rising", r, s, prev)
		}
		prev = s
	}
	if s := c.Surprisal(5000); s < emp+1 {
		t.Errorf("Surprisal(5000) = %v: the window's five outliers squeeze it to their rank (%v)", s, emp)
	}
}

// TestTailScoreExceptSkipsRows: ScoreExcept gives Score's bits for every row not skipped and NaN
// for the skipped ones (the detect stage leaves a warm key's records to its key's model).
func TestTailScoreExceptSkipsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const rows, n = 300, 57
	cols := make([][]float32, 3)
	q := make([][]float32, 3)
	for j := range cols {
		cols[j] = make([]float32, rows)
		for i := range cols[j] {
			cols[j][i] = float32(r.NormFloat64())
		}
		q[j] = make([]float32, n)
		for i := range q[j] {
			q[j][i] = float32(3 * r.NormFloat64())
		}
	}
	for _, c := range cols {
		slices.Sort(c)
	}
	tail := TailOfSorted(cols)
	want, got := make([]float64, n), make([]float64, n)
	tail.Score(q, want)
	skip := make([]bool, n)
	for i := range skip {
		skip[i] = r.IntN(3) == 0
	}
	tail.ScoreExcept(q, got, skip)
	for i := range got {
		switch {
		case skip[i] && !math.IsNaN(got[i]):
			t.Fatalf("row %d skipped: %v, want NaN", i, got[i])
		case !skip[i] && math.Float64bits(got[i]) != math.Float64bits(want[i]):
			t.Fatalf("row %d: %v, Score's %v", i, got[i], want[i])
		}
	}
}

// TestTailTiedFeatureUnit: a quantised sensor that reads one value on 97% of the window and the
// next quantum below on 3% (interquartile range 0). A step one quantum above, never seen, is
// as far out as the modified z-score puts it (|x - median| / (1.253314 * mean absolute
// deviation): 26.6 robust sd here), and its tail falls past 1/n^2 (u >= ln n). With the range
// as the unit (before) it was 1.35 robust sd and u = 1: ranked like a record just past a
// continuous feature's largest value.
func TestTailTiedFeatureUnit(t *testing.T) {
	const n, q = 1000, 3.0
	col := make([]float32, n)
	for i := range col {
		col[i] = 102
		if i%100 < 3 {
			col[i] = 102 - q
		}
	}
	tl := NewTail([][]float32{col})
	meanAD := 30 * q / n
	want := q / (1.253314 * meanAD) // IBM's modified z where the MAD is 0 (1/0.7979 = 1.2533)
	if got := tl.Deviation(0, 102+q); math.Abs(got-want) > 1e-3*want {
		t.Fatalf("a step one quantum up: %.4g robust sd, the modified z-score %.4g", got, want)
	}
	base := math.Log(n)
	edge, step := make([]float64, 1), make([]float64, 1)
	tl.Score([][]float32{{102 - q}}, edge) // the window's own rare quantum
	tl.Score([][]float32{{102 + q}}, step)
	if u := step[0] - base; u < base {
		t.Fatalf("a never-seen step one quantum up: surprisal %.3g, only %.3g past the window's edge (want >= ln n = %.3g)", step[0], u, base)
	}
	if !(step[0] > edge[0]) {
		t.Fatalf("the never-seen step %.3g does not rank above the window's rare quantum %.3g", step[0], edge[0])
	}
	// Still the range's unit's order: further out ranks higher, finite at FLT_MAX.
	far := make([]float64, 1)
	tl.Score([][]float32{{math.MaxFloat32}}, far)
	if !(far[0] > step[0]) || math.IsInf(far[0], 0) || math.IsNaN(far[0]) {
		t.Fatalf("FLT_MAX scores %v (step %v)", far[0], step[0])
	}
}

// TestBucketIndexStarts: newBucketIndex's start[b] is where bucket b's values start: the place
// of the first value whose bucket is b or above (n where none), the scan that the counts'
// running sums replace; for values that are not NaN, the number of values in the buckets below
// b (the index's definition). Windows of a key's size and the global window's, ties, values
// beyond the inner range (the end buckets), values on the buckets' edges, NaNs (sorted first).
func TestBucketIndexStarts(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{32, 33, 199, 200, 257, 4096, 20000} {
		for _, kind := range []string{"normal", "ties", "edges", "outliers", "nans"} {
			s := make([]float32, n)
			for i := range s {
				switch kind {
				case "normal":
					s[i] = float32(900 + 5*r.NormFloat64())
				case "ties":
					s[i] = float32(r.IntN(7))
				case "edges":
					s[i] = float32(r.IntN(n/8+1)) / float32(n/8) // on the buckets' edges of [0, 1]
				case "outliers", "nans":
					s[i] = float32(r.NormFloat64())
					if r.IntN(50) == 0 {
						s[i] *= 1e6
					}
					if kind == "nans" && i < n/300 {
						s[i] = float32(math.NaN()) // (fewer than n/256: the index's inner range stays numbers)
					}
				}
			}
			slices.Sort(s)
			ix, ok := newBucketIndex(s, make([]int32, indexBuckets(s)+2))
			if !ok {
				t.Fatalf("n=%d %s: no index", n, kind)
			}
			if len(ix.start) != n/valuesPerBucket+2 {
				t.Fatalf("n=%d %s: %d starts", n, kind, len(ix.start))
			}
			for b := range ix.start {
				first, below := n, 0
				for i, v := range s {
					if v != v {
						continue
					}
					if vb := ix.bucket(v); vb < b {
						below++
					} else if first == n {
						first = i
					}
				}
				if b == 0 {
					first = 0
				}
				if int(ix.start[b]) != first || kind != "nans" && int(ix.start[b]) != below {
					t.Fatalf("n=%d %s: start[%d] = %d, want %d (%d below)", n, kind, b, ix.start[b], first, below)
				}
			}
		}
	}
}
