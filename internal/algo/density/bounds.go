package density

import (
	"math"

	"github.com/outlierd/outlierd/internal/core/fanout"
)

// Density bounds: the sampled path's shortcut, with the paper's verdicts unchanged.
//
// A sample succeeds when its computed subspace density (1/a) sum_j f_j(X_j) exceeds eta, and
// computing one f_j costs q kernel terms. But f_j is one fixed function per dimension, so a table
// of rigorous lower and upper bounds of the computed f_j over the cells of a uniform grid answers
// almost every sample with one lookup per dimension: if the lower bounds already exceed eta the
// sample succeeds, if the upper bounds stay below it the sample fails, and only a sample whose
// bounds straddle eta (it lies within a few cells of where f_j crosses eta) is computed as
// before. The verdict of every sample is the one the full computation gives, so eta-
// probabilities and verdicts are bit-identical with or without the table (tested against the
// plain loop, etaProbabilityPlain). The uniforms are drawn exactly as before.
//
// Why the bounds are rigorous. Each term g_c(u) = coef_c exp(-(u - mu_c)^2 inv2_c) is unimodal
// with its peak coef_c at mu_c, so over a cell [a, b] its maximum is at the point of the cell
// nearest mu_c and its minimum at the farther end. Summing those over c bounds the exact f_j on
// the cell. The computed f_j differs from the exact one by rounding: the exponent e carries a
// relative error <= 4u (u = 2^-53: a subtraction and two products), i.e. an absolute error <=
// 745 * 4u for the terms that are not skipped, which exp turns into a relative error of the same
// size; exp itself is within 1 ulp, the product with coef and the sum of k positive terms add
// (k + 2) u. The table's own sums are computed the same way, so both errors together are below
// rel = (2k + 8192) u, and the terms skipped (e >= 745) or subnormal add at most k * coef_max *
// 2^-1070 in absolute terms (abs below, taken far larger). The table stores
// lower * (1 - rel) - abs and upper * (1 + rel) + abs. A sample's cell index is computed in
// float64 and can be off by one near a cell boundary; every entry is therefore widened to the
// union of its cell and both neighbours. Below the grid (u < L <= every mu_c) each term increases
// with u, so f_j(L) bounds it from above (0 from below); above the grid likewise with f_j(R).
// Summing a dimensions and dividing by a adds (a + 2) u, covered by boundsSlack.
//
// The grid of dimension j spans [min mu - T, max mu + T] with T chosen so that every kernel
// has fallen to 2^-20 of its peak, in boundsCells() cells: fine enough that a straddling cell
// is rare, coarse enough that building the table (r (G+1) k exps, once per model) stays small.

// boundsSlack covers the rounding of summing a <= 64 dimension bounds and dividing by a
// ((a + 2) 2^-53 <= 7.4e-15), with room to spare.
const boundsSlack = 0x1p-40

// boundsTail is the ln of the factor by which every kernel has fallen at the grid's ends:
// exp(-T^2 inv2) = 2^-20 for the widest kernel.
const boundsTail = 20 * math.Ln2

// boundsCells is the number of grid cells G per dimension: enough for a cell of a sixteenth of
// the narrowest kernel's standard deviation in the widest grid (where the data span many kernel
// widths, a cell much wider than a kernel leaves many samples open), at least 4096, and at most
// what keeps the table's cost near 2^21 exps per dimension (r (G+1) k exps, once per model) and
// its size at 2^16 cells per dimension and 2^20 cells in all (16 MB).
func (m *Model) boundsCells() int {
	need := 0.0
	for j := range m.dims {
		origin, end, inv2Max := m.gridSpan(j)
		need = max(need, (end-origin)/(math.Sqrt(1/(2*inv2Max))/16))
	}
	lo, hi := 4096, max(4096, min(1<<16, (1<<21)/max(1, m.k), (1<<20)/max(1, m.dims)))
	if m.k > 256 { // many clusters: fewer cells, so that building stays cheap
		lo = max(512, (1<<20)/m.k)
		hi = max(lo, hi)
	}
	if !(need < float64(hi)) { // also NaN
		return hi
	}
	return max(lo, int(need)+1)
}

// gridSpan is dimension j's grid [origin, end] before rounding the step, and the largest inv2
// (the narrowest kernel).
func (m *Model) gridSpan(j int) (origin, end, inv2Max float64) {
	lo, hi, inv2Min := math.Inf(1), math.Inf(-1), math.Inf(1)
	for c, x := range m.mu[j] {
		lo, hi = min(lo, x), max(hi, x)
		inv2Min, inv2Max = min(inv2Min, m.inv2[j][c]), max(inv2Max, m.inv2[j][c])
	}
	tail := math.Sqrt(boundsTail / inv2Min)
	return lo - tail, hi + tail, inv2Max
}

// Bounds is the table of every dimension. Entry [j*(Cells+2) + c] covers cell c of dimension j:
// c = 0 is below the grid, c = 1..Cells the grid cells, c = Cells+1 above it. The GPU twin uploads
// the same table (gpukern).
type Bounds struct {
	// Cells is G, the grid cells per dimension.
	Cells int
	// Origin and InvStep place u in dimension j: cell = 1 + floor((u - Origin[j]) * InvStep[j]),
	// clamped to [0, Cells+1].
	Origin, InvStep []float64
	// Lower and Upper bound the computed f_j over the cell (widened to its neighbours).
	Lower, Upper []float64
}

// Cell returns the table entry index of u in dimension j.
func (b *Bounds) Cell(j int, u float64) int {
	t := (u - b.Origin[j]) * b.InvStep[j]
	c := 0
	switch {
	case !(t >= 0): // below the grid, or NaN (whose density fails, as the bounds say or leave open)
	case t >= float64(b.Cells):
		c = b.Cells + 1
	default:
		c = 1 + int(t)
	}
	return j*(b.Cells+2) + c
}

// Bounds returns the model's density bounds table, built on first use (concurrency-safe).
func (m *Model) Bounds() *Bounds {
	m.boundsOnce.Do(func() { m.bounds = m.buildBounds() })
	return m.bounds
}

// buildBounds computes the table, a dimension per iteration on the cores.
func (m *Model) buildBounds() *Bounds {
	g := m.boundsCells()
	w := g + 2
	b := &Bounds{Cells: g, Origin: make([]float64, m.dims), InvStep: make([]float64, m.dims),
		Lower: make([]float64, m.dims*w), Upper: make([]float64, m.dims*w)}
	rel := float64(2*m.k+8192) * 0x1p-53
	fanout.OnCores(m.dims, func(j int) { m.boundsOf(j, b, rel) })
	return b
}

// boundsOf fills dimension j of b.
func (m *Model) boundsOf(j int, b *Bounds, rel float64) {
	mu, coef, inv2 := m.mu[j], m.coef[j], m.inv2[j]
	coefMax := 0.0
	for _, c := range coef {
		coefMax = max(coefMax, c)
	}
	g := b.Cells
	origin, end, _ := m.gridSpan(j)
	step := (end - origin) / float64(g) * (1 + 0x1p-40) // the last grid point lands at or beyond end
	b.Origin[j], b.InvStep[j] = origin, 1/step
	abs := float64(float64(m.k+1) * coefMax * 0x1p-1000) // (rounded: never fused into the bounds below)

	// Per grid point i = 0..g: the term values at p_i = origin + i*step, summed into cell bounds
	// on the fly (cell i spans p_{i-1} .. p_i).
	lower := make([]float64, g+2)
	upper := make([]float64, g+2)
	prev := make([]float64, len(mu))
	for i := 0; i <= g; i++ {
		p := origin + float64(float64(i)*step)
		pPrev := origin + float64(float64(i-1)*step)
		var sum, mn, mx float64
		for c, x := range mu {
			d := p - x
			e := d * d * inv2[c]
			v := 0.0
			if e < 745 {
				v = coef[c] * math.Exp(-e)
			}
			sum += v
			if i > 0 {
				a := prev[c]
				if x >= pPrev && x <= p {
					mx += coef[c] // the peak lies in the cell
				} else {
					mx += max(a, v)
				}
				mn += min(a, v)
			}
			prev[c] = v
		}
		switch {
		case i == 0:
			upper[0] = sum // f_j(origin) bounds f_j below the grid (every mu_c >= origin)
		default:
			lower[i], upper[i] = mn, mx
		}
		if i == g {
			upper[g+1] = sum // f_j at the last grid point (>= every mu_c) bounds it above the grid
		}
	}
	row := j * (g + 2)
	for c := range g + 2 {
		l, u := lower[c], upper[c]
		if c > 0 {
			l, u = min(l, lower[c-1]), max(u, upper[c-1])
		}
		if c < g+1 {
			l, u = min(l, lower[c+1]), max(u, upper[c+1])
		}
		b.Lower[row+c] = max(0, float64(l*(1-rel))-abs)
		b.Upper[row+c] = float64(u*(1+rel)) + abs
	}
}
