package rank

import (
	"math"
	"testing"
)

// TestKneeBaseIsTheKneesSurprisal: KneeBase is the surprisal of the calibration's 1 -
// TailQuantile quantile (4,096 scores: the one of rank 4,055), about 2 decades, and 0 for an
// empty calibration; past it Surprisal keeps rising (the fitted tail's domain).
func TestKneeBaseIsTheKneesSurprisal(t *testing.T) {
	s := make([]float64, 4096)
	for i := range s {
		s[i] = -math.Log1p(-(float64(i) + 0.5) / 4096) // exponential quantiles
	}
	c := NewCalibration(s)
	at := s[int(math.Round((1-TailQuantile)*4095))]
	if got, want := c.KneeBase(), c.Surprisal(at); got != want {
		t.Errorf("KneeBase %v, want the knee's surprisal %v", got, want)
	}
	if k := c.KneeBase(); !(k > 1.9 && k < 2.1) { // -log10 of 41/4097
		t.Errorf("KneeBase %v, want about 2", k)
	}
	if !(c.Surprisal(at+1) > c.KneeBase()) {
		t.Errorf("Surprisal past the knee %v not above KneeBase %v", c.Surprisal(at+1), c.KneeBase())
	}
	var empty Calibration
	if empty.KneeBase() != 0 {
		t.Errorf("an empty calibration's KneeBase %v, want 0", empty.KneeBase())
	}
}
