package detect

import (
	"math"
	"sync"
)

// A key's model on a rolling column (keywarm27, defect 2 of docs/BENCHMARKS.md §12.59.1; §12.62).
//
// ingest.derive's mean and std over `last` values of a key's series are its rolling columns: two
// consecutive records share last - 1 of their values, so a key's window of n records (200 at the
// defaults) holds about n / last independent values of such a column (6 at last 32), not n. Its
// median, scale and range are a short stretch's, and the key's model scores records after that
// stretch moved on: every calibration of the model (tail, distance, combined) is of the window's
// own records, which lie inside the stretch, so a clean fleet flagged 0.6-1 % of its records where
// the same fleet without the columns flags 0.02-0.06 % (§12.59.1).
//
// The model knows how many independent values it holds: n_eff = n / last (at least 2), n the
// window's records its build reads (those that were warming left out: keyed_warmup.go). Its
// centre and scale of the column are estimates from n_eff values, so a new value's deviation in
// the window's units is Student t with n_eff - 1 degrees of freedom times sqrt(1 + 1/n_eff) (the
// prediction interval of a new draw), not normal. So the key's model widens that column's units
// by rollingWidth: the deviation as rare under that t as the normal's is at the significance
// min_score reads (10^-min_score, two-sided), over the normal's (outcastZ). The distance score's
// unit (Ranker.Unit), the tail score's spread beyond the window's range (rank.Tail.Spread) and
// the outcast rule's reach on the column (outcastRule.widths) are widened by it; the rank part of
// the tail score (a count among the window's records) and the columns that are not rolling are
// untouched, and a key whose columns none are rolling builds exactly as before. The widened
// model is the model: snapshots, the model topic and the device's slots (Unit and Spread are
// already the kernels' inputs) carry it unchanged.

// rollingWidth is the factor by which a key's model built from n records widens a rolling column
// of `last` values at min_score s (1 for last <= 1; see above). Cached: a build asks it for each
// rolling column, and n, last and s take few values.
func rollingWidth(n, last int, s float64) float64 {
	if last <= 1 {
		return 1
	}
	k := widthKey{n: n, last: last, s: s}
	if v, ok := widthCache.Load(k); ok {
		return v.(float64)
	}
	neff := max(2, float64(n)/float64(last))
	p := math.Pow(10, -s)
	w := math.Sqrt(1+1/neff) * tQuantile(neff-1, p) / outcastZ(s)
	if !(w >= 1) || math.IsInf(w, 0) { // (never narrower than the normal's; an infinite unit is no unit)
		w = max(1, min(w, math.MaxFloat32))
	}
	widthCache.Store(k, w)
	return w
}

type widthKey struct {
	n, last int
	s       float64
}

var widthCache sync.Map // widthKey -> float64

// keyWidths writes into out (grown to d) each feature's rollingWidth for a key's build from n
// records under cfg, and returns it; nil where no feature of cfg is rolling.
func keyWidths(cfg *Config, d, n int, out []float64) []float64 {
	if cfg.roll == nil {
		return nil
	}
	out = grow(out, d)
	for j := range out {
		out[j] = 1
		if j < len(cfg.roll.last) && cfg.roll.last[j] > 1 {
			out[j] = cfg.roll.width(j, n, cfg.Keys.Window, cfg.MinScore) // (the fleet's: keyed_rollfleet.go)
		}
	}
	return out
}

// widen multiplies r's distance unit and tail spread of each feature by widths[j] (nil: none).
func (r *Ranker) widen(widths []float64) {
	for j, w := range widths {
		if w != 1 {
			r.Unit[j] *= w
			r.Tail.Spread[j] *= w
		}
	}
}

// tQuantile is the x > 0 at which Student's t with nu > 0 degrees of freedom has the two-sided
// tail probability p (0 < p < 1): P(|T| > x) = I_{nu/(nu+x^2)}(nu/2, 1/2), the regularised
// incomplete beta function, solved for its argument y by bisection on ln y (the function rises
// with y), x = sqrt(nu (1 - y) / y).
func tQuantile(nu, p float64) float64 {
	a, b := nu/2, 0.5
	lo, hi := -1400.0, 0.0 // ln y: I at y = e^-1400 is far below any p a min_score gives
	for range 200 {
		mid := (lo + hi) / 2
		if betaInc(a, b, math.Exp(mid)) < p {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-12 {
			break
		}
	}
	y := math.Exp((lo + hi) / 2)
	return math.Sqrt(nu * (1 - y) / y)
}

// betaInc is the regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1:
// its continued fraction (modified Lentz), on the side where it converges fast.
func betaInc(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + float64(a*math.Log(x)) + float64(b*math.Log1p(-x)))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(a, b, x) / a
	}
	return 1 - front*betaFraction(b, a, 1-x)/b
}

// betaFraction is the continued fraction of the incomplete beta function (Numerical Recipes'
// betacf), to a relative step of 1e-15.
func betaFraction(a, b, x float64) float64 {
	const tiny = 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 1000; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + float64(aa*d)
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + float64(aa*d)
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := float64(d * c)
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return h
}

// rollingOf is Deps.Rolling as the stage keeps it (rollFleet.last): nil where no feature of d is
// rolling, else one entry per feature.
func rollingOf(rolling []int, d int) []int {
	var out []int
	for j, last := range rolling {
		if j < d && last > 1 {
			if out == nil {
				out = make([]int, d)
			}
			out[j] = last
		}
	}
	return out
}
