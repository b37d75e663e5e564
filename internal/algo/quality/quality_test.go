package quality

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestROCAUCKnownValues(t *testing.T) {
	cases := []struct {
		scores []float64
		labels []bool
		want   float64
	}{
		{[]float64{1, 2, 3, 4}, []bool{false, false, true, true}, 1},
		{[]float64{4, 3, 2, 1}, []bool{false, false, true, true}, 0},
		{[]float64{1, 1, 1, 1}, []bool{false, true, false, true}, 0.5},
		// outliers score {3,1}, inliers {2,1}: 3>2, 3>1, 1<2, 1=1 -> (1+1+0+0.5)/4
		{[]float64{3, 2, 1, 1}, []bool{true, false, true, false}, 2.5 / 4},
	}
	for i, c := range cases {
		if got := ROCAUC(c.scores, c.labels); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("case %d: got %g want %g", i, got, c.want)
		}
	}
	if !math.IsNaN(ROCAUC([]float64{1, 2}, []bool{true, true})) {
		t.Error("one class: want NaN")
	}
}

// TestROCAUCMatchesPairCount checks the rank formula against the definition on random data
// with many ties.
func TestROCAUCMatchesPairCount(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		n := 2 + r.IntN(60)
		s := make([]float64, n)
		l := make([]bool, n)
		for i := range s {
			s[i] = float64(r.IntN(5))
			l[i] = r.IntN(3) == 0
		}
		var num, den float64
		for i := range s {
			for j := range s {
				if l[i] && !l[j] {
					den++
					switch {
					case s[i] > s[j]:
						num++
					case s[i] == s[j]:
						num += 0.5
					}
				}
			}
		}
		got := ROCAUC(s, l)
		if den == 0 {
			if !math.IsNaN(got) {
				t.Fatalf("want NaN, got %g", got)
			}
			continue
		}
		if math.Abs(got-num/den) > 1e-12 {
			t.Fatalf("got %g, pair count %g", got, num/den)
		}
	}
}

func TestConfusion(t *testing.T) {
	c := Count([]bool{true, true, false, false, true}, []bool{true, false, true, false, true})
	if c != (Confusion{TP: 2, FP: 1, FN: 1, TN: 1}) {
		t.Fatalf("%+v", c)
	}
	if math.Abs(c.Precision()-2.0/3) > 1e-12 || math.Abs(c.Recall()-2.0/3) > 1e-12 || math.Abs(c.F1()-2.0/3) > 1e-12 {
		t.Fatalf("p %g r %g f1 %g", c.Precision(), c.Recall(), c.F1())
	}
	if (Confusion{FN: 3}).F1() != 0 {
		t.Fatal("empty detection must score F1 0")
	}
	if p := PrecisionAtN([]int{0, 2}, []bool{true, false, false}); p != 0.5 {
		t.Fatalf("precision@n %g", p)
	}
}

func TestAveragePrecisionKnownValues(t *testing.T) {
	cases := []struct {
		scores []float64
		labels []bool
		want   float64
	}{
		// scikit-learn's documented example: average_precision_score([0,0,1,1], [.1,.4,.35,.8]) = 0.8333
		{[]float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, (1.0 + 2.0/3) / 2},
		{[]float64{4, 3, 2, 1}, []bool{true, true, false, false}, 1},
		{[]float64{1, 2, 3, 4}, []bool{true, false, false, false}, 0.25},
		// all tied: one threshold, precision = prevalence
		{[]float64{5, 5, 5, 5, 5}, []bool{true, false, true, false, false}, 0.4},
		// ties across classes at the top: {3: T, F} then {1: T}: 0.5*0.5 + 0.5*(2/3)
		{[]float64{3, 3, 1}, []bool{true, false, true}, 0.5*0.5 + 0.5*2.0/3},
	}
	for i, c := range cases {
		if got := AveragePrecision(c.scores, c.labels); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("case %d: got %.15g want %.15g", i, got, c.want)
		}
	}
	if !math.IsNaN(AveragePrecision([]float64{1, 2}, []bool{false, false})) {
		t.Error("no outlier: want NaN")
	}
}

// TestAveragePrecisionDefinition: without ties, AP is the mean over the outliers of the precision
// at each outlier's rank; checked on random permutations.
func TestAveragePrecisionDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for range 30 {
		n := 2 + r.IntN(50)
		s := make([]float64, n)
		l := make([]bool, n)
		pos := 0
		for i, p := range r.Perm(n) {
			s[i] = float64(p)
			l[i] = r.IntN(4) == 0
			if l[i] {
				pos++
			}
		}
		if pos == 0 {
			continue
		}
		var sum float64
		for i := range n {
			if !l[i] {
				continue
			}
			above, tpAbove := 0, 0 // rows scoring at least s[i]
			for j := range n {
				if s[j] >= s[i] {
					above++
					if l[j] {
						tpAbove++
					}
				}
			}
			sum += float64(tpAbove) / float64(above)
		}
		if got, want := AveragePrecision(s, l), sum/float64(pos); math.Abs(got-want) > 1e-12 {
			t.Fatalf("AP %v, definition %v", got, want)
		}
	}
}

// TestAdjustedRandIndexKnownValues: values from scikit-learn's adjusted_rand_score (its
// documentation's examples and two computed by hand from the contingency table).
func TestAdjustedRandIndexKnownValues(t *testing.T) {
	cases := []struct {
		a, b []int32
		want float64
	}{
		{[]int32{0, 0, 1, 1}, []int32{0, 0, 1, 1}, 1},
		{[]int32{0, 0, 1, 1}, []int32{1, 1, 0, 0}, 1}, // renamed
		{[]int32{0, 0, 1, 2}, []int32{0, 0, 1, 1}, 0.5714285714285714},
		{[]int32{0, 0, 1, 1}, []int32{0, 0, 1, 2}, 0.5714285714285714}, // symmetric
		{[]int32{0, 0, 0, 0}, []int32{0, 1, 2, 3}, 0},
		{[]int32{0, 0, 1, 1}, []int32{0, 1, 0, 1}, -0.5},
		// table [[2,1],[0,3]] over 6 items: index 4, rows 3+3... sa = 3+3 = 6, sb = 1+6 = 7,
		// expected 6*7/15 = 2.8, max 6.5: (4-2.8)/(6.5-2.8)
		{[]int32{0, 0, 0, 1, 1, 1}, []int32{0, 0, 1, 1, 1, 1}, 1.2 / 3.7},
		{[]int32{-1, -1, 5}, []int32{-1, -1, -1}, 0}, // outlier labels are ordinary classes
		{[]int32{3, 3, 3}, []int32{7, 7, 7}, 1},      // one class each: defined as 1
	}
	for i, c := range cases {
		if got := AdjustedRandIndex(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("case %d: got %.15g want %.15g", i, got, c.want)
		}
	}
}

// TestAveragePrecisionAtMostOne: AP added gain/pos x precision once per distinct score, and the
// rounding of those shares summed past 1: a file whose every row is labelled an outlier
// (3,001 distinct scores) had average_precision 1.0000000000000164 in replay's JSON, a figure
// outside its range. The precisions are summed weighted by the gains and divided once.
func TestAveragePrecisionAtMostOne(t *testing.T) {
	for _, n := range []int{3, 10, 3001, 100_000} {
		s, l := make([]float64, n), make([]bool, n)
		for i := range n {
			s[i], l[i] = float64(i)*0.37, true
		}
		if got := AveragePrecision(s, l); got != 1 {
			t.Errorf("%d rows, all outliers: AP %.17g, want exactly 1", n, got)
		}
	}
	r := rand.New(rand.NewPCG(3, 14))
	for range 200 {
		n := 2 + r.IntN(5000)
		s, l := make([]float64, n), make([]bool, n)
		for i := range n {
			s[i], l[i] = float64(r.IntN(50)), r.IntN(3) > 0
		}
		l[0] = true
		if got := AveragePrecision(s, l); !(got > 0 && got <= 1) {
			t.Fatalf("%d rows: AP %.17g outside (0, 1]", n, got)
		}
	}
}
