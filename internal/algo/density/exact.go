package density

import (
	"fmt"
	"math"
)

// The exact 1-D method (Params.Exact). In a one-dimensional subspace {j} the eta-probability of
// an object with mean x and uncertainty psi is P(f_j(X) > eta) for X ~ N(x, psi^2), which is the
// normal mass of the superlevel set {u : f_j(u) > eta}. That set is found once per model and eta:
//
//  1. It is bounded: f_j = sum w_c phi_c with sum w_c = 1, so f_j(u) <= max_c phi_c(u), and
//     phi_c(u) > eta only within mu_c +- sqrt(2 var_c ln(1 / (eta sqrt(2 pi var_c)))). The union
//     of those intervals, [L, R], contains the set (and the set is empty when no component's peak
//     exceeds eta).
//  2. f_j - eta is tabulated on a grid over [L, R] with a step of an eighth of the narrowest
//     kernel's standard deviation (at most maxGrid points), and every sign change is refined by
//     bisection on the exact f_j to 2^-40 of the range.
//
// The probability is then a sum of normal CDF differences, exact to rounding. What the grid can
// miss: a stretch above eta that starts and ends between two neighbouring grid points, i.e. a
// local maximum of f_j that exceeds eta by a hair within one step; such a stretch is narrower than
// the step (sd_min / 8), and its probability mass is below step * max_u phi(u; x, psi^2).
// Sampling estimates the same quantity with a standard error sqrt(p(1-p)/s) >= 1/s-scale, so the
// two agree within sampling error (tested).
//
// Other subspaces are sampled: the density of a subspace of a >= 2 dimensions is the average of a
// densities of independent variables, whose distribution has no closed form; sampling it costs
// O(s a q) per subspace, as in the paper.

// maxGrid bounds the tabulation of one dimension (1M evaluations of f_j at q = 200 are ~1 s).
const maxGrid = 1 << 16

// region is the superlevel set {u : f_j(u) > eta} of one dimension as disjoint sorted intervals.
type region struct {
	lo, hi []float64
}

// contains reports whether u lies in the set.
func (rg region) contains(u float64) bool {
	for i := range rg.lo {
		if u > rg.lo[i] && u < rg.hi[i] {
			return true
		}
	}
	return false
}

// mass is P(X in the set) for X ~ N(x, psi^2); psi = 0 means X = x.
func (rg region) mass(x, psi float64) float64 {
	if psi == 0 {
		if rg.contains(x) {
			return 1
		}
		return 0
	}
	var p float64
	for i := range rg.lo {
		p += normalMass(rg.lo[i], rg.hi[i], x, psi)
	}
	return min(p, 1)
}

// Interval is the open interval (Lo, Hi) of the real line.
type Interval struct{ Lo, Hi float64 }

// Regions returns, for every dimension j, the superlevel set {u : f_j(u) > eta} that the exact
// 1-D method integrates (Params.Exact), as disjoint open intervals in increasing order (none when
// f_j stays at or below eta). The sets are computed once per eta and cached; the result is a
// copy. The GPU twin uploads them. eta must be finite and > 0.
func (m *Model) Regions(eta float64) ([][]Interval, error) {
	if !(eta > 0) || math.IsInf(eta, 0) {
		return nil, fmt.Errorf("density: regions: eta must be finite and > 0, got %v", eta)
	}
	rg := m.regionsFor(eta)
	out := make([][]Interval, len(rg))
	for j, r := range rg {
		out[j] = make([]Interval, len(r.lo))
		for i := range r.lo {
			out[j][i] = Interval{Lo: r.lo[i], Hi: r.hi[i]}
		}
	}
	return out, nil
}

// regionsFor returns the superlevel sets of every dimension at eta, computed once per eta.
func (m *Model) regionsFor(eta float64) []region {
	m.mu2.Lock()
	defer m.mu2.Unlock()
	if rg, ok := m.regions[eta]; ok {
		return rg
	}
	rg := make([]region, m.dims)
	for j := range rg {
		rg[j] = m.superlevel(j, eta)
	}
	m.regions[eta] = rg
	return rg
}

// superlevel computes {u : f_j(u) > eta} for eta > 0 (see the comment at the top of the file).
func (m *Model) superlevel(j int, eta float64) region {
	lo, hi := math.Inf(1), math.Inf(-1)
	minSD := math.Inf(1)
	for c, v := range m.variance[j] {
		peak := 1 / math.Sqrt(2*math.Pi*v)
		if peak <= eta {
			continue
		}
		w := math.Sqrt(2 * v * math.Log(peak/eta))
		lo, hi = math.Min(lo, m.mu[j][c]-w), math.Max(hi, m.mu[j][c]+w)
		minSD = math.Min(minSD, math.Sqrt(v))
	}
	var rg region
	if lo > hi {
		return rg // no component reaches eta, so neither does their average
	}
	step := float64(minSD / 8) // (rounded: the compiler's minSD*0.125 is not fused into lo-step)
	span := hi - lo
	// Pad by one step so that the first and last grid points are safely outside the set.
	lo, hi = lo-step, hi+step
	g := int(math.Ceil((hi-lo)/step)) + 1
	if g > maxGrid {
		g = maxGrid
	}
	step = (hi - lo) / float64(g-1)
	tol := math.Max(span, step) * 0x1p-40
	f := func(u float64) float64 { return m.Density(j, u) - eta }
	prevU, prevF := lo, f(lo)
	var start float64
	inside := prevF > 0
	if inside {
		start = lo
	}
	for k := 1; k < g; k++ {
		u := lo + float64(float64(k)*step)
		if k == g-1 {
			u = hi
		}
		fu := f(u)
		if (fu > 0) != inside {
			edge := bisect(f, prevU, u, prevF > 0, tol)
			if inside {
				rg.lo, rg.hi = append(rg.lo, start), append(rg.hi, edge)
			} else {
				start = edge
			}
			inside = !inside
		}
		prevU, prevF = u, fu
	}
	if inside {
		rg.lo, rg.hi = append(rg.lo, start), append(rg.hi, hi)
	}
	return rg
}

// bisect finds the crossing of f's sign in [a, b], where f(a) > 0 iff aPositive and f(b) has the
// other sign, to within tol.
func bisect(f func(float64) float64, a, b float64, aPositive bool, tol float64) float64 {
	for b-a > tol {
		mid := 0.5 * (a + b)
		if mid <= a || mid >= b {
			break
		}
		if (f(mid) > 0) == aPositive {
			a = mid
		} else {
			b = mid
		}
	}
	return 0.5 * (a + b)
}
