package detect

import (
	"math"
	"os"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// Prototype (branch paths28, docs/bench/notes/paths28_rule.md), behind OUTLIERD_PATHS28=1: a
// floor on the global model's significance from the scores that the stream's past models gave
// to the records they scored (out of their own window: a record is scored before it enters it).
// The stage keeps the pre-final combined scores (Ranker.mean) of the last `window` records the
// global model scored, leaving out significant, flagged (held, suppressed) and member records;
// a model installed while the pool holds at least calibrationRecords(rows) of them gets their
// calibration as fwd, and its combined score is min(Final's surprisal, fwd's): the larger of the
// in-sample and the forward tail probability.

// paths28 selects the candidate (read once).
var paths28 = os.Getenv("OUTLIERD_PATHS28") == "1"

// forwardPool is the ring of forward pre-final combined scores.
type forwardPool struct {
	ring []float64
	next int // the next slot
	n    int // scores held
	// cur is the forward calibration of the model whose batch finish is ranking (rankRecent's
	// far side), nil when it has none.
	cur *rank.Calibration
}

// note adds the batch's global-model records that count (forward, not significant, not
// flagged) under the model m that scored them; in stream order, after capAlarms.
func (p *forwardPool) note(cfg *Config, m *Model, b *batch.Batch) {
	if !paths28 || cfg.FlagBy != FlagBySignificance || m == nil || m.Ranker == nil {
		return
	}
	if len(p.ring) != cfg.Window {
		p.ring, p.next, p.n = make([]float64, cfg.Window), 0, 0
	}
	r := m.Ranker
	parts, offs := b.Partitions(), b.Offsets()
	members := len(m.Members.Ranges) > 0 && len(parts) == len(b.Scores) && len(offs) == len(b.Scores)
	for i := range b.Scores {
		sc := &b.Scores[i]
		if !sc.Scored || sc.ByKey || sc.Outlier || sc.Suppressed || sc.Held || !(sc.Score < cfg.MinScore) {
			continue
		}
		if members && m.Members.contains(b.Topic, parts[i], offs[i]) {
			continue
		}
		v := r.mean(sc.DensityScore, sc.DistanceScore)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		p.ring[p.next] = v
		p.next = (p.next + 1) % len(p.ring)
		p.n = min(p.n+1, len(p.ring))
	}
}

// floor gives m's ranker the forward calibration when the pool holds enough scores.
func (p *forwardPool) floor(cfg *Config, m *Model) {
	if !paths28 || cfg.FlagBy != FlagBySignificance || m == nil || m.Ranker == nil {
		return
	}
	if p.n < calibrationRecords(max(m.WindowRecords, 1), cfg.AlarmRate) || p.n < 2 {
		return
	}
	c := rank.NewCalibration(p.ring[:p.n])
	m.fwd = &c
}

// floored is score (the model's combined score of the raw density and distance) floored by the
// forward calibration fwd (nil: score).
func (r *Ranker) floored(fwd *rank.Calibration, score, density, distance float64) float64 {
	if fwd == nil {
		return score
	}
	return min(score, fwd.Surprisal(r.mean(density, distance)))
}

// farExcessFloored is farExcess with both the score and combineFar floored by fwd.
func (r *Ranker) farExcessFloored(fwd *rank.Calibration, score, density, distance float64) float64 {
	if fwd == nil {
		return r.farExcess(score, density, distance)
	}
	s := r.Distance.Sorted
	if r.Params.Detectors == DetectorsDensity || len(s) == 0 || !(distance > s[len(s)-1]) {
		return 0
	}
	far := r.combineFar(density, distance)
	if r.Params.Detectors == DetectorsDistance {
		return score - min(far, fwd.Surprisal(r.Distance.SurprisalFar(distance)))
	}
	return score - min(far, fwd.Surprisal(r.meanOf(r.Density.Surprisal(density), r.Distance.SurprisalFar(distance))))
}
