package detect

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// restartFeed feeds rows[lo:hi] through s, cut into batches at cuts (the rows before each cut
// end a batch; record i at offset i, time t0 + i s), flushes, and returns their scores in order.
func restartFeed(t *testing.T, s *Stage, mem memory.Allocator, rows []fleetRow, lo, hi int, cuts []int) []batch.Score {
	t.Helper()
	var out []batch.Score
	take := func(bs []*batch.Batch) {
		for _, b := range bs {
			out = append(out, b.Scores...)
			b.Release()
		}
	}
	for _, end := range append(append([]int(nil), cuts...), hi) {
		end = min(end, hi)
		if end <= lo {
			continue
		}
		bs, err := s.Process(context.Background(), restartBatch(t, mem, rows, lo, end))
		if err != nil {
			t.Fatal(err)
		}
		take(bs)
		lo = end
	}
	bs, err := s.Flush()
	if err != nil {
		t.Fatal(err)
	}
	take(bs)
	return out
}

// restartRun runs rows through a stage of cfg (state_dir: a new directory) cut at cuts, and
// with stop > 0 stops it after rows[:stop] (Close: the state saved) and runs the rest through a
// new stage started from that directory. It returns every record's scores in order.
func restartRun(t *testing.T, cfg Config, deps func() Deps, rows []fleetRow, cuts []int, stop int) []batch.Score {
	t.Helper()
	cfg.StateDir = t.TempDir()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	open := func() *Stage {
		var d Deps
		if deps != nil {
			d = deps()
		}
		d.Log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
		s, err := NewStage(cfg, []string{"value"}, false, d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if stop <= 0 {
		defer s.Close()
		return restartFeed(t, s, mem, rows, 0, len(rows), cuts)
	}
	var before, after []int
	for _, c := range cuts {
		if c < stop {
			before = append(before, c)
		} else if c > stop {
			after = append(after, c)
		}
	}
	out := restartFeed(t, s, mem, rows, 0, stop, before)
	s.Close()
	s = open()
	defer s.Close()
	return append(out, restartFeed(t, s, mem, rows, stop, len(rows), after)...)
}

// sameVerdict says how a and b differ in what an operator sees of a record ("": nothing).
func sameVerdict(a, b *batch.Score) string {
	if a.Score != b.Score || a.ByKey != b.ByKey || a.Warming != b.Warming {
		return fmt.Sprintf("score %g by key %v warming %v, want %g %v %v", a.Score, a.ByKey, a.Warming, b.Score, b.ByKey, b.Warming)
	}
	if a.Outlier != b.Outlier || a.Suppressed != b.Suppressed || a.Held != b.Held || a.Grouped != b.Grouped || a.Folded != b.Folded ||
		a.AlertAt != b.AlertAt {
		return fmt.Sprintf("flagged %v suppressed %v held %v grouped %v (alert at %d) folded %d, want %v %v %v %v (%d) %d", a.Outlier,
			a.Suppressed, a.Held, a.Grouped, a.AlertAt, a.Folded, b.Outlier, b.Suppressed, b.Held, b.Grouped, b.AlertAt, b.Folded)
	}
	return ""
}

// sameAfterRestart reports the records of rows from on whose verdicts in got (a run restarted
// at from) differ from ref's (the uninterrupted run's): the first ten, and how many in all.
func sameAfterRestart(t *testing.T, got, ref []batch.Score, rows []fleetRow, from int) {
	t.Helper()
	if len(got) != len(rows) || len(ref) != len(rows) {
		t.Fatalf("%d records' scores after the restart, %d uninterrupted, want %d", len(got), len(ref), len(rows))
	}
	bad := 0
	for i := from; i < len(rows); i++ {
		if d := sameVerdict(&got[i], &ref[i]); d != "" {
			if bad++; bad <= 10 {
				t.Errorf("record %d (%s) after the restart: %s", i, rows[i].key, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of the %d records after the restart differ from the uninterrupted run's", bad, len(rows)-from)
	}
}

// TestRestartContinuesAlarms: a restart from detect.state_dir in the middle of faults (key_by:
// key) leaves every record's verdict as the uninterrupted stream's: a warm key's fault going on
// (flagged past its cap, its flags grouped into the alert opened before the stop: alert_cooldown),
// a warming key's fault on the global model's path (its next record within the deadband held,
// the next far one grouped), and a warm key whose last record before the stop was flagged,
// evicted after it (keys.max_keys) and scored by the global model again (its record within the
// deadband held by the flag its cap handed back). Before, the stage's alarms (the global path's
// series and cap, the alert groups) started empty after a restart and a restored key's cap had
// no position to hand its flag back at: each fault restarted as a new alert, unheld.
func TestRestartContinuesAlarms(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour // (one global model throughout)
	cfg.Keys.MaxKeys = 13
	cfg.AlertCooldown = time.Minute
	r := rand.New(rand.NewPCG(10, 10))
	var rows []fleetRow
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	// The value the global model scores within the deadband: probe keys' records (each warming)
	// after the same first 1000 records, which build the one global model of every run.
	probe := append([]fleetRow(nil), rows...)
	for i := range 400 {
		probe = append(probe, fleetRow{key: fmt.Sprintf("p%d", i), value: 70 + float32(i)*0.1})
	}
	pout, _, pdone := handoverRun(t, cfg, Deps{}, probe, 1000, 1200)
	pdone()
	want := (cfg.clearScore() + cfg.MinScore) / 2
	w, ws := float32(0), 0.0
	for i, sc := range pout[1200:] {
		if sc.Score >= cfg.clearScore() && sc.Score < cfg.MinScore && (w == 0 || math.Abs(sc.Score-want) < math.Abs(ws-want)) {
			w, ws = probe[1200+i].value, sc.Score
		}
	}
	if w == 0 {
		t.Fatal("setup: no probe value scores within the deadband by the global model")
	}
	add := func(key string, v float32) int {
		rows = append(rows, fleetRow{key: key, value: v})
		return len(rows) - 1
	}
	for range cfg.Keys.MinRecords { // a and s warm
		add("a", float32(70+2*r.NormFloat64()))
		add("s", float32(70+2*r.NormFloat64()))
	}
	aFlag := add("a", 200) // a's last record before the stop: flagged by its cap
	for i := range 3 {     // s's fault starts (an alert, then grouped), and g's, warming
		add("s", 200)
		add("g", 200)
		add(fmt.Sprintf("x%d", i), 70)
	}
	for i := range 10 { // every key seen after a: a is the least recently seen
		add(fmt.Sprintf("x%d", i), float32(70+2*r.NormFloat64()))
	}
	stop := add("s", 200) + 1 // (the stage stops after this record)
	// After the stop: s's fault goes on; g's record within the deadband (held), then far again
	// (grouped); z, a new key, evicts a; a's record within the deadband (held by its cap's flag
	// handed back), again, then ordinary.
	sOn, gHeld, gOn := add("s", 200), add("g", w), add("g", 200)
	add("z", 70)
	aHeld := add("a", w)
	add("x3", 70)
	add("a", w)
	add("a", 70)
	add("s", 200)
	for _, c := range []struct {
		name string
		cuts []int
		deps func() Deps
	}{
		{"one batch after the stop", []int{1000, stop}, nil},
		{"a record a batch after the stop", []int{1000, stop, sOn + 1, gHeld, gOn, gOn + 1, aHeld, aHeld + 1, aHeld + 2}, nil},
		{"keys on a device, overlapped", []int{1000, 1200, aFlag, stop, gHeld, aHeld}, func() Deps {
			return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}, Overlap: OverlapOnGPU}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := restartRun(t, cfg, c.deps, rows, c.cuts, 0)
			for _, chk := range []struct {
				i    int
				what string
				ok   bool
			}{
				{aFlag, "a's last record before the stop flagged by its key", ref[aFlag].ByKey && ref[aFlag].Outlier},
				{sOn, "s's fault flagged by its key, grouped", ref[sOn].ByKey && ref[sOn].Outlier && ref[sOn].Grouped},
				{gHeld, "g's record within the deadband held on the global path", ref[gHeld].Warming && ref[gHeld].Held && ref[gHeld].Score == ws},
				{gOn, "g's fault grouped", ref[gOn].Warming && ref[gOn].Outlier && ref[gOn].Grouped},
				{aHeld, "a evicted, its record within the deadband held", ref[aHeld].Warming && ref[aHeld].Held},
			} {
				if !chk.ok {
					t.Fatalf("setup: record %d (%s): want %s; %s", chk.i, rows[chk.i].key, chk.what, Reason(&ref[chk.i]))
				}
			}
			got := restartRun(t, cfg, c.deps, rows, c.cuts, stop)
			sameAfterRestart(t, got, ref, rows, stop)
		})
	}
	// Under key_by: none every key's series is on the global model's path: the same faults go on.
	t.Run("key_by none", func(t *testing.T) {
		c := cfg
		c.KeyBy = KeyByNone
		cuts := []int{1000, stop}
		ref := restartRun(t, c, nil, rows, cuts, 0)
		if !ref[gHeld].Held || !ref[aHeld].Held || !ref[sOn].Grouped || !ref[gOn].Grouped {
			t.Fatalf("setup: g's and a's records within the deadband held %v %v, s's and g's next far ones grouped %v %v",
				ref[gHeld].Held, ref[aHeld].Held, ref[sOn].Grouped, ref[gOn].Grouped)
		}
		got := restartRun(t, c, nil, rows, cuts, stop)
		sameAfterRestart(t, got, ref, rows, stop)
	})
}

// TestAlarmStateFile: the alarm state file reads back to what was saved (written again, the same
// bytes); one of another detect.window, or corrupt, is skipped with the reason, and the stage's
// alarms start empty.
func TestAlarmStateFile(t *testing.T) {
	cfg := keyedConfig()
	cfg.KeyBy, cfg.AlertCooldown, cfg.StateDir = KeyByNone, time.Minute, t.TempDir()
	rng := rand.New(rand.NewPCG(12, 12))
	rows := make([]fleetRow, 3000)
	for i := range rows {
		rows[i] = fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*rng.NormFloat64())}
		if i > 1000 && i%97 == 0 {
			rows[i].value = 200
		}
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := newFleetStage(t, cfg, []string{"value"})
	restartFeed(t, s, mem, rows, 0, len(rows), []int{1000, 2000})
	saved := s.alarmsCopy()
	s.Close()
	if saved.cap.count == 0 || len(saved.groups) == 0 || saved.series.pos != uint64(len(rows)) {
		t.Fatalf("setup: %d flags in the cap, %d alert groups, position %d", saved.cap.count, len(saved.groups), saved.series.pos)
	}
	// Its size: 80 bytes (64 before format 2, 68 before format 4; 4 of them the fleet's pool,
	// empty but on a scorer under keys.tail: fleet; 8 the groups' generation; 4 the count of the
	// partitions the groups took records of), the cap's flags (a bit a record of the window), 12
	// bytes and the key a series in alarm, 21 and the key an alert group (16 before format 3, its
	// partition; 20 before format 4, its flags), 13 a partition taken (format 4: its offset and
	// flags; a scorer's keys' caps: 56 and the key each at keys.window 200).
	size := 80 + 8*((cfg.Window+63)/64)
	for k := range saved.series.keyed {
		size += 12 + len(k)
	}
	for k := range saved.groups {
		size += 21 + len(k)
	}
	size += 13 * len(saved.at.Taken)
	// The stream's recent past (format 6): 12 bytes when empty; its ring of m scores 48 + 8 m
	// more and 8 a block maximum of its horizon (no recent_past here: no rows, no stale marks).
	size += 12
	if g := saved.recent.ring; len(g.s) > 0 {
		size += 48 + 8*len(g.s) + 8*len(g.peaks)
	}
	if len(saved.at.Taken) == 0 {
		t.Error("no partition taken in the alarm state saved")
	}
	if n := len(saved.encode(cfg.Keys.Window)); n != size {
		t.Errorf("the alarm state takes %d bytes, want %d", n, size)
	}
	d, err := OpenSnapshotDir(cfg.StateDir, cfg.Snapshots, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	files, err := d.list(alarmsPrefix)
	if err != nil || len(files) == 0 {
		t.Fatalf("no alarm state file: %v", err)
	}
	r := newFleetStage(t, cfg, []string{"value"})
	if got := r.alarmsCopy(); !bytes.Equal(got.encode(cfg.Keys.Window), saved.encode(cfg.Keys.Window)) {
		t.Errorf("the alarm state loaded differs from the one saved (%d flags, position %d, %d groups; saved %d, %d, %d)",
			got.cap.count, got.series.pos, len(got.groups), saved.cap.count, saved.series.pos, len(saved.groups))
	}
	r.Close()
	// Another window: refused (the cap's records differ), the alarms start empty.
	other := cfg
	other.Window = 4000
	o := newFleetStage(t, other, []string{"value"})
	if a := o.alarmsCopy(); a.series.pos != 0 || a.cap.count != 0 || len(a.groups) != 0 {
		t.Errorf("a state of a window of %d loaded under %d: position %d, %d flags, %d groups", cfg.Window, other.Window, a.series.pos, a.cap.count, len(a.groups))
	}
	o.Close()
	// Corrupt: every file's byte in the middle flipped: skipped, the alarms start empty.
	files, _ = d.list(alarmsPrefix)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newFleetStage(t, cfg, []string{"value"})
	if a := c.alarmsCopy(); a.series.pos != 0 || a.cap.count != 0 || len(a.groups) != 0 {
		t.Errorf("a corrupt state loaded: position %d, %d flags, %d groups", a.series.pos, a.cap.count, len(a.groups))
	}
	c.abandonFlight()
	c.ext.snaps = nil // (not saved again at Close)
	c.Close()
}

// TestSaveAfterUndecidedRecords: with batches overlapped and the keys' passes chained (keys on a
// device), a save asked for between batches, while the oldest batch in flight has been through
// its keys' pass (a key's first records by its own model waiting for the stage's cap, the
// stage's alarms not yet past the batch), is made once that batch finished: a stage restarted
// from any such save and fed the stream from the save's position gives every record the
// uninterrupted stream's verdict. Before, the save copied the keys' state then, past the
// stage's alarms: a's first records by its own model were neither in its cap nor to be decided
// again, and the keys' windows held the batch's records twice once it was read again. A stop
// without Flush after a keys' pass (the batch dropped, read again after the restart) saves
// nothing: the last save stands.
func TestSaveAfterUndecidedRecords(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.AlertCooldown = time.Minute
	r := rand.New(rand.NewPCG(7, 7))
	var rows []fleetRow
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	for range cfg.Keys.MinRecords - 1 { // a warms; its last warming record is flagged (global)
		rows = append(rows, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	rows = append(rows, fleetRow{key: "a", value: 200})
	_, s0, done0 := handoverRun(t, cfg, Deps{}, rows, 1000)
	km, _ := s0.KeyModelOf("a")
	done0()
	if km == nil {
		t.Fatal("setup: a has no model after its warm-up")
	}
	v, _ := bandValue(t, km, cfg)
	first := len(rows)
	rows = append(rows, fleetRow{key: "a", value: v}, fleetRow{key: "x1", value: 70}, fleetRow{key: "a", value: v}, fleetRow{key: "a", value: 70})
	for i := range 60 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
		if i%20 == 0 {
			rows = append(rows, fleetRow{key: "a", value: 200})
		}
	}
	cuts := []int{500, 1000, 1100, 1200, first - 1, first, first + 2, first + 10, first + 30, first + 50}
	deps := func() Deps {
		return Deps{Accelerator: &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}, Overlap: OverlapOnGPU,
			Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
	}
	ref := restartRun(t, cfg, deps, rows, cuts, 0)
	if sc := ref[first]; !sc.ByKey || !sc.Held {
		t.Fatalf("setup: a's first record by its own model: by key %v held %v", sc.ByKey, sc.Held)
	}

	// The stream with a save asked for after every batch (as installed asks, at most once per
	// refresh_interval), each save's files copied aside.
	cfg.StateDir = t.TempDir()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s, err := NewStage(cfg, []string{"value"}, false, deps())
	if err != nil {
		t.Fatal(err)
	}
	saves := map[uint64]string{} // a save's stream position -> its copy
	ahead, lo := 0, 0
	for _, hi := range append(cuts, len(rows)) {
		bs, err := s.Process(context.Background(), restartBatch(t, mem, rows, lo, hi))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			b.Release()
		}
		lo = hi
		if s.model == nil {
			continue
		}
		if s.passAhead() {
			ahead++
		}
		s.saveKeys(false)
		s.ext.saves.Wait()
		pos, dir := copyState(t, cfg.StateDir)
		if _, ok := saves[pos]; !ok && pos > 0 {
			saves[pos] = dir
		}
	}
	// Stopped without Flush (a failure, the hard stop) after a batch's keys' pass: the batches in
	// flight are dropped, to be read again, and the keys' state, past them, is not saved.
	names := func() string {
		ents, _ := os.ReadDir(cfg.StateDir)
		var b strings.Builder
		for _, e := range ents {
			b.WriteString(e.Name() + " ")
		}
		return b.String()
	}
	before, wasAhead := names(), s.passAhead()
	s.Abandon()
	s.Close()
	if after := names(); !wasAhead || after != before {
		t.Errorf("stopped without Flush, a keys' pass ahead (%v): state_dir holds %s, %s before: want nothing saved", wasAhead, after, before)
	}
	if ahead == 0 || len(saves) < 3 {
		t.Fatalf("setup: %d saves asked for with a keys' pass ahead, %d saves made: want some of each", ahead, len(saves))
	}
	for pos, dir := range saves {
		c := cfg
		c.StateDir = dir
		s, err := NewStage(c, []string{"value"}, false, deps())
		if err != nil {
			t.Fatal(err)
		}
		got := restartFeed(t, s, mem, rows, int(pos), len(rows), cuts)
		s.Close()
		for i, g := range got {
			if d := sameVerdict(&g, &ref[int(pos)+i]); d != "" {
				t.Errorf("restarted from the save at %d: record %d (%s): %s", pos, int(pos)+i, rows[int(pos)+i].key, d)
			}
		}
	}
}

// restartBatch is rows[lo:hi] as restartFeed feeds them.
func restartBatch(t *testing.T, mem memory.Allocator, rows []fleetRow, lo, hi int) *batch.Batch {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	tr := make([]testbatch.Row, 0, hi-lo)
	for i := lo; i < hi; i++ {
		tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(rows[i].key), Time: t0.Add(time.Duration(i) * time.Second),
			Features: []float32{rows[i].value}})
	}
	return testbatch.New(t, mem, "fleet", []string{"value"}, false, false, tr)
}

// copyState copies state_dir's files to a new directory and returns the stream position of its
// newest alarm state (0: none yet).
func copyState(t *testing.T, dir string) (uint64, string) {
	t.Helper()
	to := copyDir(t, dir)
	d, err := OpenSnapshotDir(to, 3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	files, err := d.list(alarmsPrefix)
	if err != nil || len(files) == 0 {
		return 0, to
	}
	var pos uint64
	if err := readSealedFile(context.Background(), files[0], alarmsSnapshotFile, func(format uint32, p []byte) error {
		a, err := decodeAlarms(format, p, 5000, 200)
		if err == nil {
			pos = a.series.pos
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return pos, to
}

// TestScorerRestartContinuesKeyAlarms: a scorer (run.role scorer) restarted from its state_dir
// in the middle of a key's fault, its keys' models installed again from the model topic, goes on
// with the key's alarm: its cap (in the alarm state) is given back to the key with its model, so
// the key's next record within the deadband is held and its next far one grouped, as without the
// restart. Before, the key's cap started empty with its model: the record was not held. A key
// retired by the builder (a tombstone) just before the stop, its last record flagged, has its
// next record after the restart (scored by the global model) held by that flag, as without it.
func TestScorerRestartContinuesKeyAlarms(t *testing.T) {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.AlertCooldown = time.Minute
	r := rand.New(rand.NewPCG(11, 11))
	var rows []fleetRow
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	for range cfg.Keys.MinRecords {
		rows = append(rows, fleetRow{key: "a", value: float32(70 + 2*r.NormFloat64())})
	}
	_, leader, done := handoverRun(t, cfg, Deps{}, rows, 1000)
	gm := leader.Model()
	km, _ := leader.KeyModelOf("a")
	done()
	if km == nil || gm == nil {
		t.Fatal("setup: no global model or no model of a")
	}
	v, _ := bandValue(t, km, cfg)
	// When a is retired (a tombstone): not, before the stop, or after the restarts (before any
	// record).
	const (
		kept = iota
		retiredBefore
		retiredAfter
	)
	// run feeds before to a scorer serving gm and a's model, retires a (retire), restarts it
	// once a restart (withA: a's model installed again after it; stopped again before any record)
	// and returns after's scores.
	run := func(before, after []fleetRow, retire int, withA ...bool) []batch.Score {
		c := cfg
		c.StateDir = t.TempDir()
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		open := func(withA bool) *Stage {
			s, err := NewStage(c, []string{"value"}, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Role: RoleScorer})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.InstallModel(gm, nil); err != nil {
				t.Fatal(err)
			}
			if withA {
				s.InstallKeyModels([]KeyModel{{Key: "a", Version: 1, Model: km}})
			}
			return s
		}
		all := append(append([]fleetRow(nil), before...), after...)
		feed := func(s *Stage, lo, hi int) []batch.Score {
			bs, err := s.Process(context.Background(), restartBatch(t, mem, all, lo, hi))
			if err != nil || len(bs) != 1 {
				t.Fatalf("%d batches out, %v", len(bs), err)
			}
			out := append([]batch.Score(nil), bs[0].Scores...)
			bs[0].Release()
			return out
		}
		s := open(true)
		feed(s, 0, len(before))
		if retire == retiredBefore {
			s.InstallKeyModels([]KeyModel{{Key: "a", Version: 2}})
		}
		for _, a := range withA {
			s.Close()
			s = open(a)
		}
		if retire == retiredAfter {
			s.InstallKeyModels([]KeyModel{{Key: "a", Version: 2}})
		}
		defer s.Close()
		return feed(s, len(before), len(all))
	}
	compare := func(what string, before, after []fleetRow, retire int, setup func(ref []batch.Score) string, withA ...bool) {
		t.Helper()
		ref := run(before, after, min(retire, retiredBefore)) // (without a restart, before and after are one moment)
		if msg := setup(ref); msg != "" {
			t.Fatalf("%s, setup: %s", what, msg)
		}
		if withA == nil {
			withA = []bool{retire == kept}
		}
		got := run(before, after, retire, withA...)
		for i := range after {
			if d := sameVerdict(&got[i], &ref[i]); d != "" {
				t.Errorf("%s: record %d (%s) after the restart: %s", what, i, after[i].key, d)
			}
		}
	}
	fault := []fleetRow{{"a", 200, true}, {"x1", 70, false}, {"a", 200, true}}
	aOn := func(ref []batch.Score) string {
		if !ref[0].ByKey || !ref[0].Held || !ref[2].Grouped {
			return fmt.Sprintf("a's record within the deadband by its key %v held %v; its next far one grouped %v", ref[0].ByKey, ref[0].Held, ref[2].Grouped)
		}
		return ""
	}
	aNext := []fleetRow{{"a", v, false}, {"x2", 70, false}, {"a", 200, true}, {"a", 70, false}}
	compare("a's alarm by its model", fault, aNext, kept, aOn)
	// Restarted twice, a's model not yet read again at the first (its partition's model topic
	// behind): the saves of that run (at its model's install, at its stop) keep a's cap, which
	// waits for a's model. Before, they saved the keys installed alone: a's cap was lost.
	compare("a's alarm across a restart before its model came back", fault, aNext, kept, aOn, false, true)
	// The global model's deadband value: probe keys' records, each warming.
	var probe []fleetRow
	for i := range 400 {
		probe = append(probe, fleetRow{key: fmt.Sprintf("p%d", i), value: 70 + float32(i)*0.1})
	}
	pout := run(nil, probe, kept)
	want := (cfg.clearScore() + cfg.MinScore) / 2
	w, ws := float32(0), 0.0
	for i, sc := range pout {
		if sc.Score >= cfg.clearScore() && sc.Score < cfg.MinScore && (w == 0 || math.Abs(sc.Score-want) < math.Abs(ws-want)) {
			w, ws = probe[i].value, sc.Score
		}
	}
	if w == 0 {
		t.Fatal("setup: no probe value scores within the deadband by the global model")
	}
	aHeld := func(ref []batch.Score) string {
		if !ref[0].Warming || !ref[0].Held {
			return fmt.Sprintf("a's record within the global model's deadband: warming %v held %v", ref[0].Warming, ref[0].Held)
		}
		return ""
	}
	aBand := []fleetRow{{"a", w, false}, {"a", 70, false}}
	compare("a retired before the stop", fault, aBand, retiredBefore, aHeld)
	// Retired while the scorer was down (the tombstone read after the restart, a's model not):
	// a's cap, waiting for its model, hands its flag back to the global model's path as a's
	// eviction would have. Before, it waited on (for a model of a that would start with a
	// stale cap) and a's next record was not held.
	compare("a retired while the scorer was down", fault, aBand, retiredAfter, aHeld, false)
}

// TestScorerSavesWaitingCaps: a scorer's save keeps the keys' caps restored and still waiting
// for their key's model (InstallKeyModels gives them back), at most keys.max_keys with its keys'
// own: the keys installed, then the waiting ones whose key was seen last.
func TestScorerSavesWaitingCaps(t *testing.T) {
	cfg := keyedConfig()
	cfg.Keys.MaxKeys = 3
	s, km := scorerWithModelOfA(t, cfg)
	waiting := func(at uint64) savedCap {
		c := savedCap{cap: *newAlarmCap(cfg.Keys.Window)}
		c.cap.admitOver(true, false, true, 4)
		c.cap.at = at
		return c
	}
	s.series.pos = 20
	s.ext.keyCaps = map[string]savedCap{"a": waiting(5), "b": waiting(9), "e": waiting(7), "c": waiting(3)}
	s.InstallKeyModels([]KeyModel{{Key: "c", Version: 1, Model: km}, {Key: "d", Version: 1, Model: km}})
	a := s.alarmsCopy()
	got := slices.Sorted(maps.Keys(a.keyCaps))
	if want := []string{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("saved keys' caps %v, want %v (c and d installed, b the waiting one seen last)", got, want)
	}
	if a.keyCaps["c"].cap.at != 3 || a.keyCaps["c"].cap.count != 1 || a.keyCaps["b"].cap.at != 9 {
		t.Errorf("c's cap at %d with %d flags, b's at %d: want c's restored (3, 1), b's (9)", a.keyCaps["c"].cap.at, a.keyCaps["c"].cap.count, a.keyCaps["b"].cap.at)
	}
	if _, ok := s.ext.keyCaps["c"]; ok || len(s.ext.keyCaps) != 3 {
		t.Errorf("waiting caps left %v: want a, b and e (c given back)", slices.Sorted(maps.Keys(s.ext.keyCaps)))
	}
}

// TestAlarmStateOtherKeysWindow: a scorer's alarm state read under another keys.window loads
// all but its keys' caps (their flags are of another window's records: the keys start them
// empty). Before, the whole file was refused, the stage's cap, series and groups with it.
func TestAlarmStateOtherKeysWindow(t *testing.T) {
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	open := func(c Config) *Stage {
		s, err := NewStage(c, []string{"value"}, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Role: RoleScorer})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(cfg)
	s.series.pos, s.series.keyless = 20, 19
	s.ext.keyCaps = map[string]savedCap{"b": {cap: *newAlarmCap(cfg.Keys.Window)}}
	s.ext.keyCaps["b"].cap.bits[0] = 1
	s.Close() // (saved)
	same := open(cfg)
	if _, ok := same.ext.keyCaps["b"]; !ok || same.series.pos != 20 {
		t.Fatalf("setup: the state read back at position %d, b's cap %v", same.series.pos, ok)
	}
	same.ext.snaps = nil // (not saved again)
	same.Close()
	other := cfg
	other.Keys.Window = 100
	o := open(other)
	defer o.Close()
	if o.series.pos != 20 || o.series.keyless != 19 || len(o.ext.keyCaps) != 0 {
		t.Errorf("under keys.window %d: position %d, keyless series at %d, %d keys' caps; want 20, 19, none", other.Keys.Window, o.series.pos, o.series.keyless, len(o.ext.keyCaps))
	}
}

// TestAlarmStateWithoutKeysConfig: a stage without keys.* (keys.window 0) reads its alarm state
// back, and its log counts the keyless series in alarm (series_in_alarm said 0 for a stream
// without keys whose fault was flagged at the stop: it counted the keyed series alone).
func TestAlarmStateWithoutKeysConfig(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords, cfg.Keys, cfg.StateDir = 5000, 1000, KeysConfig{}, t.TempDir()
	s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s.series.pos, s.series.keyless = 20, 19
	s.Close()
	var log bytes.Buffer
	r, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.New(&log)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.series.pos != 20 || r.series.keyless != 19 {
		t.Errorf("read back at position %d, keyless series at %d; want 20, 19", r.series.pos, r.series.keyless)
	}
	if !strings.Contains(log.String(), `"series_in_alarm":1,`) {
		t.Errorf("the keyless series in alarm is not counted in the log:\n%s", log.String())
	}
}

// TestAlarmStateLongKey: a key longer than a key read back may be (maxKeyLength) is left out of
// the alarm state, the rest read back. Before, it was written and the whole file was refused.
func TestAlarmStateLongKey(t *testing.T) {
	cfg := keyedConfig()
	cfg.KeyBy, cfg.AlertCooldown, cfg.StateDir = KeyByNone, time.Minute, t.TempDir()
	long := strings.Repeat("k", maxKeyLength+1)
	s := newFleetStage(t, cfg, []string{"value"})
	s.series.pos, s.series.newest = 20, 19
	s.series.keyed = map[string]uint64{"a": 18, long: 19}
	s.groups.open = map[string]*alertGroup{"a": {at: 5, timed: true}, long: {at: 6, timed: true}}
	s.Close()
	r := newFleetStage(t, cfg, []string{"value"})
	defer r.Close()
	if r.series.pos != 20 || len(r.series.keyed) != 1 || r.series.keyed["a"] != 18 || len(r.groups.open) != 1 || r.groups.open["a"] == nil {
		t.Errorf("read back at position %d, series %d (a at %d), groups %d: want 20, a's alone", r.series.pos, len(r.series.keyed), r.series.keyed["a"], len(r.groups.open))
	}
}

// TestKeysStateLongKey: a key longer than a key read back may be (maxKeyLength) is left out of
// the keys' state, the other keys resumed. Before, it was written and the whole file refused:
// every key started cold.
func TestKeysStateLongKey(t *testing.T) {
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	var rows []fleetRow
	r := rand.New(rand.NewPCG(14, 14))
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	rows = append(rows, fleetRow{key: strings.Repeat("k", maxKeyLength+1), value: 70})
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := newFleetStage(t, cfg, []string{"value"})
	restartFeed(t, s, mem, rows, 0, len(rows), []int{1000})
	if st := s.KeyStats(); st.Live+st.Warming != 11 {
		t.Fatalf("setup: %d keys, want 11", st.Live+st.Warming)
	}
	s.Close()
	b := newFleetStage(t, cfg, []string{"value"})
	defer b.Close()
	if st := b.KeyStats(); st.Live+st.Warming != 10 {
		t.Errorf("%d keys resumed, want the 10 but the long one", st.Live+st.Warming)
	}
}

// TestAlarmStateNoOlderAfterMismatch: an alarm state of another detect.window ends the search:
// the older files predate it (a window changed and changed back), their alarms long over, and
// the alarms start empty, as after the change itself. Before, the newest older file that fitted
// was loaded: its series in alarm held records after the restart.
func TestAlarmStateNoOlderAfterMismatch(t *testing.T) {
	cfg := keyedConfig()
	cfg.KeyBy, cfg.StateDir = KeyByNone, t.TempDir()
	open := func(c Config) *Stage {
		s, err := NewStage(c, []string{"value"}, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(cfg)
	s.series.pos, s.series.newest, s.series.keyed = 20, 19, map[string]uint64{"a": 19}
	s.Close()
	other := cfg
	other.Window = 4000
	o := open(other)
	o.series.pos = 30
	o.Close()
	r := open(cfg)
	defer r.Close()
	if r.series.pos != 0 || len(r.series.keyed) != 0 {
		t.Errorf("the state before another window's loaded: position %d, %d series in alarm; want none", r.series.pos, len(r.series.keyed))
	}
}

// TestRestartContinuesRunPastCap: a fault on the global model's path that has gone past the
// stage's cap (alarm_rate limits alarm starts and counts an alarm once, not the records of one
// going on) goes on past it after a restart, and a new fault that starts then is suppressed by
// the cap the alarms started before it spent, as without the restart: the cap's starts and the
// series in alarm come back together.
func TestRestartContinuesRunPastCap(t *testing.T) {
	cfg := keyedConfig()
	cfg.KeyBy, cfg.AlarmRate = KeyByNone, 0.002 // (a cap of 10 flags in 5,000 records)
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	r := rand.New(rand.NewPCG(15, 15))
	var rows []fleetRow
	for i := range 1200 {
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())})
	}
	stop := 0
	var stuck, fresh []int
	for i := range 40 { // s stuck far out, a record in three; n's fault starts after the stop
		rows = append(rows, fleetRow{key: "s", value: 200})
		stuck = append(stuck, len(rows)-1)
		if i >= 1 && i <= 9 { // nine one-record alarms: with s's, the cap's 10 starts
			rows = append(rows, fleetRow{key: fmt.Sprintf("p%d", i), value: 200})
		}
		if i == 25 {
			stop = len(rows)
		}
		if i >= 30 {
			rows = append(rows, fleetRow{key: "n", value: 200})
			fresh = append(fresh, len(rows)-1)
		}
		rows = append(rows, fleetRow{key: fmt.Sprintf("x%d", i%10), value: float32(70 + 2*r.NormFloat64())},
			fleetRow{key: fmt.Sprintf("x%d", (i+5)%10), value: float32(70 + 2*r.NormFloat64())})
	}
	cuts := []int{1000, stop}
	ref := restartRun(t, cfg, nil, rows, cuts, 0)
	for _, i := range stuck {
		if !ref[i].Outlier {
			t.Fatalf("setup: s's record %d not flagged: %s", i, Reason(&ref[i]))
		}
	}
	for _, i := range fresh {
		if !ref[i].Suppressed {
			t.Fatalf("setup: n's record %d not suppressed by the spent cap: %s", i, Reason(&ref[i]))
		}
	}
	got := restartRun(t, cfg, nil, rows, cuts, stop)
	sameAfterRestart(t, got, ref, rows, stop)
}

// TestRebaseKeysPositions: keys' state and alarm state saved apart (one of a save's two writes
// failed, or a crash between them) count from different stream positions: the keys' caps'
// positions move by the difference, a position moved before the stream's first is unknown (0),
// as is one not known.
func TestRebaseKeysPositions(t *testing.T) {
	k := newKeyedScorer()
	for key, at := range map[string]uint64{"a": 90, "b": 30, "z": 0} {
		st := &keyState{key: key, cap: newAlarmCap(8)}
		st.cap.at = at
		k.keys[key] = st
	}
	at := func() [3]uint64 { return [3]uint64{k.keys["a"].cap.at, k.keys["b"].cap.at, k.keys["z"].cap.at} }
	if k.rebase(100, 150); at() != [3]uint64{140, 80, 0} {
		t.Errorf("keys at 100, alarms at 150: positions %v, want [140 80 0]", at())
	}
	if k.rebase(150, 90); at() != [3]uint64{80, 20, 0} {
		t.Errorf("keys at 150, alarms at 90: positions %v, want [80 20 0]", at())
	}
	if k.rebase(90, 60); at() != [3]uint64{50, 0, 0} {
		t.Errorf("keys at 90, alarms at 60: positions %v, want [50 0 0] (20 - 30: before the stream's first)", at())
	}
}
