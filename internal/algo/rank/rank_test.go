package rank

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteTail is the tail score computed from the definition: within the window's
// [TailQuantile, 1 - TailQuantile] quantiles the sum over features of max(U_l, U_r) of
// pyod.models.ecod 3.x (counts by a full scan); beyond them the fitted exponential tails,
// continuous at the quantiles.
func bruteTail(cols [][]float32, q []float32, spread []float64) float64 {
	var sum float64
	for j, c := range cols {
		s := slices.Clone(c)
		slices.Sort(s)
		n := len(s)
		at := func(p float64) float64 { return float64(s[int(math.Round(p*float64(n-1)))]) }
		lo, hi := at(TailQuantile), at(1-TailQuantile)
		count := func(x float32) (le, ge int) {
			for _, v := range c {
				if v <= x {
					le++
				}
				if v >= x {
					ge++
				}
			}
			return le, ge
		}
		base := math.Log(float64(n))
		x := float64(q[j])
		switch {
		case x > hi:
			scale := (hi - at(1-10*TailQuantile)) / math.Ln10
			if !(scale > 0) {
				scale = spread[j]
			}
			_, ge := count(float32(hi))
			_, gx := count(q[j])
			sum += max(base-math.Log(float64(ge))+beyond((x-hi)/scale, base), base-math.Log(float64(max(gx, 1))))
		case x < lo:
			scale := (at(10*TailQuantile) - lo) / math.Ln10
			if !(scale > 0) {
				scale = spread[j]
			}
			le, _ := count(float32(lo))
			lx, _ := count(q[j])
			sum += max(base-math.Log(float64(le))+beyond((lo-x)/scale, base), base-math.Log(float64(max(lx, 1))))
		default:
			le, ge := count(q[j])
			sum += base - math.Log(float64(max(min(le, ge), 1)))
		}
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
