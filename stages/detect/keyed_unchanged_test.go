package detect

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestStopAfterStartKeepsTheSavedState: with key_by and state_dir, a stop right after a start
// (an orchestrator's start/stop loop) wrote the keys' state it had just loaded again, unchanged:
// at 100,000 keys 1.27 GB and about 7 s of the stop (docs/BENCHMARKS.md §13.2.2), and the alarm
// state with it. Such a stop must write neither file (and say so); a stop after records, after a
// change that no record made (a live reload that moves every key's rebuild clock), or after any
// write to a key's saved state (here the test's own, a path the stage does not have) must write
// them as before, and the next start must load what the last stop left.
func TestStopAfterStartKeepsTheSavedState(t *testing.T) {
	features := []string{"value"}
	rows := fleet(40, 6000, 0.003, 3)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	start := func(logs *testsupport.LogBuffer) *Stage {
		t.Helper()
		s, err := NewStage(cfg, features, false, Deps{Log: zerolog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	files := func(s *Stage) (keys, alarms []string) {
		t.Helper()
		keys, err := s.ext.snaps.list(keysPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if alarms, err = s.ext.snaps.list(alarmsPrefix); err != nil {
			t.Fatal(err)
		}
		return keys, alarms
	}

	var logs testsupport.LogBuffer
	a := start(&logs)
	feedFleet(t, a, mem, rows, 0, 3000)
	a.Close()
	keys0, alarms0 := files(a)
	if len(keys0) == 0 || len(alarms0) == 0 {
		t.Fatalf("after the first stop: keys' files %v, alarm files %v, want some", keys0, alarms0)
	}
	// grew: after holds one file more than before, newest first (the oldest past
	// detect.snapshots removed).
	grew := func(before, after []string) bool {
		n := min(len(before)+1, cfg.Snapshots)
		return len(after) == n && slices.Equal(after[1:], before[:n-1]) && after[0] != before[0]
	}

	// A stop right after the start: nothing written.
	logs = testsupport.LogBuffer{}
	b := start(&logs)
	warm := b.KeyStats()
	b.Close()
	if keys, alarms := files(b); !slices.Equal(keys, keys0) || !slices.Equal(alarms, alarms0) {
		t.Errorf("a stop right after the start wrote keys' files %v, alarm files %v; want those it loaded, %v and %v", keys, alarms, keys0, alarms0)
	}
	if len(logs.Lines("keys' state unchanged", "not written again", keys0[0])) != 1 || len(logs.Lines("alarm state unchanged", "not written again", alarms0[0])) != 1 {
		t.Errorf("the stop does not say that the keys' and alarm state were unchanged since %s and %s:\n%s", keys0[0], alarms0[0], logs.String())
	}

	// Twice over: the next start loads the same files, the keys as at the first stop.
	logs = testsupport.LogBuffer{}
	c := start(&logs)
	if st := c.KeyStats(); st.Live != warm.Live || st.Warming != warm.Warming || st.Live == 0 {
		t.Fatalf("the second start holds %+v, want the first stop's %+v", st, warm)
	}
	// Records: both saved.
	feedFleet(t, c, mem, rows, 3000, 3500)
	c.Close()
	keys1, alarms1 := files(c)
	if !grew(keys0, keys1) || !grew(alarms0, alarms1) {
		t.Errorf("a stop after records wrote keys' files %v, alarm files %v; want a new one each before %s, %s", keys1, alarms1, keys0[0], alarms0[0])
	}

	// A change that no record made: a live reload of keys.rebuild_records carries every key's
	// records since its build to the new cadence (rephase).
	d := start(&testsupport.LogBuffer{})
	live := cfg
	live.Keys.RebuildRecords = 2 * cfg.Keys.Rebuild()
	if _, err := d.Reconfigure(live); err != nil {
		t.Fatal(err)
	}
	d.Close()
	keys2, _ := files(d)
	if !grew(keys1, keys2) {
		t.Errorf("a stop after a live reload that moved the keys' rebuild clocks wrote keys' files %v, want a new one before %s", keys2, keys1[0])
	}

	// Any write to what the keys' file holds, here one value of one key's window: saved, and
	// loaded by the next start.
	e := start(&testsupport.LogBuffer{})
	var changed *keyState
	e.keyed.lru.each(func(st *keyState) {
		if changed == nil && st.size > 0 {
			changed = st
		}
	})
	if changed == nil {
		t.Fatal("no key holds records after the restart")
	}
	last := (changed.next - 1 + changed.sig.len()) % changed.sig.len()
	changed.cols[0][last] += 1000
	e.Close()
	keys3, _ := files(e)
	if !grew(keys2, keys3) {
		t.Errorf("a stop after a key's window changed wrote keys' files %v, want a new one before %s", keys3, keys2[0])
	}
	f := start(&testsupport.LogBuffer{})
	defer f.Close()
	if st := f.keyed.keys[changed.key]; st == nil || st.cols[0][(st.next-1+st.sig.len())%st.sig.len()] != changed.cols[0][last] {
		t.Errorf("the next start did not load key %q's changed value %v", changed.key, changed.cols[0][last])
	}
}

// TestKeysDigestCoversTheSavedState: the digest that lets a save of an unchanged keys' state
// write nothing (keyed_unchanged.go) must change with everything the keys' file holds, or a
// change would be lost at the next restart, silently. Every field of the structs a key's saved
// state lives in is classified here as digested or not saved (a new field fails the test until it
// is), and a change of each digested one, of the keys' order, the stream position, the header's
// settings and the fleet's pool must change the digest; the same state digests the same.
func TestKeysDigestCoversTheSavedState(t *testing.T) {
	classified := map[reflect.Type]map[string]string{
		reflect.TypeFor[keyState](): {
			"key": "digested", "cols": "digested", "sig": "digested", "next": "digested", "size": "digested",
			"since": "digested", "model": "digested (identity)", "cap": "digested", "partition": "digested",
			"seen":   "not saved: the file's order is the keys' recency, which the digest follows",
			"recent": "not saved: a restart starts the recent-score rings afresh",
			"slot":   "not saved: the device's", "due": "not saved: a pass's", "held": "not saved: a pass's",
			"warm": "not saved: follows the model", "gone": "not saved: an evicted key is not in the file",
			"version": "not saved: the model topic's",
			"lastMs":  "not saved: a restart learns the key's reading interval afresh (cycles.go)", "gapMs": "not saved: as lastMs",
			"warming": "digested (where the key had a warming record: keyed_warmup.go)",
		},
		reflect.TypeFor[warmRing](): {"ring": "digested", "count": "digested"},
		reflect.TypeFor[alarmCap](): {
			"bits": "digested", "n": "digested", "next": "digested", "filled": "digested", "at": "digested",
			"count": "not saved: the bits set",
		},
		reflect.TypeFor[flagRing](): {"bits": "digested", "n": "digested"},
		reflect.TypeFor[fleetTail](): {
			"shards": "digested (as fleetCopy folds the pass's deviations in)",
			"lo":     "not saved: the shards' fits' medians (fitFleet at the load)", "hi": "not saved: as lo",
			"ok": "not saved: as lo", "obs": "folded into the shards by fleetCopy", "shard": "folded as obs",
			"scratch": "not saved: the fits'",
		},
		reflect.TypeFor[fleetShard](): {
			"ring": "digested (its size first)", "next": "digested", "size": "digested", "fresh": "digested",
			"lo": "digested", "hi": "digested", "ok": "not saved: follows from size",
		},
	}
	for typ, fields := range classified {
		for i := range typ.NumField() {
			if name := typ.Field(i).Name; fields[name] == "" {
				t.Errorf("%s.%s is neither digested nor said not saved (keyed_unchanged.go: does the keys' file hold it?)", typ.Name(), name)
			}
		}
	}

	rows := fleet(20, 3000, 0.003, 3)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := newFleetStage(t, keyedConfig(), []string{"value"})
	defer s.Close()
	feedFleet(t, s, mem, rows, 0, len(rows))
	s.keysQuiet()
	pool := &fleetTail{}
	for i := range pool.shards {
		pool.shards[i] = fleetShard{ring: []float32{1, 2, 3, 4}, next: 3, size: 3, fresh: 3, lo: 1, hi: 2}
	}
	digest := func(states []keyState, f *fleetTail, pos uint64) uint64 {
		return s.keysDigest(len(states), eachOf(states), f, pos)
	}
	base := digest(s.keyed.keysCopy(), pool, 7)
	if live := s.keysDigest(len(s.keyed.keys), s.keyed.lru.eachWhile, pool, 7); live != base {
		t.Fatalf("the live keys digest %x, their copy %x", live, base)
	}
	var st *keyState
	for _, k := range s.keyed.keys {
		if k.model != nil && k.size > 1 && k.cap.filled > 0 {
			st = k
			break
		}
	}
	if st == nil {
		t.Fatal("no key with a model, records and an alarm cap")
	}
	i := slices.IndexFunc(s.keyed.keysCopy(), func(c keyState) bool { return c.key == st.key })
	changes := map[string]func(c []keyState, f *fleetTail){
		"key":         func(c []keyState, _ *fleetTail) { c[i].key += "x" },
		"cols":        func(c []keyState, _ *fleetTail) { c[i].cols[0][st.size-1]++ },
		"sig":         func(c []keyState, _ *fleetTail) { c[i].sig.set(0, !c[i].sig.at(0)) },
		"next":        func(c []keyState, _ *fleetTail) { c[i].next++ },
		"size":        func(c []keyState, _ *fleetTail) { c[i].size-- },
		"since":       func(c []keyState, _ *fleetTail) { c[i].since++ },
		"warming":     func(c []keyState, _ *fleetTail) { c[i].noteWarming(0, !c[i].warmingAt(0)) },
		"model":       func(c []keyState, _ *fleetTail) { m := *c[i].model; c[i].model = &m },
		"partition":   func(c []keyState, _ *fleetTail) { c[i].partition++ },
		"cap.bits":    func(c []keyState, _ *fleetTail) { c[i].cap.bits[0] ^= 1 },
		"cap.next":    func(c []keyState, _ *fleetTail) { c[i].cap.next++ },
		"cap.filled":  func(c []keyState, _ *fleetTail) { c[i].cap.filled-- },
		"cap.at":      func(c []keyState, _ *fleetTail) { c[i].cap.at++ },
		"order":       func(c []keyState, _ *fleetTail) { c[0], c[1] = c[1], c[0] },
		"fleet.ring":  func(_ []keyState, f *fleetTail) { f.shards[5].ring[2]++ },
		"fleet.next":  func(_ []keyState, f *fleetTail) { f.shards[5].next-- },
		"fleet.size":  func(_ []keyState, f *fleetTail) { f.shards[5].size-- },
		"fleet.fresh": func(_ []keyState, f *fleetTail) { f.shards[5].fresh-- },
		"fleet.lo":    func(_ []keyState, f *fleetTail) { f.shards[5].lo++ },
		"fleet.hi":    func(_ []keyState, f *fleetTail) { f.shards[5].hi++ },
	}
	for name, change := range changes {
		c, f := s.keyed.keysCopy(), pool.fleetCopy()
		if d := digest(c, f, 7); d != base {
			t.Fatalf("%s: the same state digests %x, then %x", name, base, d)
		}
		change(c, f)
		if d := digest(c, f, 7); d == base {
			t.Errorf("a change of %s leaves the keys' digest as it was", name)
		}
	}
	if digest(s.keyed.keysCopy(), pool, 8) == base {
		t.Error("a change of the stream position leaves the keys' digest as it was")
	}
	if digest(s.keyed.keysCopy(), nil, 7) == base {
		t.Error("an empty fleet pool digests as a full one")
	}
	s.cfg.Keys.MinRecords++
	if digest(s.keyed.keysCopy(), pool, 7) == base {
		t.Error("a change of the header's keys.min_records leaves the keys' digest as it was")
	}
	s.cfg.Keys.MinRecords--
}

// TestBuilderStopAfterStartKeepsTheKeysState: a builder saves the keys' state (not the alarm
// state: it flags nothing), and loads no alarm state, which set the stream's position for the
// other roles: its position started at 0 again after a restart while its keys' file was saved at
// another. A stop right after its start must write no keys' file either, and a builder restarted
// twice with records between must load its keys back each time.
func TestBuilderStopAfterStartKeepsTheKeysState(t *testing.T) {
	features := []string{"value"}
	rows := fleet(40, 6000, 0.003, 3)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	start := func(logs *testsupport.LogBuffer) *Stage {
		t.Helper()
		s, err := NewStage(cfg, features, false, Deps{Log: zerolog.New(logs), Role: RoleBuilder})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := start(&testsupport.LogBuffer{})
	feedFleet(t, a, mem, rows, 0, 3000)
	a.Close()
	keys0, err := a.ext.snaps.list(keysPrefix)
	if err != nil || len(keys0) == 0 {
		t.Fatalf("keys' files %v (%v), want some", keys0, err)
	}
	var logs testsupport.LogBuffer
	b := start(&logs)
	b.Close()
	if keys, _ := b.ext.snaps.list(keysPrefix); !slices.Equal(keys, keys0) {
		t.Errorf("a builder's stop right after its start wrote keys' files %v, want those it loaded, %v", keys, keys0)
	}
	for i, lo := range []int{3000, 4500} {
		logs = testsupport.LogBuffer{}
		c := start(&logs)
		if len(logs.Lines("keys' state loaded")) != 1 || strings.Contains(logs.String(), "skipped") {
			t.Fatalf("restart %d: the builder did not load its keys' state:\n%s", i+2, logs.String())
		}
		feedFleet(t, c, mem, rows, lo, lo+1500)
		c.Close()
	}
}
