package detect

import "github.com/outlierd/outlierd/internal/core/batch"

// The flag: decide takes it from the global model's detectors' fields (combine, flag_by:
// scoreGlobal), then capAlarms holds it to the alarm cap in stream order (finish).

// decide sets each record's flag from the detectors' fields: under flag_by: verdicts the
// combine rule on the paper's verdicts, the hypercube's joining it when the detector ran (any:
// it flags too; all: it must flag too); under flag_by: rate the combined score above the
// alarm threshold alone; under flag_by: significance the combined score at least min_score,
// which capAlarms then holds to the cap (both when the model has a ranking part; else the
// verdicts decide).
func decide(cfg *Config, ranked bool, scores []batch.Score) {
	onRows(len(scores), func(lo, hi int) { decideRows(cfg, ranked, scores[lo:hi]) })
}

// decideRows is decide's flag for each of scores.
func decideRows(cfg *Config, ranked bool, scores []batch.Score) {
	byRate := ranked && cfg.FlagBy == FlagByRate
	bySignificance := ranked && cfg.FlagBy == FlagBySignificance
	for i := range scores {
		sc := &scores[i]
		sc.Outlier = combine(cfg.Combine, sc.DensityOutlier, sc.DistanceOutlier)
		switch {
		case byRate:
			sc.Outlier = sc.Score > sc.Threshold
		case bySignificance: // significant: capAlarms then applies the cap
			sc.Outlier = sc.Score >= sc.Threshold
		}
		if h := sc.Hypercube; h != nil && cfg.FlagBy == FlagByVerdicts {
			switch cfg.Combine {
			case CombineAny:
				sc.Outlier = sc.Outlier || h.Outlier
			case CombineAll:
				sc.Outlier = sc.Outlier && h.Outlier
			}
		}
	}
}

// combine applies the configured rule to the two verdicts.
func combine(rule Combine, densityOutlier, distanceOutlier bool) bool {
	switch rule {
	case CombineAll:
		return densityOutlier && distanceOutlier
	case CombineDensity:
		return densityOutlier
	case CombineDistance:
		return distanceOutlier
	}
	return densityOutlier || distanceOutlier
}

// capAlarms applies flag_by: significance's cap (at most alarm_rate x window alarm starts in the
// last window's records, an alarm counted once: admitStart) in stream order, decides the keys'
// first records by their own model in their keys' caps (keyed_handover.go), and marks the
// batch's significant records in the window (left out of the next builds). Only under
// significance: flag_by rate flags a share of every window and verdicts a few percent, and
// leaving those out of each build would trim the window's tails model after model.
func (s *Stage) capAlarms(b *batch.Batch, ranked bool) { s.capAlarmsBy(b, ranked, false) }

// capAlarmsBy is capAlarms where blind says that the model that scored the batch leaves a
// cyclic time pair unread (cycles.go): the significant records its global path marks are
// marked blind too (cycles_rejudge.go: re-judged once a model can read the pair).
func (s *Stage) capAlarmsBy(b *batch.Batch, ranked, blind bool) {
	first, pushed := s.pending[b]
	delete(s.pending, b)
	byCap := ranked && s.cfg.FlagBy == FlagBySignificance
	limit := capLimit(s.cfg.AlarmRate, s.cfg.Window)
	clear, keys := s.cfg.clearScore(), b.Keys()
	start := s.series.pos // the deadband's positions: record i's is start+i+1 (seriesAlarms)
	s.series.pos += uint64(len(b.Scores))
	var waiting []handRow // (the keys' first records by their own model: keyed_handover.go)
	if s.keyed != nil {
		var back []handBack
		waiting, back = s.keyed.hand.take()
		s.series.handBack(back, start, s.cfg.Window, limit)
	}
	s.series.expire(start+1, s.cfg.Window)
	// The rows the loop changes anything for, found on the cores: with every key warm, a
	// batch's rows are its keys' (ByKey) and few are significant, and the stream-order pass over
	// every row's score (megabytes) was on the stage's goroutine alone.
	rows := rowsWhere(b.Scores, func(sc *batch.Score) bool {
		return !sc.ByKey && byCap || (sc.Outlier || sc.ByKey && sc.Suppressed) && pushed && byCap
	})
	if len(waiting) > 0 {
		at := make([]int, len(waiting))
		for t, w := range waiting {
			at[t] = w.i
		}
		rows = mergeRows(rows, at)
	}
	for _, i := range rows {
		sc := &b.Scores[i]
		// decide's flag before the cap (significance: the score reached min_score)
		sig := sc.Outlier
		if len(waiting) > 0 && waiting[0].i == i { // its key's model's, decided here in its key's cap
			s.series.decideWaiting(sc, waiting[0].st, keys, i, start+uint64(i)+1, &s.cfg)
			waiting = waiting[1:]
			sig = sc.Outlier && !sc.Held || sc.Suppressed
		} else if sc.ByKey { // decided by its key's model and cap (keyed.go); a held record is not significant
			sig = sc.Outlier && !sc.Held || sc.Suppressed
		} else if byCap { // the deadband's series: the record's key (seriesAlarms)
			key, q := recordKey(keys, i), start+uint64(i)+1
			sc.Outlier, sc.Held = s.alarms.admitStart(sig, s.series.inAlarm(key, q, s.cfg.Window), sc.Score, clear, limit)
			sc.Suppressed = sig && !sc.Outlier
			s.series.note(key, q, sc.Outlier, s.cfg.Window, limit)
		}
		if sig && pushed && byCap {
			s.recs.setSignificant(first + uint64(i))
			if blind && !sc.ByKey {
				s.recs.setBlind(first + uint64(i))
			}
		}
	}
}
