package detect

import (
	"math"
	"os"
	"slices"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Prototype (branch censor28, docs/bench/notes/censor28_rule.md), behind OUTLIERD_CENSOR28=1:
// a shift of the global model's significance read at the median of the pre-final combined
// scores (Ranker.mean) that the stream's past models gave the last `window` records they scored
// (out of their own window: a record is scored before it enters it). Significant and flagged
// (held, suppressed) records enter censored at c, the pre-final value at which their model
// reaches min_score; members of their model's window and keys' records stay out. A model
// installed while the pool holds at least calibrationRecords(rows) scores gets the shift
// D = max(0, Final.Surprisal(Q50) - Final.Surprisal(F50)) (Q50 the pool's median, F50 Final's
// own), and its combined score is max(0, Final.Surprisal(m) - D).

// censor28 selects the candidate (read once).
var censor28 = os.Getenv("OUTLIERD_CENSOR28") == "1"

// forwardPool is the ring of forward pre-final combined scores.
type forwardPool struct {
	ring []float64
	next int // the next slot
	n    int // scores held
	// cur is the shift of the model whose batch finish is ranking (rankRecent's far side).
	cur float64
}

// censorAt is the pre-final value c at which r's Final reaches minScore (bisection: Final is
// monotone and continuous; +Inf when it is empty).
func censorAt(r *Ranker, minScore float64) float64 {
	s := r.Final.Sorted
	if len(s) == 0 {
		return math.Inf(1)
	}
	lo, hi := s[0], max(s[len(s)-1], s[0]+1)
	for r.Final.Surprisal(hi) < minScore {
		lo, hi = hi, hi+2*(hi-s[0])
		if math.IsInf(hi, 0) {
			return math.Inf(1)
		}
	}
	for range 100 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if r.Final.Surprisal(mid) < minScore {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// note adds the batch's global-model records under the model m that scored them: forward and
// unflagged at their pre-final score, significant or flagged censored at m's c; in stream
// order, after capAlarms.
func (p *forwardPool) note(cfg *Config, m *Model, b *batch.Batch) {
	if !censor28 || cfg.FlagBy != FlagBySignificance || m == nil || m.Ranker == nil {
		return
	}
	if len(p.ring) != cfg.Window {
		p.ring, p.next, p.n = make([]float64, cfg.Window), 0, 0
	}
	if !m.fwdCensorSet {
		m.fwdCensor, m.fwdCensorSet = censorAt(m.Ranker, cfg.MinScore), true
	}
	r := m.Ranker
	parts, offs := b.Partitions(), b.Offsets()
	members := len(m.Members.Ranges) > 0 && len(parts) == len(b.Scores) && len(offs) == len(b.Scores)
	for i := range b.Scores {
		sc := &b.Scores[i]
		if !sc.Scored || sc.ByKey {
			continue
		}
		if members && m.Members.contains(b.Topic, parts[i], offs[i]) {
			continue
		}
		v := r.mean(sc.DensityScore, sc.DistanceScore)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if sc.Outlier || sc.Suppressed || sc.Held || !(sc.Score < cfg.MinScore) {
			v = min(v, m.fwdCensor) // censored: at least c
		}
		p.ring[p.next] = v
		p.next = (p.next + 1) % len(p.ring)
		p.n = min(p.n+1, len(p.ring))
	}
}

// floor gives m its shift when the pool holds enough scores.
func (p *forwardPool) floor(cfg *Config, m *Model) {
	if !censor28 || cfg.FlagBy != FlagBySignificance || m == nil || m.Ranker == nil {
		return
	}
	f := m.Ranker.Final.Sorted
	if p.n < calibrationRecords(max(m.WindowRecords, 1), cfg.AlarmRate) || p.n < 2 || len(f) == 0 {
		return
	}
	q := slices.Clone(p.ring[:p.n])
	slices.Sort(q)
	m.fwdShift = max(0, m.Ranker.Final.Surprisal(q[(len(q)-1)/2])-m.Ranker.Final.Surprisal(f[(len(f)-1)/2]))
}

// shifted is score lowered by the shift d (never below 0; d = 0: score).
func shifted(d, score float64) float64 {
	if d == 0 {
		return score
	}
	return max(0, score-d)
}

// farExcessShifted is farExcess with both the score (already shifted) and combineFar shifted
// by d.
func (r *Ranker) farExcessShifted(d, score, density, distance float64) float64 {
	if d == 0 {
		return r.farExcess(score, density, distance)
	}
	s := r.Distance.Sorted
	if r.Params.Detectors == DetectorsDensity || len(s) == 0 || !(distance > s[len(s)-1]) {
		return 0
	}
	return score - shifted(d, r.combineFar(density, distance))
}
