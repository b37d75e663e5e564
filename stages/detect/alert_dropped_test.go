package detect

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestAlertGroupDroppedKeepsCount (issue 20 item 4): a key's group with n records folded into
// it, dropped at a rebalance (its partition moved away and back; a missed generation or a
// restart that could not vouch for it drops it alike, dropOutside), folds nothing more, but the
// key's next alert here says n in folded_into_previous_alert: those records were folded into
// this member's previous alert of the key, and no other alert counts them. The alert after it
// counts its own. A key whose partition stayed folds as ever. The count goes through a save and
// restore of the alarm state, and through a second drop (the partition moving again before the
// key's next alert). Before, the drop forgot the count: the key's next alert said 0.
func TestAlertGroupDroppedKeepsCount(t *testing.T) {
	const n = 7
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name           string
		restore, twice bool
	}{{"dropped", false, false}, {"dropped, saved and restored", true, false}, {"dropped twice", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			g := &alertGroups{}
			var rows []testbatch.Row
			for i := range n + 1 { // an alert each, then n folded into it
				at := t0.Add(time.Duration(i) * time.Second)
				rows = append(rows, flaggedRow("a", 0, at), flaggedRow("b", 1, at))
			}
			for i, sc := range foldRows(t, g, cooldown, rows) {
				if sc.Grouped != (i >= 2) {
					t.Fatalf("setup: record %d grouped %v", i, sc.Grouped)
				}
			}
			if got := g.dropOutside(1, func(p int32) bool { return p != 0 }, nil, cooldown); got != 1 { // partition 0 moves away
				t.Errorf("dropOutside: %d groups dropped, want 1 (a's)", got)
			}
			if c.twice {
				if got := g.dropOutside(2, func(p int32) bool { return p != 0 }, nil, cooldown); got != 0 {
					t.Errorf("second dropOutside: %d groups dropped, want 0 (a's went at the first)", got)
				}
			}
			if c.restore {
				a := &alarmState{cap: *newAlarmCap(100), groups: map[string]alertGroup{}, gen: 1, genKnown: true}
				for k, o := range g.open {
					a.groups[k] = *o
				}
				b, err := decodeAlarms(AlarmsSnapshotFormat, a.encode(0), 100, 0)
				if err != nil {
					t.Fatal(err)
				}
				g = &alertGroups{open: map[string]*alertGroup{}}
				for k, o := range b.groups {
					g.open[k] = &o
				}
			}
			g.dropOutside(3, func(int32) bool { return true }, nil, cooldown) // and comes back
			// Within the cooldown of a's alert: a's next flagged record is a new alert (its
			// group dropped), carrying the n folded into the one before; b's folds.
			next := func(at time.Duration) []batch.Score {
				return foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(at)), flaggedRow("b", 1, t0.Add(at))})
			}
			got := next(time.Minute)
			if a := got[0]; a.Grouped || a.Folded != n {
				t.Errorf("a's next flagged record after its group was dropped: grouped %v, folded_into_previous_alert %d; want an alert saying %d (the records folded into a's previous alert here)", a.Grouped, a.Folded, n)
			}
			if b := got[1]; !b.Grouped || b.AlertAt != t0.UnixMilli() {
				t.Errorf("b's next flagged record (partition 1 stayed): grouped %v (alert at %d), want folded into b's alert", b.Grouped, b.AlertAt)
			}
			// a's new alert folds its key's next record, and the alert after it counts that one.
			if a := next(2 * time.Minute)[0]; !a.Grouped || a.AlertAt != t0.Add(time.Minute).UnixMilli() {
				t.Errorf("a's record after its new alert: grouped %v (alert at %d), want folded into the new alert", a.Grouped, a.AlertAt)
			}
			if a := next(time.Minute + cooldown)[0]; a.Grouped || a.Folded != 1 {
				t.Errorf("a's alert after the new one's cooldown: grouped %v, folded_into_previous_alert %d, want an alert saying 1", a.Grouped, a.Folded)
			}
		})
	}
}

// TestAwayAlertGroupDroppedKeepsCount (issue 20 item 4): an away group (alert_away.go) with
// records folded into it, dropped at the detect goroutine's turn at a later generation, leaves
// its count to the key's next alert here, as a real group's drop does: whether the partition is
// still away (the next alert another away one) or back (a real one).
func TestAwayAlertGroupDroppedKeepsCount(t *testing.T) {
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, back := range []bool{false, true} {
		g, owned, gen := awayGroupFolding3(t, cooldown, t0)
		*gen = 6
		if back {
			owned[0] = true
		}
		g.dropOutside(6, func(p int32) bool { return owned[p] }, nil, cooldown)
		if len(g.away) != 0 {
			t.Fatalf("back %v: away groups %v after the turn at a later generation, want none", back, g.away)
		}
		if a := foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(time.Minute))})[0]; a.Grouped || a.Folded != 3 {
			t.Errorf("back %v: a's next flagged record: grouped %v, folded_into_previous_alert %d; want an alert saying 3 (folded into a's away alert)", back, a.Grouped, a.Folded)
		}
	}
}

// TestAlertGroupDroppedAtRestartCount: at the first assignment after a restore (Stage.
// DropAlertsOutside), a group it drops keeps its count for the key's next alert only where its
// partition's offset was confirmed committed at a clean stop: every record the groups took was
// written and committed, none read again. After a crash (not confirmed) the groups may hold
// records whose outputs were never written, read again and folded anew: the count goes, as
// before, lest it be told twice. A group dropped before the save keeps its count either way.
func TestAlertGroupDroppedAtRestartCount(t *testing.T) {
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, clean := range []bool{true, false} {
		a := &alarmState{cap: *newAlarmCap(100), gen: 4, genKnown: true, groups: map[string]alertGroup{
			"a": {at: t0.UnixMilli(), timed: true, folded: 5, partition: 0},
			"d": {at: t0.UnixMilli(), timed: true, folded: 2, partition: 0, dropped: true},
		}, at: AlertsAt{Taken: map[int32]int64{0: 100}, Committed: map[int32]bool{0: clean}}}
		s := &Stage{deps: Deps{Log: zerolog.Nop()}}
		s.cfg.AlertCooldown = cooldown
		s.restoreGroups(a)
		s.DropAlertsOutside(9, func(int32) bool { return false }) // (a generation missed: not vouched for)
		got := foldRows(t, &s.groups, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(time.Minute)), flaggedRow("d", 0, t0.Add(time.Minute))})
		want := 0
		if clean {
			want = 5
		}
		if got[0].Grouped || got[0].Folded != want {
			t.Errorf("clean stop %v: a's next record: grouped %v, folded_into_previous_alert %d; want an alert saying %d", clean, got[0].Grouped, got[0].Folded, want)
		}
		if got[1].Grouped || got[1].Folded != 2 {
			t.Errorf("clean stop %v: d's next record: grouped %v, folded_into_previous_alert %d; want an alert saying 2 (dropped before the save)", clean, got[1].Grouped, got[1].Folded)
		}
	}
}

// awayGroupFolding3 is alert groups owning partition 1 (owned) at generation *gen (5), after key
// a's flagged records of partition 0, away, made an away alert and folded 3 more into it.
func awayGroupFolding3(t *testing.T, cooldown time.Duration, t0 time.Time) (g *alertGroups, owned map[int32]bool, gen *int32) {
	t.Helper()
	owned, gen = map[int32]bool{1: true}, new(int32)
	*gen = 5
	g = &alertGroups{owns: func(p int32) (bool, int32) { return owned[p], *gen }}
	var rows []testbatch.Row
	for i := range 4 {
		rows = append(rows, flaggedRow("a", 0, t0.Add(time.Duration(i)*time.Second)))
	}
	foldRows(t, g, cooldown, rows)
	return g, owned, gen
}
