package detect

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// flaggedRow is a flagged record of key k on partition p at t, for the alert groups' tests.
func flaggedRow(k string, p int32, t time.Time) testbatch.Row {
	return testbatch.Row{Partition: p, Key: []byte(k), Time: t, Features: []float32{0}, Score: batch.Score{Scored: true, Outlier: true}}
}

// fleetKey is the i-th key of a large fleet.
func fleetKey(i int) string { return fmt.Sprintf("k%05d", i) }

// foldRows folds rows into g as one batch and returns each row's score.
func foldRows(t *testing.T, g *alertGroups, cooldown time.Duration, rows []testbatch.Row) []batch.Score {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := testbatch.New(t, mem, "t", []string{"x"}, false, true, rows)
	defer b.Release()
	g.fold(b, cooldown)
	return append([]batch.Score(nil), b.Scores...)
}

// TestAlertGroupsPastLimitKeepOpen (issue 20 item 4): a fleet of 70,000 keys that alerted one
// after another (100 ms apart, the cooldown 10m: past maxAlertKeys most of their groups have
// ended by the records' time), then one key ("live") that alerts and flags again a minute
// later, and a key of a partition whose records lag hours behind ("lag": its own partition's
// time is within its cooldown): both later records fold into their key's alert, and the groups
// stay within the limit. Before, past maxAlertKeys keys every group was forgotten at once (the
// next batch's flagged record of each key a new alert: a storm), and until then the map held
// every group, ended or not.
func TestAlertGroupsPastLimitKeepOpen(t *testing.T) {
	const fleet = 70000
	cooldown := 10 * time.Minute
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var rows []testbatch.Row
	for i := range fleet {
		rows = append(rows, flaggedRow(fleetKey(i), 0, t0.Add(-3*time.Hour+time.Duration(i)*100*time.Millisecond)))
	}
	// A prune reads the clocks as of the record that opens a group, not the batch's end: key
	// 65,000's record a minute after its alert, after the first prune (at key 65,536), folds.
	late := 65600
	rows = slices.Insert(rows, late, flaggedRow(fleetKey(65000), 0, t0.Add(-3*time.Hour+6560*time.Second)))
	rows = append(rows, flaggedRow("live", 0, t0), flaggedRow("lag", 1, t0.Add(-5*time.Hour)))
	var g alertGroups
	if sc := foldRows(t, &g, cooldown, rows); !sc[late].Grouped {
		t.Error("a key's record a minute after its alert, in the batch after a prune, is not grouped")
	}
	if g.evicted != 0 {
		t.Errorf("%d groups evicted within their cooldown, want none: the ended ones make room", g.evicted)
	}
	if len(g.open) > maxAlertKeys {
		t.Errorf("%d open groups after the fleet's alerts, want at most %d", len(g.open), maxAlertKeys)
	}
	for _, k := range []string{"live", "lag"} {
		if g.open[k] == nil {
			t.Errorf("%s's group (within its cooldown by its partition's time) is not open", k)
		}
	}
	sc := foldRows(t, &g, cooldown, []testbatch.Row{
		flaggedRow("live", 0, t0.Add(time.Minute)),
		flaggedRow("lag", 1, t0.Add(-5*time.Hour+time.Minute)),
		flaggedRow(fleetKey(0), 0, t0.Add(2*time.Minute)), // its cooldown long over: an alert
	})
	for i, want := range []bool{true, true, false} {
		if sc[i].Grouped != want {
			t.Errorf("record %d of the next batch: grouped %v, want %v", i, sc[i].Grouped, want)
		}
	}
	if sc[0].AlertAt != t0.UnixMilli() {
		t.Errorf("live's record folded into the alert of %v, want %v", time.UnixMilli(sc[0].AlertAt).UTC(), t0)
	}
	if len(g.open) > maxAlertKeys {
		t.Errorf("%d open groups after the next batch, want at most %d", len(g.open), maxAlertKeys)
	}
}

// TestAlertGroupsPastLimitEvictOldest: more keys than maxAlertKeys alert within the cooldown
// (70,000 keys 1 ms apart on four partitions, cooldown 1h): the groups stay within the limit,
// those dropped are the oldest alerts (each at most one extra alert: the key's next flagged
// record within its cooldown is an alert of its own), fewer than alertKeysSlack beyond the
// excess (a prune makes that much room), and every newer
// group still folds. Before, the map held all 70,000, and the next batch forgot them all.
func TestAlertGroupsPastLimitEvictOldest(t *testing.T) {
	const fleet = 70000
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var rows []testbatch.Row
	for i := range fleet {
		rows = append(rows, flaggedRow(fleetKey(i), int32(i%4), t0.Add(time.Duration(i)*time.Millisecond)))
	}
	var g alertGroups
	foldRows(t, &g, time.Hour, rows)
	if len(g.open) > maxAlertKeys {
		t.Fatalf("%d open groups, want at most %d", len(g.open), maxAlertKeys)
	}
	dropped := 0
	for i := range fleet {
		if g.open[fleetKey(i)] != nil {
			continue
		}
		if dropped != i {
			t.Fatalf("key %d dropped, %d older ones kept: want the oldest dropped first", i, i-dropped)
		}
		dropped++
	}
	if dropped < fleet-maxAlertKeys || dropped >= fleet-maxAlertKeys+alertKeysSlack {
		t.Errorf("%d groups dropped of %d, want at least %d and fewer than %d more", dropped, fleet, fleet-maxAlertKeys, alertKeysSlack)
	}
	if g.evicted != uint64(dropped) {
		t.Errorf("%d evictions counted, %d groups dropped within their cooldown", g.evicted, dropped)
	}
	sc := foldRows(t, &g, time.Hour, []testbatch.Row{
		flaggedRow(fleetKey(0), 0, t0.Add(2*time.Minute)),                      // dropped: one extra alert
		flaggedRow(fleetKey(dropped), int32(dropped%4), t0.Add(2*time.Minute)), // the oldest kept
		flaggedRow(fleetKey(fleet-1), int32((fleet-1)%4), t0.Add(2*time.Minute)),
	})
	for i, want := range []bool{false, true, true} {
		if sc[i].Grouped != want {
			t.Errorf("record %d of the next batch: grouped %v, want %v", i, sc[i].Grouped, want)
		}
	}
	if len(g.open) > maxAlertKeys {
		t.Errorf("%d open groups after the next batch, want at most %d", len(g.open), maxAlertKeys)
	}
}

// TestAlarmStateRestorePastLimit: an alarm state holding more groups than maxAlertKeys (70,000
// on one partition, 100 ms apart; alert_cooldown 10m) restores within the limit: the groups
// within the cooldown of the partition's newest alert are kept, and so is an ended group with
// records folded into it (its count goes on the key's next alert) while there is room; the
// other ended groups go.
func TestAlarmStateRestorePastLimit(t *testing.T) {
	const fleet = 70000
	cfg := keyedConfig()
	cfg.KeyBy, cfg.AlertCooldown, cfg.StateDir = KeyByNone, 10*time.Minute, t.TempDir()
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC).UnixMilli()
	s := newFleetStage(t, cfg, []string{"value"})
	s.series.pos = 20
	s.groups.open = make(map[string]*alertGroup, fleet)
	for i := range fleet {
		s.groups.open[fleetKey(i)] = &alertGroup{at: t0 + int64(i)*100, timed: true}
	}
	s.groups.open[fleetKey(3)].folded = 7
	s.Close()
	r := newFleetStage(t, cfg, []string{"value"})
	defer r.Close()
	if len(r.groups.open) > maxAlertKeys {
		t.Errorf("%d groups restored, want at most %d", len(r.groups.open), maxAlertKeys)
	}
	newest := t0 + (fleet-1)*100
	for i := range fleet {
		at := t0 + int64(i)*100
		if open := r.groups.open[fleetKey(i)] != nil; open != (newest-at < cfg.AlertCooldown.Milliseconds() || i == 3) {
			t.Fatalf("key %d (%d ms before the newest alert) restored %v", i, newest-at, open)
		}
	}
}

// TestAlertGroupsPruneByCooldownInForce: the groups ended are those the cooldown in force
// ends (a reload changes it between batches): maxAlertKeys keys 1 ms apart open under 1h,
// then a new key's alert under 10s prunes those more than 10 s old, as ended (none evicted),
// and a key alerted within the 10 s still folds.
func TestAlertGroupsPruneByCooldownInForce(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	var rows []testbatch.Row
	for i := range maxAlertKeys {
		rows = append(rows, flaggedRow(fleetKey(i), 0, at(i)))
	}
	var g alertGroups
	foldRows(t, &g, time.Hour, rows)
	if len(g.open) != maxAlertKeys || g.evicted != 0 {
		t.Fatalf("setup: %d groups open, %d evicted; want %d, none", len(g.open), g.evicted, maxAlertKeys)
	}
	sc := foldRows(t, &g, 10*time.Second, []testbatch.Row{
		flaggedRow("new", 0, at(maxAlertKeys)),
		flaggedRow(fleetKey(maxAlertKeys-5000), 0, at(maxAlertKeys+1)), // 5 s after its alert
	})
	if sc[0].Grouped || !sc[1].Grouped {
		t.Errorf("grouped %v %v, want the new key's alert and the 5 s old key's record folded", sc[0].Grouped, sc[1].Grouped)
	}
	// (Within 10 s of the new alert's time: keys 55,537 to 65,535.)
	if want := 9999 + 1; len(g.open) != want || g.evicted != 0 {
		t.Errorf("%d groups open, %d evicted; want %d (those within 10 s, and the new one), none evicted", len(g.open), g.evicted, want)
	}
}

// TestSelectFirst: prune's quickselect puts the first n groups by agedGroup.before (ended
// first, then the older alert, then the key) in c[:n], for every n, on groups with many equal
// times, in random and in sorted order.
func TestSelectFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 4))
	for size := range 90 {
		c := make([]agedGroup, size)
		for i := range c {
			c[i] = agedGroup{at: int64(r.IntN(8)), key: fleetKey(r.IntN(1000)) + fmt.Sprint(i), ended: r.IntN(3) == 0}
		}
		want := slices.Clone(c)
		slices.SortFunc(want, func(a, b agedGroup) int {
			if a.before(&b) {
				return -1
			}
			return 1
		})
		for n := 0; n <= size; n++ {
			for _, order := range [][]agedGroup{c, want} {
				got := slices.Clone(order)
				selectFirst(got, n)
				first := got[:n]
				slices.SortFunc(first, func(a, b agedGroup) int {
					if a.before(&b) {
						return -1
					}
					return 1
				})
				if !slices.Equal(first, want[:n]) {
					t.Fatalf("size %d, n %d: first %v, want %v", size, n, first, want[:n])
				}
			}
		}
	}
}
