package detect

import (
	"context"
	"math"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Prototype (branch young31, docs/bench/notes/young31_rule.md (5)-(11)), behind
// OUTLIERD_YOUNG31=1: the models are main's from the first one on (built at min_records,
// recalibrated and rebuilt at main's cadence); only the verdict waits. From the stream's start,
// while no mature model has served, each batch a model scores that reads an autocorrelated
// column and is not mature is scored as main scores it, its outcasts marked at once by main's
// flag (the next builds read main's references), and held: its output and the stream-order
// steps that read verdicts (the cap, the deadband, the alert groups, the recent ranking, the
// explanations: finishVerdicts). When the first mature model serves, every held record is scored
// again by it and flagged by its S', its outcast mark replaced by that verdict, then the
// verdict steps run in stream order (rejudge). When the hold ends without one (the input ends, a
// model built from a full window is not mature or reads no autocorrelated column, or twice the
// window's records are held), the held batches go out as main's, the verdict steps run over
// them in stream order as main ran them: main's output bit for bit. Once per stream; only under
// before_model: hold, flag_by: significance, the global model of a stream without keys, no
// overlap, role all.

// The hold's states.
const (
	holdNone    = iota // no batch held yet: the first model's reading decides
	holdHolding        // batches held for a mature model
	holdEnded          // released (or never began): nothing is held again
)

// youngHold is the batches whose verdicts wait for a mature model.
type youngHold struct {
	state   int
	batches []heldVerdict
	set     map[*batch.Batch]bool
	records int
	// prev is the record before the first held one (raw), for the step evidence at the
	// re-judgement; prevSet says there is one.
	prev    []float64
	prevSet bool
	// from and releasedAt are the stream's records pushed when the hold began and when it was
	// released; how says what released it (young31_rule.md (6), (7)).
	from, releasedAt uint64
	how              string
	// judges counts the judges built ((6')), judged those that read mature (0 or 1).
	judges int
}

// heldVerdict is a held batch and the model that scored it.
type heldVerdict struct {
	b *batch.Batch
	m *Model
}

// holds says whether the batch m has just scored is held (young31_rule.md (5)): the hold begins
// with the first batch scored by a model that reads an autocorrelated column and is neither
// mature nor built from a full window, and every batch is held until youngRelease ends it.
func (h *youngHold) holds(s *Stage, m *Model) bool {
	if h.state != holdNone {
		return h.state == holdHolding
	}
	if !young31 || s.keyed != nil || s.cfg.FlagBy != FlagBySignificance || s.cfg.BeforeModel != BeforeModelHold ||
		s.overlapping() || s.deps.Role != RoleAll && s.deps.Role != "" || m == nil || m.Ranker == nil {
		h.state = holdEnded
		return false
	}
	if y := m.young; y == nil || y.mature || m.youngFull {
		h.state = holdEnded
		return false
	}
	h.state, h.from, h.set = holdHolding, s.recs.pushed, map[*batch.Batch]bool{}
	s.deps.Log.Info().Uint64("records", h.from).Float64("tau_hat", math.Pow(10, m.young.shift)).
		Msg("young31: the model is not mature; verdicts held for a mature model")
	return true
}

// notePrev keeps p's previous record as the one before the first held record.
func (h *youngHold) notePrev(p *youngFlags) {
	if len(h.batches) == 0 {
		h.prev, h.prevSet = append([]float64(nil), p.x...), p.set
	}
}

// add holds b, scored by m.
func (h *youngHold) add(b *batch.Batch, m *Model) {
	h.batches = append(h.batches, heldVerdict{b, m})
	h.set[b] = true
	h.records += b.Len()
}

// keep is out less the batches held.
func (h *youngHold) keep(out []*batch.Batch) []*batch.Batch {
	if len(h.set) == 0 {
		return out
	}
	kept := out[:0:0]
	for _, b := range out {
		if !h.set[b] {
			kept = append(kept, b)
		}
	}
	return kept
}

// drop releases the held batches unsent (AbandonContext).
func (h *youngHold) drop(pending map[*batch.Batch]uint64) {
	for _, hv := range h.batches {
		delete(pending, hv.b)
		hv.b.Release()
	}
	h.batches, h.set, h.records = nil, nil, 0
}

// markOutcasts marks b's records decide flagged (on main's S: m is not mature) as significant
// now, as capAlarms would (young31_rule.md (5): the builds at main's cadence read them).
func (s *Stage) markOutcasts(b *batch.Batch, m *Model) {
	first, pushed := s.pending[b]
	if !pushed || m.Ranker == nil || s.cfg.FlagBy != FlagBySignificance {
		return
	}
	for i := range b.Scores {
		if sc := &b.Scores[i]; sc.Outlier && !sc.ByKey {
			s.recs.setSignificant(first + uint64(i))
		}
	}
}

// youngRelease ends the hold when the serving model decides it (young31_rule.md (6), (7)),
// atEnd at the input's end, and returns the held batches, in stream order, with their verdicts.
func (s *Stage) youngRelease(atEnd bool) ([]*batch.Batch, error) {
	h, m := &s.yhold, s.model
	if h.state != holdHolding || m == nil {
		return nil, nil
	}
	y, judged := m.young, false
	if y != nil && y.mature {
		// (6'): the judge is built from the window with the held records' marks cleared; one
		// that reads immature serves on, the hold going on under it (or ending below).
		j := s.youngJudge()
		m, y, judged = s.model, s.model.young, j != nil
	}
	switch {
	case judged:
		h.how = "mature"
	case y == nil:
		h.how = "main's: the model reads no autocorrelated column"
	case m.youngFull:
		h.how = "main's: a full window, not mature"
	case h.records >= 2*s.cfg.Window:
		h.how = "main's: the hold's bound"
	case atEnd:
		h.how = "main's: the input ended"
	default:
		return nil, nil
	}
	out := make([]*batch.Batch, 0, len(h.batches))
	keep := s.young.sig
	p := youngFlags{x: h.prev, set: h.prevSet}
	for _, hv := range h.batches {
		if h.how == "mature" {
			if err := s.rejudge(hv.b, m, &p); err != nil {
				return nil, err
			}
		} else {
			raw, _, err := s.columns(hv.b)
			if err != nil {
				return nil, err
			}
			s.young.sig = nil // (main's verdicts: S decides)
			s.finishVerdicts(hv.b, hv.m, raw)
		}
		out = append(out, hv.b)
	}
	s.young.sig = keep[:0]
	h.state, h.releasedAt = holdEnded, s.recs.pushed
	s.deps.Log.Info().Uint64("from", h.from).Uint64("released_at", h.releasedAt).Int("records", h.records).
		Str("by", h.how).Msg("young31: held verdicts released")
	h.batches, h.set, h.records = nil, nil, 0
	return out, nil
}

// youngJudge builds, when a model of main's cadence first reads mature, the model that re-judges
// the held records (young31_rule.md (6'), amended): from the window with the outcast marks of
// the held records cleared (main's immature models marked the wander's tails; a reference
// without them under-reads its spread and correlation time), built at once and served. It
// returns the judge if it reads mature (or reads no autocorrelated column), else nil: the hold
// goes on under it, the held records' marks left cleared.
func (s *Stage) youngJudge() *Model {
	if s.builds.running {
		s.awaitBuild(context.Background())
	}
	for _, hv := range s.yhold.batches {
		if first, pushed := s.pending[hv.b]; pushed {
			for i := range hv.b.Len() {
				s.recs.clearSignificant(first + uint64(i))
			}
		}
	}
	s.startBuild()
	s.awaitBuild(context.Background())
	m := s.model
	s.yhold.judges++
	tau := 0.0
	if m.young != nil {
		tau = math.Pow(10, m.young.shift)
	}
	s.deps.Log.Info().Int("window", s.win.Len()).Float64("tau_hat", tau).Bool("mature", m.young == nil || m.young.mature).
		Msg("young31: the judge, built from the window without the held records' marks")
	if m.young == nil || m.young.mature {
		return m
	}
	return nil
}

// rejudge scores the held batch b again with the mature model m, flags it by m's S' (p: the
// record before it), replaces its records' outcast marks by those verdicts and runs its verdict
// steps (young31_rule.md (6)).
func (s *Stage) rejudge(b *batch.Batch, m *Model, p *youngFlags) error {
	sc, err := s.begin(b, 0, false)
	if err != nil {
		return err
	}
	dets, _ := s.lane(0)
	if sc.done != nil {
		<-sc.done
		dets = s.followerDetectors()
	}
	if sc.err != nil {
		return sc.err
	}
	if err := s.scoreGlobal(sc, dets); err != nil {
		return err
	}
	p.apply(&s.cfg, m, b, false)
	if first, pushed := s.pending[b]; pushed {
		for i := range b.Scores {
			s.recs.clearSignificant(first + uint64(i))
		}
	}
	s.young.sig = p.sig
	s.finishVerdicts(b, m, sc.raw)
	return nil
}

// clearSignificant unmarks the record of stream index n, if the ring still holds it.
func (r *windowRing) clearSignificant(n uint64) {
	if n < r.pushed && r.pushed-n <= uint64(r.size) {
		r.sig[n%uint64(len(r.sig))] = false
	}
}
