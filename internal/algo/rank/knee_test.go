package rank

import (
	"math"
	"math/rand/v2"
	"testing"
)

// steepKnee is a calibration of 4,096 scores whose body is tight between its 90th and 99th
// percentile (1 ± 0.001) and whose top 0.5% lies far out (2 to 100): the knee's line rises about
// 500 decades per unit of score, and main's Surprisal claimed thousands of decades within the
// calibration's range, for scores the window holds tens of records beyond (EDS's set-point
// series, docs/BENCHMARKS.md §12.57 section 4, on generated scores).
func steepKnee() Calibration {
	r := rand.New(rand.NewPCG(26, 2))
	scores := make([]float64, 4096)
	for i := range scores {
		scores[i] = 1 + 0.001*r.NormFloat64()
		if i%200 == 0 {
			scores[i] = 2 + 98*r.Float64()
		}
	}
	return NewCalibration(scores)
}

// mainLine is the knee's line as main applied it (max(e, line) for every score past the knee).
func mainLine(c *Calibration, r float64) float64 {
	return c.kneeBase + c.knee*(r-c.kneeAt)
}

// TestKneeLiftBoundedWithinRange: within the range the knee lifts a score at most KneeMargin +
// log10(1 + ln10 x) decades above its empirical surprisal (x main's lift there); main's line
// lifted them by 3,330 to 72,292 decades (failed so before the bound).
func TestKneeLiftBoundedWithinRange(t *testing.T) {
	c := steepKnee()
	s := c.Sorted
	n := len(s)
	if c.knee < 100 {
		t.Fatalf("knee %v decades a unit: want a steep line (the case under test)", c.knee)
	}
	worst := 0.0
	for _, r := range []float64{s[n*995/1000], s[n-10], s[n-1], (s[n-2] + s[n-1]) / 2} {
		e := c.empirical(r)
		x := mainLine(&c, r) - e
		got := c.Surprisal(r) - e
		worst = max(worst, got)
		if !(x > KneeMargin) || got > KneeMargin+math.Log10(1+math.Ln10*x) || got < KneeMargin {
			t.Errorf("Surprisal(%v) lifts %v decades above the empirical %v (main's line: %v): want within [%v, %v]",
				r, got, e, x, KneeMargin, KneeMargin+math.Log10(1+math.Ln10*x))
		}
	}
	t.Logf("largest lift within the range %.2f decades (main's line: %.0f at the largest)", worst, mainLine(&c, s[n-1])-c.empirical(s[n-1]))
}

// TestKneeUnchangedWhereLiftSmall: where the line lifts a score by at most KneeMargin within the
// range, and everywhere for a calibration whose line at the largest is within KneeMargin of
// log10(n+1) (no cut), Surprisal is main's max(e, line) bit for bit.
func TestKneeUnchangedWhereLiftSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	scores := make([]float64, 4096)
	for i := range scores {
		scores[i] = r.ExpFloat64()
	}
	mild := NewCalibration(scores)
	if mild.kneeCut() != 0 {
		t.Fatalf("exponential scores: cut %v, want 0", mild.kneeCut())
	}
	steep := steepKnee()
	for name, c := range map[string]*Calibration{"exponential": &mild, "steep": &steep} {
		n := len(c.Sorted)
		for k := 0; k < 20000; k++ {
			q := c.kneeAt + (c.Sorted[n-1]*3-c.kneeAt)*r.Float64()
			var e float64
			beyond := q > c.Sorted[n-1]
			if beyond {
				e = math.Log10(float64(n+1)) + c.Slope*(q-c.Sorted[n-1])
			} else {
				e = c.empirical(q)
			}
			line := mainLine(c, q)
			if (beyond && c.kneeCut() != 0) || (!beyond && line-e > KneeMargin) {
				continue
			}
			if got, want := c.Surprisal(q), max(e, line); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s: Surprisal(%v) = %v, want main's %v", name, q, got, want)
			}
		}
	}
}

// TestKneeBoundMonotoneContinuous: across the knee, the point where the lift passes KneeMargin,
// the largest and far beyond: never decreasing, no jump larger than the line's own rise over
// a step (continuity), finite at FLT_MAX; and past the largest the line's own rate.
func TestKneeBoundMonotoneContinuous(t *testing.T) {
	c := steepKnee()
	s := c.Sorted
	n := len(s)
	top := s[n-1]
	lo := c.kneeAt
	prev := c.Surprisal(lo)
	const steps = 400000
	for k := 1; k <= steps; k++ {
		// (a fine grid to 1.01 top: a step of 2.5e-4 units, the line's rise about 0.13 decades)
		q := lo + (1.01*top-lo)*float64(k)/steps
		v := c.Surprisal(q)
		if v < prev || v-prev > 1 || math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("Surprisal(%v) = %v after %v: want rising by at most one decade a step", q, v, prev)
		}
		prev = v
	}
	// Continuity at the largest, from above (the line less the cut) and at it.
	above := c.Surprisal(math.Nextafter(top, math.Inf(1)))
	if at := c.Surprisal(top); !(above >= at) || above-at > 1e-6 {
		t.Errorf("at the largest %v, just above %v: want continuous", at, above)
	}
	// Past the largest the floor rises at the line's rate.
	if d := (c.Surprisal(2*top) - c.Surprisal(top+1)) / (top - 1); math.Abs(d-c.knee) > 1e-9*c.knee {
		t.Errorf("rate past the largest %v, want the line's %v", d, c.knee)
	}
	for _, q := range []float64{math.MaxFloat32, -math.MaxFloat32} {
		if v := c.Surprisal(q); math.IsInf(v, 0) || math.IsNaN(v) {
			t.Errorf("Surprisal(%g) = %v: want finite", q, v)
		}
	}
}

// TestKneeBoundOrderFree: the calibration's bits do not depend on the order of its scores.
func TestKneeBoundOrderFree(t *testing.T) {
	a := steepKnee()
	r := rand.New(rand.NewPCG(26, 4))
	shuffled := append([]float64(nil), a.Sorted...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b := NewCalibration(shuffled)
	if a.kneeCut() != b.kneeCut() || a.knee != b.knee {
		t.Fatalf("cut %v/%v, knee %v/%v: want equal", a.kneeCut(), b.kneeCut(), a.knee, b.knee)
	}
	for k := 0; k < 1000; k++ {
		q := 200 * r.Float64()
		if x, y := a.Surprisal(q), b.Surprisal(q); math.Float64bits(x) != math.Float64bits(y) {
			t.Fatalf("Surprisal(%v): %v against %v", q, x, y)
		}
	}
}
