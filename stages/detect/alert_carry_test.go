package detect

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestAlertGroupEvictedKeepsCount (issue 20 item 4): more keys than maxAlertKeys alert within
// the cooldown (70,000 keys 1 ms apart on four partitions, cooldown 1h), each with one record
// folded into its alert; the oldest groups are evicted (alert_prune.go step 3). The count folded
// into an evicted group goes to the key's next alert (folded_into_previous_alert 1), held in a
// table of its own bound (maxCarriedKeys); past that bound the oldest counts go to the lost
// total (AlertFoldedLost), so that every folded record is either told by a later alert or
// counted there: the next alerts' counts and the lost total sum to the records folded into
// evicted groups, exactly. A key whose group stayed folds as before, and the counts go through
// a save and restore of the alarm state (as dropped groups). Before, an evicted group's count
// was forgotten: every evicted key's next alert said 0.
func TestAlertGroupEvictedKeepsCount(t *testing.T) {
	const fleet = 70000
	cooldown := time.Hour
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	var rows []testbatch.Row
	for i := range fleet { // an alert and a record folded into it, per key
		at := t0.Add(time.Duration(i) * time.Millisecond)
		rows = append(rows, flaggedRow(fleetKey(i), int32(i%4), at), flaggedRow(fleetKey(i), int32(i%4), at))
	}
	for _, restore := range []bool{false, true} {
		s := &Stage{deps: Deps{Log: zerolog.Nop()}, alarms: newAlarmCap(100)}
		s.cfg.AlertCooldown = cooldown
		g := &s.groups
		for i, sc := range foldRows(t, g, cooldown, rows) {
			if sc.Grouped != (i%2 == 1) {
				t.Fatalf("setup: record %d grouped %v", i, sc.Grouped)
			}
		}
		evicted := fleet - len(g.open)
		if evicted == 0 || g.evicted != uint64(evicted) {
			t.Fatalf("setup: %d groups evicted, %d counted; want some, all counted", evicted, g.evicted)
		}
		if len(g.carried) > maxCarriedKeys {
			t.Errorf("restore %v: %d evicted groups' counts held, want at most %d", restore, len(g.carried), maxCarriedKeys)
		}
		var lost uint64
		if restore {
			a := s.alarmsCopy()
			b, err := decodeAlarms(AlarmsSnapshotFormat, a.encode(0), 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			s = &Stage{deps: Deps{Log: zerolog.Nop()}}
			s.cfg.AlertCooldown = cooldown
			lost = g.lost // (the old groups' count; the restored start again at 0)
			s.restoreGroups(b)
			g = &s.groups
		}
		// The next batch: the newest key (its group kept: it folds), then the evicted keys,
		// newest first. Their new groups evict more (the fleet is past the bound), whose counts
		// are carried or lost in turn: every record folded in the setup is, after it, told by an
		// alert, counted lost, or still held by a group or a carried count.
		next := []testbatch.Row{flaggedRow(fleetKey(fleet-1), int32((fleet-1)%4), t0.Add(2*time.Minute))}
		for i := evicted - 1; i >= 0; i-- {
			next = append(next, flaggedRow(fleetKey(i), int32(i%4), t0.Add(2*time.Minute)))
		}
		got := foldRows(t, g, cooldown, next)
		if !got[0].Grouped {
			t.Errorf("restore %v: the newest key's record (its group kept) not folded into its alert", restore)
		}
		told := 0
		for i, sc := range got[1:] {
			if sc.Grouped || sc.Folded > 1 {
				t.Fatalf("restore %v: evicted key %d's next record: grouped %v, folded_into_previous_alert %d; want an alert saying at most 1", restore, evicted-1-i, sc.Grouped, sc.Folded)
			}
			told += sc.Folded
		}
		if got[1].Folded != 1 {
			t.Errorf("restore %v: the newest evicted key's next alert says folded_into_previous_alert %d, want 1 (its count carried)", restore, got[1].Folded)
		}
		held := 0
		for _, o := range g.open {
			held += o.folded
		}
		for _, c := range g.carried {
			held += c.folded
		}
		lost += g.lost
		if told+held+int(lost)-1 != fleet { // (less the newest key's record folded in the next batch)
			t.Errorf("restore %v: of the %d records folded in the setup, %d told by the evicted keys' next alerts, %d counted lost, %d held: want every one in one place", restore, fleet, told, lost, held)
		}
		if len(g.carried) > maxCarriedKeys {
			t.Errorf("restore %v: %d carried counts after the next batch, want at most %d", restore, len(g.carried), maxCarriedKeys)
		}
	}
}

// TestAwayAlertGroupCountToRealAlert: an away group's count (alert_away.go) goes to the key's
// next alert here whatever kind it is: its partition back before the detect goroutine's turn
// at the assignment that gave it back, the key's next record is a real alert, which says the 3
// folded into the away alert; the away group's drop at that turn then carries nothing more (the
// alert after the real one's cooldown says the real one's own count, not 3 again). Before, the
// real alert said 0 and the drop forgot the count (the key had a real group of a later alert).
func TestAwayAlertGroupCountToRealAlert(t *testing.T) {
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	g, owned, gen := awayGroupFolding3(t, cooldown, t0)
	owned[0], *gen = true, 6 // back, the turn at generation 6 not yet taken
	got := foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(time.Minute)), flaggedRow("a", 0, t0.Add(2*time.Minute))})
	if a := got[0]; a.Grouped || a.Folded != 3 {
		t.Errorf("a's first record owned again: grouped %v, folded_into_previous_alert %d; want a real alert saying 3 (folded into a's away alert)", a.Grouped, a.Folded)
	}
	if !got[1].Grouped {
		t.Error("a's second record owned again not folded into its real alert")
	}
	g.dropOutside(6, func(p int32) bool { return owned[p] }, nil, cooldown)
	if a := foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(time.Minute+cooldown))})[0]; a.Grouped || a.Folded != 1 {
		t.Errorf("a's alert after the real alert's cooldown: grouped %v, folded_into_previous_alert %d; want an alert saying 1 (its own; the away count told once)", a.Grouped, a.Folded)
	}
}

// TestAlertGroupReadAgainCountsEachOutput (the twenty-eighth session's doubt: a dropped group's
// records read again by the same member counted twice): a key's alert and 3 records folded into
// it, its partition moved away before they were committed and given back before the other member
// committed them, so this member reads the 3 again. Their first outputs were written, naming
// the first alert: the dropped group's count tells them on the key's next alert (3). The copies
// read again are outputs of their own: the first an alert, telling those 3, the other 2 folded
// into it, told by the alert after (2). Every output folded into an alert is told once, by the
// next alert of its key: the sum of folded_into_previous_alert is the outputs folded (5); a
// record read twice is two outputs, as outlierd_records_flagged_total and replay count it. A
// count without the first copies would disagree with what the output topic holds (passes on
// main: the argument in OPERATIONS, "Continuing alerts", for leaving it).
func TestAlertGroupReadAgainCountsEachOutput(t *testing.T) {
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	g := &alertGroups{}
	var rows []testbatch.Row
	for i := range 4 {
		rows = append(rows, flaggedRow("a", 0, t0.Add(time.Duration(i)*time.Second)))
	}
	outputs := foldRows(t, g, cooldown, rows)
	g.dropOutside(1, func(p int32) bool { return p != 0 }, nil, cooldown) // moved away
	g.dropOutside(2, func(int32) bool { return true }, nil, cooldown)     // and back
	outputs = append(outputs, foldRows(t, g, cooldown, rows[1:])...)      // the 3 read again
	outputs = append(outputs, foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(cooldown+time.Minute))})...)
	grouped, told := 0, 0
	var tells []int
	for _, sc := range outputs {
		if sc.Grouped {
			grouped++
		} else {
			told += sc.Folded
			tells = append(tells, sc.Folded)
		}
	}
	if grouped != 5 || told != grouped || len(tells) != 3 || tells[1] != 3 || tells[2] != 2 {
		t.Errorf("%d outputs folded, %d told by the alerts (%v); want 5 and 5, the alerts saying 0, 3, 2", grouped, told, tells)
	}
}

// TestAwayAlertGroupPrunedKeepsCount: an away group with records folded into it, pruned at the
// away groups' bound once its cooldown ended (pruneAway), leaves its count to the key's next
// alert as a pruned real group does (before, it was forgotten: the next alert said 0).
func TestAwayAlertGroupPrunedKeepsCount(t *testing.T) {
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	g := &alertGroups{owns: func(p int32) (bool, int32) { return p == 1, 5 }}
	rows := []testbatch.Row{flaggedRow("a", 0, t0), flaggedRow("a", 0, t0.Add(time.Second)), flaggedRow("a", 0, t0.Add(2*time.Second))}
	for i := range maxAwayKeys - 1 {
		rows = append(rows, flaggedRow(fleetKey(i), 0, t0))
	}
	foldRows(t, g, cooldown, rows)
	if len(g.away) != maxAwayKeys || g.away["a"].folded != 2 {
		t.Fatalf("setup: %d away groups, want %d with a's folding 2", len(g.away), maxAwayKeys)
	}
	foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("new", 0, t0.Add(cooldown+time.Minute))}) // (the ended ones pruned)
	if _, ok := g.away["a"]; ok {
		t.Fatal("a's away group, ended, not pruned at the bound")
	}
	if a := foldRows(t, g, cooldown, []testbatch.Row{flaggedRow("a", 1, t0.Add(cooldown+2*time.Minute))})[0]; a.Grouped || a.Folded != 2 {
		t.Errorf("a's next alert: grouped %v, folded_into_previous_alert %d; want an alert saying 2 (folded into its pruned away group)", a.Grouped, a.Folded)
	}
}
