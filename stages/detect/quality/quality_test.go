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

// TestAveragePrecisionKnownValues checks AP against values worked out by hand (they are also
// what scikit-learn's average_precision_score returns for these inputs).
func TestAveragePrecisionKnownValues(t *testing.T) {
	cases := []struct {
		scores []float64
		labels []bool
		want   float64
	}{
		// perfect ranking
		{[]float64{4, 3, 2, 1}, []bool{true, true, false, false}, 1},
		// outliers at ranks 2 and 4: (1/2)(1/2) + (1/2)(2/4)
		{[]float64{4, 3, 2, 1}, []bool{false, true, false, true}, 0.5},
		// sklearn's doc example y=[0,0,1,1], s=[0.1,0.4,0.35,0.8]: 0.8333...
		{[]float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, 5.0 / 6},
		// all tied: one threshold, precision = prevalence
		{[]float64{1, 1, 1, 1}, []bool{true, false, false, false}, 0.25},
		// a tie at the top between an outlier and an inlier: precision 1/2 there, then 2/3
		{[]float64{5, 5, 3, 1}, []bool{true, false, true, false}, 0.5*0.5 + 0.5*2.0/3},
	}
	for i, c := range cases {
		if got := AveragePrecision(c.scores, c.labels); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("case %d: got %g want %g", i, got, c.want)
		}
	}
	if !math.IsNaN(AveragePrecision([]float64{1, 2}, []bool{false, false})) {
		t.Error("no outlier: want NaN")
	}
}

// TestAveragePrecisionMatchesDefinition compares against the definition computed directly on
// random scores with many ties: for each distinct threshold t, precision and recall of
// {score >= t}, summed as sum (R_t - R_prev) P_t over descending t.
func TestAveragePrecisionMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 30 {
		n := 2 + r.IntN(50)
		s := make([]float64, n)
		l := make([]bool, n)
		pos := 0
		for i := range s {
			s[i] = float64(r.IntN(6))
			l[i] = r.IntN(3) == 0
			if l[i] {
				pos++
			}
		}
		if pos == 0 {
			continue
		}
		want, prevR := 0.0, 0.0
		for th := 5; th >= 0; th-- {
			tp, fl := 0, 0
			for i := range s {
				if s[i] >= float64(th) {
					fl++
					if l[i] {
						tp++
					}
				}
			}
			if fl == 0 {
				continue
			}
			rec := float64(tp) / float64(pos)
			want += (rec - prevR) * float64(tp) / float64(fl)
			prevR = rec
		}
		if got := AveragePrecision(s, l); math.Abs(got-want) > 1e-12 {
			t.Fatalf("got %g want %g (scores %v labels %v)", got, want, s, l)
		}
	}
}
