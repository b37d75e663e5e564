package synth

import (
	"math"
	"strings"
	"testing"
)

func TestDeterministicForSeed(t *testing.T) {
	p := DefaultUncertainParams()
	p.Rows = 2000
	a, b := Three(p), Three(p)
	for j := range a.Cols {
		for i := range a.Cols[j] {
			if a.Cols[j][i] != b.Cols[j][i] || a.SD[j][i] != b.SD[j][i] {
				t.Fatalf("seed %d gave different values at row %d dim %d", p.Seed, i, j)
			}
		}
	}
	p.Seed = 2
	c := Three(p)
	same := true
	for i := range a.Cols[0] {
		same = same && a.Cols[0][i] == c.Cols[0][i]
	}
	if same {
		t.Fatal("seeds 1 and 2 gave the same column")
	}
}

func TestUncertainSetsShape(t *testing.T) {
	for _, gen := range []struct {
		name string
		f    func(UncertainParams) *Data
	}{{"one", One}, {"three", Three}} {
		p := DefaultUncertainParams()
		p.Rows, p.Dims = 10000, 4
		d := gen.f(p)
		if d.Rows() != 10000 || d.Dims() != 4 || len(d.Label) != 10000 || len(d.SD) != 4 {
			t.Fatalf("%s: wrong shape", gen.name)
		}
		outliers := 0
		for _, l := range d.Label {
			outliers += int(l)
		}
		if outliers != 500 { // 5% of 10,000, spread exactly by isOutlierRow
			t.Errorf("%s: %d outliers, want 500", gen.name, outliers)
		}
		for j := range d.Cols {
			lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
			for i, v := range d.Cols[j] {
				lo, hi = min(lo, v), max(hi, v)
				if s := d.SD[j][i]; !(s >= 0) || s > 2 { // std of a [0,1] column is <= 0.5, times U(0,1)*2
					t.Fatalf("%s: sd %g out of range", gen.name, s)
				}
			}
			if lo != 0 || hi != 1 {
				t.Errorf("%s dim %d: range [%g,%g], want [0,1]", gen.name, j, lo, hi)
			}
		}
	}
}

func TestOneOutliersAreShifted(t *testing.T) {
	p := DefaultUncertainParams()
	p.Rows, p.Dims, p.OutlierDims = 20000, 10, 0.2
	d := One(p)
	// Outliers differ in the first 2 dims (20% of 10) only: their mean there is higher,
	// elsewhere the same as the inliers' within sampling noise.
	mean := func(j int, label uint8) float64 {
		s, n := 0.0, 0
		for i, l := range d.Label {
			if l == label {
				s += float64(d.Cols[j][i])
				n++
			}
		}
		return s / float64(n)
	}
	if mean(0, 1)-mean(0, 0) < 0.1 || mean(1, 1)-mean(1, 0) < 0.1 {
		t.Errorf("outlier dims not shifted: %g vs %g", mean(0, 1), mean(0, 0))
	}
	// 1000 outliers: the standard error of a mean of N(0,1)/range values is ~0.005; 0.03 is 6 sigma.
	if math.Abs(mean(5, 1)-mean(5, 0)) > 0.03 {
		t.Errorf("non-outlier dim shifted: %g vs %g", mean(5, 1), mean(5, 0))
	}
}

func TestValidate(t *testing.T) {
	p := DefaultUncertainParams()
	p.Rows, p.Dims, p.OutlierRatio, p.OutlierDims = 1, 0, 1.5, 0
	err := p.Validate()
	if err == nil {
		t.Fatal("invalid params accepted")
	}
	for _, want := range []string{"rows", "dims", "outlier-ratio", "outlier-dims"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestG3DComponents(t *testing.T) {
	d := G3D(3000, 7)
	// Component of row i is i mod 3; its mean must sit near the documented centre
	// (1000 points, spread <= 2: standard error <= 0.07, tolerance 0.3 is > 4 sigma).
	for c := range 3 {
		for j := range 3 {
			s := 0.0
			for i := c; i < 3000; i += 3 {
				s += float64(d.Cols[j][i])
			}
			if m := s / 1000; math.Abs(m-G3DCentres[c][j]) > 0.3 {
				t.Errorf("component %d dim %d: mean %g, centre %g", c, j, m, G3DCentres[c][j])
			}
		}
	}
}
