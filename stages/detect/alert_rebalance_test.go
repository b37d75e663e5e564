package detect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestAlertGroupsLeaveWithPartition: a key's alert group (alert_cooldown) goes with its
// partition at a rebalance (DropAlertsOutside, then DropKeysOutside: the pipeline's order), on every path that folds alerts: a scorer's key
// scored by its own model, a key under key_by: none (the global model's path, its group per
// _key all the same), and role all. Key a's fault is alerted on partition 0, the partition
// moves away (another instance owns a, and may alert, meanwhile) and comes back within the
// cooldown: a's next flagged record here is a new alert, not folded into (and naming) the one
// of before. b, on partition 1 which stays, keeps its group. Before, the groups stayed: a's
// record was folded into the old alert (not emitted under emit: outliers).
func TestAlertGroupsLeaveWithPartition(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.AlertCooldown = 10 * time.Minute
	r := rand.New(rand.NewPCG(12, 12))
	var train []fleetRow
	for i := range 1200 {
		train = append(train, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	for range cfg.Keys.MinRecords {
		train = append(train, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	_, leader, done := handoverRun(t, cfg, Deps{}, train, 1000)
	gm := leader.Model()
	km, _ := leader.KeyModelOf("a")
	done()
	if km == nil || gm == nil {
		t.Fatal("setup: no global model or no model of a")
	}
	// A restart after the rebalance: the alarm state saved then holds no group of a. Before
	// it: the state holds a's group, saved with its partition, and the first assignment after
	// the restart (without partition 0) drops it.
	const (
		restartAfter = 1 + iota
		restartBefore
	)
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		keyBy   KeyBy
		role    Role
		restart int
	}{
		{"scorer, key_by key", KeyByKey, RoleScorer, 0},
		{"scorer, key_by none", KeyByNone, RoleScorer, 0},
		{"role all, key_by none", KeyByNone, RoleAll, 0},
		{"scorer, key_by key, restarted after", KeyByKey, RoleScorer, restartAfter},
		{"role all, key_by none, restarted after", KeyByNone, RoleAll, restartAfter},
		{"scorer, key_by key, restarted before", KeyByKey, RoleScorer, restartBefore},
		{"role all, key_by none, restarted before", KeyByNone, RoleAll, restartBefore},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			cc := cfg
			cc.KeyBy, cc.StateDir = c.keyBy, t.TempDir()
			open := func() *Stage {
				s, err := NewStage(cc, []string{"value"}, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Role: c.role})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := s.InstallModel(gm, nil); err != nil {
					t.Fatal(err)
				}
				if c.keyBy == KeyByKey {
					s.InstallKeyModels([]KeyModel{{Key: "a", Version: 1, Partition: 0, Model: km}})
				}
				return s
			}
			off := int64(0)
			feed := func(s *Stage, at time.Duration, rows ...testbatch.Row) []batch.Score {
				for i := range rows {
					rows[i].Offset, rows[i].Time = off, t0.Add(at)
					off++
				}
				bs, err := s.Process(context.Background(), testbatch.New(t, mem, "fleet", []string{"value"}, false, false, rows))
				if err != nil || len(bs) != 1 {
					t.Fatalf("%d batches out, %v", len(bs), err)
				}
				out := append([]batch.Score(nil), bs[0].Scores...)
				bs[0].Release()
				return out
			}
			far := func(key string, part int32) testbatch.Row {
				return testbatch.Row{Partition: part, Key: []byte(key), Features: []float32{200}}
			}
			s := open()
			first := feed(s, 0, far("a", 0), far("b", 1))
			if !first[0].Outlier || first[0].Grouped || !first[1].Outlier || first[1].Grouped {
				t.Fatalf("setup: a's and b's far records flagged %v %v, grouped %v %v: want two alerts",
					first[0].Outlier, first[1].Outlier, first[0].Grouped, first[1].Grouped)
			}
			if c.restart == restartBefore {
				s.Close()
				s = open()
			}
			gen := int32(0)
			rebalance := func(keep func(int32) bool) { // (pipeline.rebalanced's order)
				gen++
				s.DropAlertsOutside(gen, keep)
				s.DropKeysOutside(keep)
			}
			rebalance(func(p int32) bool { return p != 0 }) // partition 0 moves away
			if c.keyBy == KeyByKey {                        // and comes back, a's model with it
				s.InstallKeyModels([]KeyModel{{Key: "a", Version: 1, Partition: 0, Model: km}})
			}
			rebalance(func(int32) bool { return true })
			check := func(when string, got []batch.Score) {
				t.Helper()
				if a := got[0]; !a.Outlier || a.Grouped || a.AlertAt != 0 {
					t.Errorf("%s: a's next far record flagged %v, grouped %v (into the alert at %v): want a new alert (%s)",
						when, a.Outlier, a.Grouped, time.UnixMilli(a.AlertAt).UTC(), Reason(&a))
				}
				if b := got[1]; !b.Outlier || !b.Grouped || b.AlertAt != t0.UnixMilli() {
					t.Errorf("%s: b's next far record flagged %v, grouped %v (alert at %v): want folded into b's alert (its partition stayed)",
						when, b.Outlier, b.Grouped, time.UnixMilli(b.AlertAt).UTC())
				}
			}
			if c.restart == restartAfter {
				s.Close()
				s = open()
			}
			check("partition 0 moved away and back", feed(s, time.Minute, far("a", 0), far("b", 1)))
			s.Close()
		})
	}
}

// TestAlertGroupNotOpenedOutsidePartitions: a flagged record of a partition the instance no
// longer owns (fetched before the rebalance, scored after it: OwnPartitions says so) is an
// alert but opens no real group, which would outlive the rebalance's drop: when the partition
// comes back, the key's next flagged record is a new alert. A record of a partition owned folds
// as ever. Since issue 20 item 4 the away record opens an away group (TestAwayAlertGroup), which
// folds the key's later away records only: the record after the return does not read it.
func TestAlertGroupNotOpenedOutsidePartitions(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	owned := map[int32]bool{1: true}
	g := alertGroups{owns: func(p int32) (bool, int32) { return owned[p], 3 }}
	fold := func(at time.Duration) []batch.Score {
		b := testbatch.New(t, mem, "t", []string{"x"}, false, true, []testbatch.Row{
			{Partition: 0, Key: []byte("a"), Time: t0.Add(at), Features: []float32{0}, Score: batch.Score{Scored: true, Outlier: true}},
			{Partition: 1, Offset: 1, Key: []byte("b"), Time: t0.Add(at), Features: []float32{0}, Score: batch.Score{Scored: true, Outlier: true}},
		})
		defer b.Release()
		g.fold(b, 10*time.Minute)
		return append([]batch.Score(nil), b.Scores...)
	}
	if got := fold(0); got[0].Grouped || got[1].Grouped {
		t.Fatalf("first records grouped %v %v, want two alerts", got[0].Grouped, got[1].Grouped)
	}
	if _, ok := g.open["a"]; ok {
		t.Error("a's record of partition 0, not owned, opened a group")
	}
	if g.away["a"] == nil {
		t.Error("a's record of partition 0, not owned, opened no away group")
	}
	owned[0] = true // 0 comes back (the detect goroutine's turn at it not taken yet)
	got := fold(time.Minute)
	if got[0].Grouped || got[0].AlertAt != 0 {
		t.Errorf("a's next record after partition 0 came back: grouped %v (alert at %d), want a new alert", got[0].Grouped, got[0].AlertAt)
	}
	if !got[1].Grouped || got[1].AlertAt != t0.UnixMilli() {
		t.Errorf("b's next record (partition 1 owned throughout): grouped %v (alert at %d), want folded into b's alert", got[1].Grouped, got[1].AlertAt)
	}
}

// TestAwayAlertGroup (issue 20 item 4): the flagged records of a key on a partition the
// instance no longer owns (fetched before the rebalance, scored after it) are one alert, the
// first, and the rest fold into it (an away group): before, each was an alert of its own (20
// for 20 in pipeline's TestAlertGroupOfOldGenerationRecordRealBroker, "away"). Their pages are
// the new owner's, which reads them again from the committed offset (this member commits none
// of them): folding them loses none. The away group opens no real group (none in the alarm
// state), and a key of a partition owned folds as ever. It lives one generation: it survives
// the detect goroutine's turn at the assignment it was opened under (the records scored
// between the assignment and that turn: a batch being scored, or in flight on the device), and
// goes at the turn at a later one, the partition still away or back; back, the partition's
// records open real groups as before.
func TestAwayAlertGroup(t *testing.T) {
	const n = 20
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	owned, gen := map[int32]bool{1: true}, int32(5) // (generation 5's assignment, heard: 0 moved away)
	g := alertGroups{owns: func(p int32) (bool, int32) { return owned[p], gen }}
	var rows []testbatch.Row
	for i := range n {
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		rows = append(rows, flaggedRow("a", 0, at), flaggedRow("b", 1, at))
	}
	sc := foldRows(t, &g, cooldown, rows)
	alerts := 0
	for i := 0; i < len(sc); i += 2 {
		a, b := sc[i], sc[i+1]
		if !a.Grouped {
			alerts++
		} else if a.AlertAt != t0.UnixMilli() || !a.AlertTimed {
			t.Errorf("a's record %d folded into the alert at %d, want a's first (%d)", i/2, a.AlertAt, t0.UnixMilli())
		}
		if b.Grouped != (i > 0) || i > 0 && b.AlertAt != t0.UnixMilli() {
			t.Errorf("b's record %d (partition 1, owned): grouped %v (alert at %d), want the first an alert and the rest folded into it", i/2, b.Grouped, b.AlertAt)
		}
	}
	if alerts != 1 || sc[0].Grouped {
		t.Errorf("a's %d flagged records of partition 0 (moved away): %d alerts (the first grouped %v), want 1, the first", n, alerts, sc[0].Grouped)
	}
	if _, ok := g.open["a"]; ok {
		t.Error("a's records of partition 0, not owned, opened a real group (saved in the alarm state)")
	}
	away := func(at time.Duration) batch.Score {
		return foldRows(t, &g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(at))})[0]
	}
	// The detect goroutine's turn at generation 5 (DropAlertsOutside): a's away group was
	// opened under it and stays; a's records still queued fold into it.
	g.dropOutside(5, func(p int32) bool { return owned[p] }, nil, cooldown)
	if a := away(2 * time.Minute); !a.Grouped || a.AlertAt != t0.UnixMilli() {
		t.Errorf("a's away record after the turn at the assignment that moved it: grouped %v (alert at %d), want folded into a's away alert (%d)", a.Grouped, a.AlertAt, t0.UnixMilli())
	}
	// Generation 6, 0 still away: the group goes at the turn; a's next away record is an alert,
	// saying the n folded into the away alert (19, then 1 after the turn).
	gen = 6
	g.dropOutside(6, func(p int32) bool { return owned[p] }, nil, cooldown)
	if len(g.away) != 0 {
		t.Errorf("away groups %v after the turn at a later generation, want none", g.away)
	}
	if a := away(3 * time.Minute); a.Grouped || a.Folded != n {
		t.Errorf("a's away record after the turn at generation 6: grouped %v (alert at %d), folded %d, want an alert saying %d (its away group dropped, its count left to the key's next alert: TestAwayAlertGroupDroppedKeepsCount)", a.Grouped, a.AlertAt, a.Folded, n)
	}
	// Generation 7 gives 0 back: a's away group of generation 6 goes at the turn, and a's
	// records, owned again, open a real group and fold into it.
	owned[0], gen = true, 7
	g.dropOutside(7, func(p int32) bool { return p != 0 }, nil, cooldown) // (0 left since the last turn)
	if len(g.away) != 0 {
		t.Errorf("away groups %v after partition 0 came back, want none", g.away)
	}
	back := foldRows(t, &g, cooldown, []testbatch.Row{flaggedRow("a", 0, t0.Add(4*time.Minute)), flaggedRow("a", 0, t0.Add(5*time.Minute))})
	if back[0].Grouped || !back[1].Grouped || back[1].AlertAt != t0.Add(4*time.Minute).UnixMilli() {
		t.Errorf("a's records after partition 0 came back: grouped %v %v (the second into the alert at %d), want an alert and a record folded into it",
			back[0].Grouped, back[1].Grouped, back[1].AlertAt)
	}
	if g.open["a"] == nil {
		t.Error("a's record after partition 0 came back opened no real group")
	}
}

// TestAwayAlertGroupsBounded: the away groups hold at most maxAwayKeys keys; past it the ended
// ones go first, and a key's flagged away record that finds no room is an alert of its own, as
// before away groups. The real groups are neither counted nor evicted by them.
func TestAwayAlertGroupsBounded(t *testing.T) {
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	g := alertGroups{owns: func(p int32) (bool, int32) { return p == 1, 5 }}
	rows := []testbatch.Row{flaggedRow("owned", 1, t0)}
	for i := range maxAwayKeys + 1 {
		rows = append(rows, flaggedRow(fleetKey(i), 0, t0))
	}
	rows = append(rows, flaggedRow(fleetKey(0), 0, t0.Add(time.Second)))
	sc := foldRows(t, &g, cooldown, rows)
	if len(g.away) != maxAwayKeys || g.away[fleetKey(maxAwayKeys)] != nil {
		t.Errorf("%d away groups (the last key's %v), want %d, the last key's none (no room)", len(g.away), g.away[fleetKey(maxAwayKeys)] != nil, maxAwayKeys)
	}
	if last := sc[len(sc)-1]; !last.Grouped {
		t.Error("key 0's second away record not folded into its away alert")
	}
	if len(g.open) != 1 || g.open["owned"] == nil {
		t.Errorf("real groups %d, want only the owned key's", len(g.open))
	}
	// Past the cooldown by partition 0's clock the ended groups make room.
	sc = foldRows(t, &g, cooldown, []testbatch.Row{flaggedRow(fleetKey(maxAwayKeys), 0, t0.Add(cooldown)), flaggedRow(fleetKey(maxAwayKeys), 0, t0.Add(cooldown+time.Second))})
	if sc[0].Grouped || !sc[1].Grouped || len(g.away) != 1 {
		t.Errorf("after the cooldown: grouped %v %v, %d away groups; want an alert opening a group (the ended ones dropped) and a record folded into it", sc[0].Grouped, sc[1].Grouped, len(g.away))
	}
}
