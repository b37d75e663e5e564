package detect

import (
	"math"
	"os"
	"slices"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Prototype (branch young29b, docs/bench/notes/young29b_rule.md), behind OUTLIERD_YOUNG29B=1:
// the global model's significance on autocorrelated columns, from its window alone. Each
// column's lag-1 correlation rho is read robustly from the window in arrival order (1 - rho =
// (med|Delta| / (sqrt2 MAD))^2, exact zero steps left out), tau = (1 + rho) / (1 - rho); a
// column with rho >= 0.5 is autocorrelated. A record's step evidence E is the largest two-sided
// normal surprisal of its step from the stream's previous record on an autocorrelated column
// and of its level on any other (a column of zero MAD: 0 at the window's median, +Inf off it).
// A model whose window spans at least youngSpan x tau_max records (mature) scores
// max(S - log10 tau_max, min(S, E)); a younger one min(S, max(E, L)), L the largest surprisal
// of an autocorrelated column's level from the window's median in units of the reach of a
// random walk of the window's own steps, sigma sqrt(k + n/3), k records after the window's
// last. Global model, flag_by: significance, streams without keys only; not in the snapshot.

// young29b selects the candidate (read once).
var young29b = os.Getenv("OUTLIERD_YOUNG29B") == "1"

// youngSpan is the correlation times a mature model's window spans: its expected variance,
// about 1 - tau/n of the process's, then within 5 %.
const youngSpan = 20

// youngRho is the lag-1 correlation from which a column counts as autocorrelated (half of its
// variance carried from one record to the next).
const youngRho = 0.5

// youngStats is what a model's window says of its columns' correlation.
type youngStats struct {
	// auto marks the autocorrelated columns; step is their robust step sd (1.4826 med|Delta|),
	// med and sd (1.4826 MAD) every column's level.
	auto          []bool
	step, med, sd []float64
	// young: the window spans fewer than youngSpan x tau_max records; shift is log10 tau_max.
	young bool
	shift float64
	// n is the window's rows; end the stream index one past the window's last record.
	n   int
	end uint64
}

// youngOf reads the window cols (raw, arrival order; end the stream index one past its last
// record) when the switch is set; nil when it is not or no column is autocorrelated (the model
// is then main's).
func youngOf(cols [][]float32, end uint64) *youngStats {
	if !young29b || len(cols) == 0 || len(cols[0]) < 3 {
		return nil
	}
	n := len(cols[0])
	y := &youngStats{auto: make([]bool, len(cols)), step: make([]float64, len(cols)),
		med: make([]float64, len(cols)), sd: make([]float64, len(cols)), n: len(cols[0]), end: end}
	tauMax := 0.0
	buf := make([]float64, 0, n)
	for j, c := range cols {
		buf = buf[:0]
		for _, v := range c {
			if !math.IsNaN(float64(v)) {
				buf = append(buf, float64(v))
			}
		}
		if len(buf) < 3 {
			continue
		}
		med := youngMedian(buf)
		for i := range buf {
			buf[i] = math.Abs(buf[i] - med)
		}
		mad := youngMedian(buf)
		buf = buf[:0]
		for i := 1; i < n; i++ {
			d := math.Abs(float64(c[i]) - float64(c[i-1]))
			if d > 0 && !math.IsNaN(d) && !math.IsInf(d, 0) {
				buf = append(buf, d)
			}
		}
		y.med[j], y.sd[j] = med, 1.4826*mad
		if len(buf) < 2 || !(mad > 0) {
			continue
		}
		md := youngMedian(buf)
		r := md / (math.Sqrt2 * mad)
		rho := min(max(1-float64(r*r), 0), 1-1e-12)
		if rho >= youngRho {
			y.auto[j], y.step[j] = true, 1.4826*md
			tauMax = max(tauMax, (1+rho)/(1-rho))
		}
	}
	if tauMax == 0 {
		return nil
	}
	y.young = float64(n) < youngSpan*tauMax
	y.shift = math.Log10(tauMax)
	return y
}

// youngMedian is the median of v (reorders v).
func youngMedian(v []float64) float64 {
	slices.Sort(v)
	k := len(v) / 2
	if len(v)%2 == 1 {
		return v[k]
	}
	return v[k-1] + (v[k]-v[k-1])/2
}

// normalSurprisal is -log10 of the two-sided normal tail probability of |z| (+Inf for NaN).
func normalSurprisal(z float64) float64 {
	x := math.Abs(z) / math.Sqrt2
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return math.Inf(1)
	}
	if p := math.Erfc(x); p > 1e-300 {
		return -math.Log10(p)
	}
	// erfc(x) ~ exp(-x^2) / (x sqrt(pi)) for large x
	return (float64(x*x) + math.Log(x) + 0.5*math.Log(math.Pi)) / math.Ln10
}

// youngPrev is the stream's previous record (raw), for the step evidence, and the stream
// index of the next record where its batch did not join the window.
type youngPrev struct {
	x    []float64
	set  bool
	next uint64
}

// apply replaces the global model's scores of b's records by the candidate's and their flags
// by the new scores (decide's significance rule), before the cap; every record, scored or
// not, becomes the previous record of the next. first is the stream index of b's first
// record where pushed (b joined the window).
func (p *youngPrev) apply(cfg *Config, m *Model, b *batch.Batch, keyed bool, first uint64, pushed bool) {
	if !young29b || keyed || m == nil {
		return
	}
	if !pushed {
		first = p.next
	}
	p.next = first + uint64(len(b.Scores))
	y := m.young
	nf := len(m.Features)
	if len(p.x) != nf {
		p.x, p.set = make([]float64, nf), false
	}
	cols := make([][]float32, nf)
	for j := range cols {
		cols[j] = b.Feature(j)
	}
	on := y != nil && m.Ranker != nil && cfg.FlagBy == FlagBySignificance && len(y.auto) == nf
	for i := range b.Scores {
		sc := &b.Scores[i]
		if on && sc.Scored && !sc.ByKey && !math.IsNaN(sc.Score) {
			e, l := y.evidence(cols, i, p, first+uint64(i))
			if y.young {
				sc.Score = min(sc.Score, max(e, l))
			} else {
				sc.Score = max(max(0, sc.Score-y.shift), min(sc.Score, e))
			}
			sc.Outlier = sc.Score >= sc.Threshold
		}
		for j := range nf {
			p.x[j] = float64(cols[j][i])
		}
		p.set = true
	}
}

// evidence is record i's step evidence E and (young models only) its level evidence L, idx its
// stream index.
func (y *youngStats) evidence(cols [][]float32, i int, p *youngPrev, idx uint64) (e, l float64) {
	reach := 0.0 // sqrt(k + n/3): a random walk's reach in its own steps' sd (young only)
	if y.young {
		k := 0.0
		if idx+1 > y.end {
			k = float64(idx + 1 - y.end)
		}
		reach = math.Sqrt(k + float64(y.n)/3)
	}
	for j := range cols {
		x := float64(cols[j][i])
		var z float64
		switch {
		case math.IsNaN(x):
			z = math.Inf(1)
		case y.auto[j] && p.set:
			z = (x - p.x[j]) / y.step[j]
		case y.auto[j]:
			z = math.Inf(1)
		case y.sd[j] > 0:
			z = (x - y.med[j]) / y.sd[j]
		case x == y.med[j]: // a column of zero scale, at the value the window holds: no evidence
			z = 0
		default: // off it: a step the window does not explain
			z = math.Inf(1)
		}
		e = max(e, normalSurprisal(z))
		if y.young && y.auto[j] && !math.IsNaN(x) {
			l = max(l, normalSurprisal((x-y.med[j])/float64(y.step[j]*reach)))
		}
	}
	return e, l
}
