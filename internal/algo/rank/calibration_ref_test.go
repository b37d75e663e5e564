package rank

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// surprisalRef is Calibration.Surprisal as it was before the log tables: sort.SearchFloat64s
// and both logarithms computed per call. It pins Surprisal and the slopes of CalibrationOf bit
// for bit.
func surprisalRef(c *Calibration, r float64) float64 {
	s := c.Sorted
	n := len(s)
	if n == 0 || math.IsNaN(r) {
		return 0
	}
	var e float64
	if r > s[n-1] {
		e = math.Log10(float64(n+1)) + c.Slope*(r-s[n-1])
	} else {
		e = empiricalRef(s, r)
	}
	if r > c.kneeAt && c.knee > 0 {
		return max(e, c.kneeBase+c.knee*(r-c.kneeAt))
	}
	return e
}

func empiricalRef(s []float64, r float64) float64 {
	n := len(s)
	i := sort.SearchFloat64s(s, r)
	pos := float64(i)
	if s[i] > r && i > 0 {
		pos = float64(i-1) + (r-s[i-1])/(s[i]-s[i-1])
	}
	return math.Log10(float64(n+1)) - math.Log10(float64(n)-pos)
}

// calibrationOfRef is CalibrationOf with empiricalRef.
func calibrationOfRef(s []float64) Calibration {
	c := Calibration{Sorted: s}
	n := len(s)
	if n == 0 {
		return c
	}
	top := math.Log10(float64(n + 1))
	r90 := s[(9*(n-1))/10]
	switch {
	case s[n-1] > r90:
		c.Slope = (top - empiricalRef(s, r90)) / (s[n-1] - r90)
	case s[n-1] > s[0]:
		c.Slope = (top - empiricalRef(s, s[0])) / (s[n-1] - s[0])
	default:
		c.Slope = 1 / max(math.Abs(s[0]), 1)
	}
	ki := int(math.Round((1 - TailQuantile) * float64(n-1)))
	c.kneeAt, c.kneeBase = s[ki], empiricalRef(s, s[ki])
	if lo := s[int(math.Round((1-10*TailQuantile)*float64(n-1)))]; c.kneeAt > lo {
		c.knee = (c.kneeBase - empiricalRef(s, lo)) / (c.kneeAt - lo)
	}
	return c
}

// TestCalibrationMatchesReference: calibrations of 1 to 5000 scores (past the log tables),
// continuous, tied, constant and with outliers; scores at every calibration value, between,
// below, above, infinite and NaN: the same bits as before the tables; and SurprisalOfMember at
// every run of the calibration's own scores, the same as Surprisal there.
func TestCalibrationMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 3, 10, 199, 200, 4096, 4097, 5000} {
		for _, kind := range []string{"normal", "ties", "constant", "outliers"} {
			scores := make([]float64, n)
			for i := range scores {
				switch kind {
				case "normal":
					scores[i] = rng.NormFloat64()
				case "ties":
					scores[i] = float64(rng.IntN(7))
				case "constant":
					scores[i] = 2.5
				case "outliers":
					scores[i] = rng.ExpFloat64()
					if i%50 == 0 {
						scores[i] = 1e3 * rng.Float64()
					}
				}
			}
			c := NewCalibration(scores)
			ref := calibrationOfRef(slices.Clone(c.Sorted))
			if c.Slope != ref.Slope || c.knee != ref.knee || c.kneeAt != ref.kneeAt || c.kneeBase != ref.kneeBase {
				t.Fatalf("n=%d %s: slopes %v/%v/%v/%v, want %v/%v/%v/%v", n, kind, c.Slope, c.knee, c.kneeAt, c.kneeBase, ref.Slope, ref.knee, ref.kneeAt, ref.kneeBase)
			}
			qs := append(slices.Clone(scores), math.Inf(1), math.Inf(-1), math.NaN(), c.Sorted[0]-1, c.Sorted[n-1]+1, math.Copysign(0, -1), 0)
			for range 2000 {
				a, b := c.Sorted[rng.IntN(n)], c.Sorted[rng.IntN(n)]
				qs = append(qs, a+(b-a)*rng.Float64(), rng.NormFloat64()*10)
			}
			for i, v := range c.Sorted {
				if i > 0 && c.Sorted[i-1] == v {
					continue // (the first of a run only)
				}
				got, want := c.SurprisalOfMember(i), surprisalRef(&c, v)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("n=%d %s: SurprisalOfMember(%d) = %v, want Surprisal(%v) = %v", n, kind, i, got, v, want)
				}
			}
			for _, q := range qs {
				got, want := c.Surprisal(q), surprisalRef(&c, q)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("n=%d %s: Surprisal(%v) = %v, want %v", n, kind, q, got, want)
				}
			}
		}
	}
}

// BenchmarkCalibrationSurprisal: a key's calibration (200 scores), one Surprisal a score of a
// stream like its own.
func BenchmarkCalibrationSurprisal(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	scores := make([]float64, 200)
	for i := range scores {
		scores[i] = rng.ExpFloat64()
	}
	c := NewCalibration(scores)
	qs := make([]float64, 1024)
	for i := range qs {
		qs[i] = rng.ExpFloat64()
	}
	var sum float64
	for i := 0; i < b.N; i++ {
		sum += c.Surprisal(qs[i&1023])
	}
	if sum == 0 {
		b.Fatal(sum)
	}
}
