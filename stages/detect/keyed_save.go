package detect

import (
	"io"
	"time"
)

// The save of the keys' and the alarm state to detect.state_dir (the formats: keyed_snapshot.go,
// alarm_state.go; what it does not write again: keyed_unchanged.go).

// saveKeys writes the keys' state (key_by: key, not on a scorer: its keys' models come from the
// model topic), the alarm state (alarm_state.go; not on a builder: it flags nothing) and the
// global window (window_state.go; not on a scorer: it keeps none) to state_dir
// (keys-<sequence>.osnap, alarms-<sequence>.osnap, window-<sequence>.osnap): copied here, on the stage's
// goroutine (the next batch changes them), at one point of the stream, encoded, written and
// synced on a goroutine of their own unless wait. Without state_dir it does nothing; a save that
// need not wait is skipped while the previous one is still being written (tried again with a
// later model), so that one copy of the keys at most waits for a slow disk. A save that need not
// wait while a batch in flight has been through its keys' pass and not finished (overlap.go's
// chained passes: its keys' first records by their own models undecided, the stage's alarms not
// yet past it) is made once that batch finished, before the next pass starts (saveDue): the
// keys' and the stage's alarms are saved after the same batch, none of its records undecided.
func (s *Stage) saveKeys(wait bool) {
	d := s.ext.snaps
	if d == nil {
		return
	}
	s.keysQuiet()
	keys := s.keyed != nil && s.deps.Role != RoleScorer && len(s.keyed.keys) > 0 // (no keys: nothing to resume)
	alarms := s.deps.Role != RoleBuilder
	// The window: not a scorer's (it keeps none), nor one whose records are all held for a first
	// model (before_model: hold), uncommitted: they are read again, and saved they would count
	// twice towards min_records (window_state.go).
	win := s.deps.Role != RoleScorer && s.win.Len() > 0 && !s.holdsAll()
	if !keys && !alarms && !win {
		return
	}
	if s.ext.stateAhead.Load() {
		s.deps.Log.Warn().Msg("keys' and alarm state not saved: batches were dropped after their keys' pass, and are read again after a restart; the last save stands")
		return
	}
	if !wait && s.passAhead() {
		s.ext.saveDue = true
		return
	}
	if !wait && !s.ext.keysSaving.CompareAndSwap(false, true) {
		return // (Close waits for the one in flight, then saves the keys as they are then)
	}
	if wait && s.ext.saving.Err() != nil { // (Close past the stop's deadline: not even copied)
		if keys {
			s.cutSave("keys' state", len(s.keyed.keys))
		}
		if alarms {
			s.cutSave("alarm state", 0)
		}
		if win {
			s.cutSave("window", 0)
		}
		return
	}
	s.ext.keysSaved, s.ext.saveDue = time.Now(), false
	var states []keyState
	var fleet *fleetTail
	var al *alarmState
	// The keys' digest: a stop's, of the keys themselves, so that an unchanged state is not even
	// copied. It and the copy end when the stop's deadline passes (keyed_unchanged.go).
	var sum uint64
	if keys && wait {
		var err error
		if sum, err = s.liveKeysDigest(s.ext.saving, s.series.pos); err != nil { // (the deadline passed as it digested)
			s.cutSave("keys' state", len(s.keyed.keys))
			keys = false
		} else if file, same := s.ext.saved.unchanged(&s.ext.saved.keys, sum); same {
			s.notSavedAgain("keys' state", file, true)
			keys = false
		}
	}
	if keys {
		var err error
		if states, err = s.keyed.keysCopyContext(s.ext.saving); err != nil { // (a stop's, as its digest; saving ends only at the stop)
			s.cutSave("keys' state", len(s.keyed.keys))
		} else {
			fleet = s.keyed.fleet.fleetCopy()
		}
	}
	if alarms {
		al = s.alarmsCopy()
	}
	var ws *windowState
	if win {
		ws = s.windowCopy()
	}
	features, cfg, pos := s.features, s.cfg, s.series.pos
	ctx := s.ext.saving
	write := func() {
		if al != nil {
			s.writeAlarms(ctx, d, al, cfg.Keys.Window, wait)
		}
		if ws != nil {
			s.writeWindow(ctx, d, ws, wait)
		}
		if states == nil {
			return
		}
		if !wait { // (a periodic save digests the copy, on its own goroutine)
			var err error
			if sum, err = keysDigestOf(ctx, s.ext.seed, features, &cfg, len(states), eachOf(states), fleet, pos); err != nil {
				s.cutSave("keys' state", len(states))
				return
			}
			if file, same := s.ext.saved.unchanged(&s.ext.saved.keys, sum); same {
				s.notSavedAgain("keys' state", file, false)
				return
			}
		}
		payload, err := encodeKeyStatesContext(ctx, states, fleet, pos, features, &cfg)
		var path string
		if err == nil {
			path, err = d.saveAs(ctx, keysPrefix, &d.nextKeys, func(w io.Writer) error {
				return keysSnapshotFile.WriteContext(ctx, w, KeysSnapshotFormat, payload)
			})
		}
		if err != nil && cutBy(ctx, err) {
			s.cutSave("keys' state", len(states))
			return
		}
		if err != nil {
			s.deps.Log.Error().Err(err).Int("keys", len(states)).Msg("keys' state snapshot failed; the keys keep scoring")
			return
		}
		s.ext.saved.set(&s.ext.saved.keys, sum, path)
		s.deps.Log.Debug().Str("file", path).Int("keys", len(states)).Int("bytes", len(payload)).Msg("keys' state snapshot written")
	}
	if wait {
		write()
		return
	}
	s.ext.saves.Add(1)
	go func() {
		defer s.ext.saves.Done()
		defer s.ext.keysSaving.Store(false)
		write()
	}()
}

// passAhead says whether a batch in flight has started its keys' pass (a chained one,
// overlap.go) and not finished: the keys' state is then past the stage's alarms.
func (s *Stage) passAhead() bool {
	for _, sc := range s.flight {
		if sc.keyedDone != nil {
			return true
		}
	}
	return false
}

// saveDue makes the save put off by saveKeys (a batch's keys' pass ahead), once the batch
// finished and before the next pass starts.
func (s *Stage) saveDue() {
	if s.ext.saveDue {
		s.saveKeys(false)
	}
}

// holdsAll says whether every record of the window is held for a first model (role all under
// before_model: hold, no model yet; Deps.Role left empty is RoleAll): none was passed on, so none
// committed.
func (s *Stage) holdsAll() bool {
	return s.model == nil && (s.deps.Role == RoleAll || s.deps.Role == "") && s.cfg.BeforeModel == BeforeModelHold
}
