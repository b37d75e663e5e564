package detect

import (
	"context"
	"errors"
)

// The alert groups across a change of the columns (Deps.AlertGroupsFrom).
//
// A start whose columns differ from those the alarm state was saved with (a feature added or
// removed, a derived column redefined: pipeline/columndefs.go) does not load that state: the
// deadband's series in alarm held a series' next records flagged against the new model at
// flag_clear x min_score, a score the new model alone does not flag at, and the stage's cap, the
// keys' caps and a scorer's fleet pool count verdicts and scores of models no longer serving.
// The alert groups are none of that: a group is a key's open alert, its time and where it
// stands on its partition, whatever model flagged it; it flags nothing, it folds a key's next
// flagged records within alert_cooldown into that alert instead of paging again. Dropped with
// the rest, a fault flagged before and after the change was two alerts. So the groups of the
// alarm state moved aside are kept, with the consumer group generation and the offsets they
// were checked against (the first assignment after the restart keeps or drops them as after any
// restart), and the alarms start otherwise empty.

// adoptAlertGroups installs the alert groups of the newest alarm state file of dir that reads
// back whole and fits detect.window (as loadAlarms reads state_dir's), nothing else of it.
func (s *Stage) adoptAlertGroups(ctx context.Context, dir string) error {
	files, err := (&SnapshotDir{dir: dir}).list(alarmsPrefix)
	if err != nil {
		return err
	}
	for _, path := range files {
		var a *alarmState
		err := readSealedFile(ctx, path, alarmsSnapshotFile, func(format uint32, p []byte) (err error) {
			a, err = decodeAlarms(format, p, s.cfg.Window, s.cfg.Keys.Window)
			return err
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrSnapshotMismatch) {
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("alert groups of the alarm state of other columns not kept: the alarms start empty")
			return nil
		}
		if err != nil {
			s.deps.Log.Warn().Err(err).Str("file", path).Msg("alarm state snapshot of other columns skipped")
			continue
		}
		s.restoreGroups(a)
		s.deps.Log.Info().Str("file", path).Int("alert_groups", len(s.groups.open)).
			Msg("alert groups kept across the change of columns (a key's alert open before it folds the key's next flags within alert_cooldown); the series in alarm and the alarm caps start empty with the new columns' model")
		return nil
	}
	return nil
}

// restoreGroups installs a's alert groups, the generation and the offsets they were checked
// against.
func (s *Stage) restoreGroups(a *alarmState) {
	s.groups.open = make(map[string]*alertGroup, len(a.groups))
	s.groups.gen, s.groups.genKnown, s.groups.restored, s.groups.unchecked = a.gen, a.genKnown, nil, true
	if a.at.Taken != nil {
		s.groups.restored = &a.at
	}
	for k, g := range a.groups {
		s.groups.open[k] = &g
	}
	// (A file of a release before 2026-11-28 may hold more groups than the limit: a batch could
	// pass it.)
	s.groups.afterRestore(s.cfg.AlertCooldown)
}
