package detect

import (
	"math"
	"os"
	"slices"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Prototype (branch young31, docs/bench/notes/young31_rule.md), behind OUTLIERD_YOUNG31=1:
// the global model's flag decision and outcasts on autocorrelated columns, only where the model's
// window can measure their correlation time. Each column's lag-1 correlation rho is read robustly
// from the model's window in arrival order (1 - rho = (med|Delta| / (sqrt2 MAD))^2, exact zero
// steps left out), tau = (1 + rho) / (1 - rho); a column with rho >= 0.5 is autocorrelated. A
// model is mature when its window's n rows span youngTimes of tau_hat_max. A record's step
// evidence E is the largest two-sided normal surprisal of its step from the stream's previous
// record on an autocorrelated column and of its level on any other (a column of zero MAD: 0 at
// the window's median, +Inf off it). A mature model flags by S' = max(S - log10 tau_max, min(S,
// E)): the record is significant (its flag, and an outcast left out of the next builds) when S'
// reaches min_score, and the deadband holds a continuing alarm while S' reaches its clear level;
// the Score stays S. A model that is not mature decides as main's (S). Models are built at main's
// cadence; the verdicts of the records an immature model scores at the stream's start wait for
// the first mature model (young31_hold.go). Global model, flag_by: significance, streams without
// keys only; not in the snapshot.

// young31 selects the candidate (read once; OUTLIERD_YOUNG31C: branch young31c).
var young31 = os.Getenv("OUTLIERD_YOUNG31C") == "1"

// youngTimes is how many correlation times (n / tau_hat_max) a model's window must span to be
// mature (young31_rule.md: the window's variance is then under-read by about a tenth).
const youngTimes = 10

// youngRho is the lag-1 correlation from which a column counts as autocorrelated (half of its
// variance carried from one record to the next).
const youngRho = 0.5

// youngStats is what a model's window says of its columns' correlation.
type youngStats struct {
	// auto marks the autocorrelated columns; step is their robust step sd (1.4826 med|Delta|),
	// med and sd (1.4826 MAD) every column's level.
	auto          []bool
	step, med, sd []float64
	// reach is each column's largest robust excursion the window holds, max |x - med| / sd
	// (young31c_rule.md: S' discounts only within it; +Inf for a column of zero sd).
	reach []float64
	// shift is log10 tau_max, the discount of the level evidence.
	shift float64
	// mature: the window's rows span youngTimes of tau_max (young31_rule.md, (1)).
	mature bool
}

// youngOf reads the window cols (raw, arrival order) when the switch is set; nil when it is not
// or no column is autocorrelated (the model then decides as main's).
func youngOf(cols [][]float32) *youngStats {
	if !young31 || len(cols) == 0 || len(cols[0]) < 3 {
		return nil
	}
	n := len(cols[0])
	y := &youngStats{auto: make([]bool, len(cols)), step: make([]float64, len(cols)),
		med: make([]float64, len(cols)), sd: make([]float64, len(cols)), reach: make([]float64, len(cols))}
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
		y.reach[j] = math.Inf(1) // (zero sd: the reach is not read; evidence's zero-scale cases decide)
		if mad > 0 {
			y.reach[j] = slices.Max(buf) / (1.4826 * mad)
		}
		buf = buf[:0]
		for i := 1; i < len(c); i++ {
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
	y.shift = math.Log10(tauMax)
	y.mature = float64(n) >= float64(youngTimes*tauMax)
	return y
}

// youngMedian is the median of v (reorders v).
func youngMedian(v []float64) float64 {
	slices.Sort(v)
	k := len(v) / 2
	if len(v)%2 == 1 {
		return v[k]
	}
	return v[k-1] + float64((v[k]-v[k-1])/2)
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
	return (float64(x*x) + math.Log(x) + float64(0.5*math.Log(math.Pi))) / math.Ln10
}

// youngFlags is the stream's previous record (raw), for the step evidence, and the batch being
// finished's discounted significance S' a row (empty: each row's Score decides).
type youngFlags struct {
	x   []float64
	set bool
	sig []float64
}

// apply computes S' for b's records under a mature model and decides their flag by it (S' >=
// min_score: the flag and the outcasts), keeping the scores; under a model that is not mature,
// or none, it changes nothing (main's). Every record, scored or not, becomes the previous record
// of the next.
func (p *youngFlags) apply(cfg *Config, m *Model, b *batch.Batch, keyed bool) {
	p.sig = p.sig[:0]
	if !young31 || keyed || m == nil {
		return
	}
	y := m.young
	nf := len(m.Features)
	if len(p.x) != nf {
		p.x, p.set = make([]float64, nf), false
	}
	cols := make([][]float32, nf)
	for j := range cols {
		cols[j] = b.Feature(j)
	}
	on := y != nil && y.mature && m.Ranker != nil && cfg.FlagBy == FlagBySignificance && len(y.auto) == nf
	if on {
		p.sig = slices.Grow(p.sig, len(b.Scores))[:len(b.Scores)]
	}
	for i := range b.Scores {
		sc := &b.Scores[i]
		if on {
			p.sig[i] = sc.Score
			if sc.Scored && !sc.ByKey && !math.IsNaN(sc.Score) {
				e := y.evidence(cols, i, p)
				p.sig[i] = max(max(0, sc.Score-y.shift), min(sc.Score, e))
				if y.beyond(cols, i) { // outside the window's experience: main's S
					p.sig[i] = sc.Score
				}
				sc.Outlier = p.sig[i] >= sc.Threshold
			}
		}
		for j := range nf {
			p.x[j] = float64(cols[j][i])
		}
		p.set = true
	}
}

// flagScore is row i's significance for the flag decision: S' where apply set it, else score.
func (p *youngFlags) flagScore(i int, score float64) float64 {
	if i < len(p.sig) {
		return p.sig[i]
	}
	return score
}

// evidence is record i's step evidence E.
func (y *youngStats) evidence(cols [][]float32, i int, p *youngFlags) (e float64) {
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
	}
	return e
}

// beyond says whether record i lies, on some column, farther from the window's median (in
// robust sd) than any record the window itself holds: an excursion the window has not seen.
func (y *youngStats) beyond(cols [][]float32, i int) bool {
	for j := range cols {
		x := float64(cols[j][i])
		if y.sd[j] > 0 && math.Abs(x-y.med[j])/y.sd[j] > y.reach[j] {
			return true
		}
	}
	return false
}
