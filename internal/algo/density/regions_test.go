package density

import (
	"math"
	"testing"
)

// TestRegionsExport: the exported superlevel sets are those the exact method integrates (same
// intervals, in order), the mass over them equals EtaProbabilityExact bit for bit, and an invalid
// eta is an error.
func TestRegionsExport(t *testing.T) {
	t.Parallel()
	m, d, _ := buildModel(t, "one", 2000, 3, 40)
	for _, eta := range []float64{0.5, 2} {
		rg, err := m.Regions(eta)
		if err != nil {
			t.Fatal(err)
		}
		in := m.regionsFor(eta)
		if len(rg) != m.Dims() {
			t.Fatalf("eta %v: %d regions for %d dimensions", eta, len(rg), m.Dims())
		}
		for j := range rg {
			if len(rg[j]) != len(in[j].lo) {
				t.Fatalf("eta %v dim %d: %d intervals exported, %d inside", eta, j, len(rg[j]), len(in[j].lo))
			}
			var mine region
			for i, iv := range rg[j] {
				if iv.Lo != in[j].lo[i] || iv.Hi != in[j].hi[i] || !(iv.Lo < iv.Hi) || (i > 0 && !(rg[j][i-1].Hi < iv.Lo)) {
					t.Fatalf("eta %v dim %d interval %d: %+v, inside (%v, %v)", eta, j, i, iv, in[j].lo[i], in[j].hi[i])
				}
				mine.lo, mine.hi = append(mine.lo, iv.Lo), append(mine.hi, iv.Hi)
			}
			for i := range 50 {
				x, psi := float64(d.Cols[j][i]), float64(d.SD[j][i])
				if a, b := mine.mass(x, psi), m.EtaProbabilityExact(j, x, psi, eta); math.Float64bits(a) != math.Float64bits(b) {
					t.Fatalf("eta %v dim %d row %d: mass %v over the export, %v exact", eta, j, i, a, b)
				}
			}
		}
		rg[0] = nil // a copy: the cache is untouched
		if again, _ := m.Regions(eta); len(again[0]) != len(in[0].lo) {
			t.Fatalf("eta %v: the caller's change reached the cache", eta)
		}
	}
	for _, eta := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := m.Regions(eta); err == nil {
			t.Errorf("eta %v: no error", eta)
		}
	}
}
