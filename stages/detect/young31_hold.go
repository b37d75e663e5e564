package detect

import (
	"cmp"
	"context"
	"math"
	"slices"

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
	// judges counts the judges built (young31b_rule.md (6b)); seen is the serving model last
	// read for maturity (a judge is tried once per model of main's cadence).
	judges int
	seen   *Model
	// split says fold B has begun: t1 is the stream's records pushed then, splitAt the first
	// batch of fold B in batches, judgeA fold B's judge (the window at t1, marks cleared).
	split   bool
	t1      uint64
	splitAt int
	judgeA  *Model
}

// heldVerdict is a held batch and the model that scored it.
type heldVerdict struct {
	b *batch.Batch
	m *Model
	// sig is the batch's S' a row where a mature model scored it (youngFlags.sig; nil: S).
	sig []float64
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
func (h *youngHold) add(b *batch.Batch, m *Model, sig []float64) {
	h.batches = append(h.batches, heldVerdict{b, m, append([]float64(nil), sig...)})
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

// youngRelease ends the hold when the serving model decides it (young31b_rule.md (6b), (7),
// (7')), atEnd at the input's end, and returns the held batches, in stream order, with their
// verdicts.
func (s *Stage) youngRelease(atEnd bool) ([]*batch.Batch, error) {
	h, m := &s.yhold, s.model
	if h.state != holdHolding || m == nil {
		return nil, nil
	}
	var judgeB *Model
	if m != h.seen {
		h.seen = m
		var err error
		if judgeB, err = s.youngJudges(m); err != nil {
			return nil, err
		}
	}
	switch {
	case judgeB != nil:
		h.how = "mature"
	case !h.split && m.young == nil:
		h.how = "main's: the model reads no autocorrelated column"
	case !h.split && m.youngFull:
		h.how = "main's: a full window, not mature"
	case h.records >= 2*s.cfg.Window:
		h.how = "main's: the hold's bound"
	case atEnd:
		h.how = "main's: the input ended"
	default:
		return nil, nil
	}
	if judgeB != nil && s.builds.running {
		s.awaitBuild(context.Background()) // (a build of main's cadence lands before the judges)
	}
	out := make([]*batch.Batch, 0, len(h.batches))
	keep := s.young.sig
	p := youngFlags{x: h.prev, set: h.prevSet}
	for k, hv := range h.batches {
		if judgeB != nil {
			j := judgeB
			if k >= h.splitAt {
				j = h.judgeA
			}
			if s.model != j {
				j.Version = s.buildVersion()
				if err := s.install(j); err != nil {
					return nil, err
				}
			}
			if err := s.youngRejudge(hv.b, j, &p); err != nil {
				return nil, err
			}
		} else {
			raw, _, err := s.columns(hv.b)
			if err != nil {
				return nil, err
			}
			s.young.sig = hv.sig // (the serving path's verdicts: S, or S' under a mature model)
			s.finishVerdicts(hv.b, hv.m, raw)
		}
		out = append(out, hv.b)
	}
	s.young.sig = keep[:0]
	if judgeB != nil { // a model of the window with the judges' marks serves from here
		s.startBuild()
		s.awaitBuild(context.Background())
	}
	h.state, h.releasedAt = holdEnded, s.recs.pushed
	s.deps.Log.Info().Uint64("from", h.from).Uint64("split", h.t1).Uint64("released_at", h.releasedAt).Int("records", h.records).
		Str("by", h.how).Msg("young31b: held verdicts released")
	h.batches, h.set, h.records, h.judgeA = nil, nil, 0, nil
	return out, nil
}

// youngJudges reads the newly installed model m of main's cadence (young31b_rule.md (6b)):
// before the split, if m reads mature, it builds fold B's judge J_A aside from the window as it
// stands with every mark cleared and, if J_A reads mature (or no autocorrelated column), splits
// the hold there; after the split, if the window's records since the split read mature, it
// builds and returns fold A's judge J_B from them alone (nil: not yet).
func (s *Stage) youngJudges(m *Model) (*Model, error) {
	h := &s.yhold
	if !h.split {
		if m.young == nil || !m.young.mature {
			return nil, nil
		}
		j, err := s.youngJudgeOf(s.win.Len())
		if err != nil || j == nil {
			return nil, err
		}
		if j.young != nil && !j.young.mature {
			return nil, nil // (the next model of main's cadence that reads mature tries again)
		}
		h.split, h.t1, h.splitAt, h.judgeA = true, s.recs.pushed, len(h.batches), j
		s.deps.Log.Info().Uint64("records", h.t1).Msg("young31b: fold B begins; its judge read the window before it")
		return nil, nil
	}
	k := int(min(s.recs.pushed-h.t1, uint64(s.win.Len())))
	if k < 3 {
		return nil, nil
	}
	cols, _ := s.win.Snapshot()
	for j, c := range cols {
		cols[j] = c[len(c)-k:]
	}
	if y := youngOf(cols); y != nil && !y.mature {
		return nil, nil
	}
	return s.youngJudgeOf(k)
}

// youngJudgeOf builds a judge aside (not served) from the window's newest k records, every
// mark cleared (young31b_rule.md (6b): the held records' marks are verdicts waiting to be
// re-judged), its Members those k records'.
func (s *Stage) youngJudgeOf(k int) (*Model, error) {
	cols, sds := s.win.Snapshot()
	for j := range cols {
		cols[j] = cols[j][len(cols[j])-k:]
		if sds != nil {
			sds[j] = sds[j][len(sds[j])-k:]
		}
	}
	j, err := buildOn(s.deps.Accelerator, cols, sds, s.features, s.cfg, s.buildVersion())
	if err != nil {
		return nil, err
	}
	j.Members, j.WindowSpan = s.recs.newestMembers(k), s.recs.span()
	j.young = youngOf(cols)
	s.yhold.judges++
	tau := 0.0
	if j.young != nil {
		tau = math.Pow(10, j.young.shift)
	}
	s.deps.Log.Info().Int("records", k).Float64("tau_hat", tau).Bool("mature", j.young == nil || j.young.mature).
		Msg("young31b: a judge, built aside")
	return j, nil
}

// youngRejudge scores the held batch b again with the judge m, flags it by m's S' (p: the
// record before it), replaces its records' outcast marks by those verdicts and runs its verdict
// steps (young31b_rule.md (6b)).
func (s *Stage) youngRejudge(b *batch.Batch, m *Model, p *youngFlags) error {
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

// newestMembers are the per-partition offset ranges of the newest k records held (a judge of
// the window's newest records: young31b_rule.md (6b)).
func (r *windowRing) newestMembers(k int) Members {
	m := Members{Topic: r.topic}
	at := map[int32]int{}
	for n := r.pushed - uint64(k); n < r.pushed; n++ {
		i := n % uint64(len(r.offs))
		p, o := r.parts[i], r.offs[i]
		x, ok := at[p]
		if !ok {
			x = len(m.Ranges)
			at[p] = x
			m.Ranges = append(m.Ranges, PartitionRange{Partition: p, Lo: o, Hi: o})
		}
		m.Ranges[x].Lo, m.Ranges[x].Hi = min(m.Ranges[x].Lo, o), max(m.Ranges[x].Hi, o)
	}
	slices.SortFunc(m.Ranges, func(a, b PartitionRange) int { return cmp.Compare(a.Partition, b.Partition) })
	return m
}
