package detect

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// removeWindowFiles deletes dir's window files: the state_dir of a release before them.
func removeWindowFiles(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, windowPrefix+"*"+snapshotExt))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// windowFiles lists dir's window files, newest first.
func windowFiles(t testing.TB, s *Stage) []string {
	t.Helper()
	files, err := s.ext.snaps.list(windowPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkedMem is a checked allocator whose every record the test must have released by its end
// (asserted at its cleanup: after the stages' Close, which newTestStage registers later).
func checkedMem(t *testing.T) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// restartSetup is the restart tests' set-up: checkedMem, testData's rows records and
// testConfig with a new state_dir.
func restartSetup(t *testing.T, rows int) (*memory.CheckedAllocator, *synth.Data, Config) {
	t.Helper()
	cfg := testConfig()
	cfg.StateDir = t.TempDir()
	return checkedMem(t), testData(rows, 6), cfg
}

// newestOffset is the offset of the newest record of s's window.
func newestOffset(s *Stage) int64 { return s.recs.offs[(s.recs.pushed-1)%uint64(len(s.recs.offs))] }

// loggedStage is a stage of cfg over testData's columns (with uncertainties) and its log; the
// caller closes it.
func loggedStage(t *testing.T, cfg Config) (*Stage, *testsupport.LogBuffer) {
	t.Helper()
	var logs testsupport.LogBuffer
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	return s, &logs
}

// stopAfter runs a stage of cfg over d's records [0, n) in batches of step, stops it gracefully
// (Close: with cfg.StateDir, the saves a restart reads) and returns it.
func stopAfter(t *testing.T, cfg Config, mem memory.Allocator, d *synth.Data, n, step int) *Stage {
	t.Helper()
	a := newTestStage(t, cfg)
	feed(t, a, mem, d, 0, n, step)
	a.Close()
	return a
}

// TestRestartRebuildsFromTheRestoredWindow: a stage restarted from state_dir puts its window
// back (the records, their identities) and rebuilds at its first trigger from it: here
// refresh_records counted across the restart (200, and 1,000 records had come since the last
// build at the stop), so the first batch after the restart starts the rebuild, whose model holds
// the whole window (2,000 records: the 1,900 newest saved and the batch's 100) and names them
// as its members. Before, the window started empty: no rebuild until min_records (1,000) new
// records had arrived, then one from those alone.
func TestRestartRebuildsFromTheRestoredWindow(t *testing.T) {
	mem, d, cfg := restartSetup(t, 3000)
	a := newTestStage(t, cfg)
	feed(t, a, mem, d, 0, 2000, 250) // the first model at 1,000 records; the window full at 2,000
	a.collect(true)
	if a.Model() == nil || a.Model().Version != 1 || a.win.Len() != 2000 {
		t.Fatalf("setup: model %v, window %d, want version 1 and 2,000", a.Model(), a.win.Len())
	}
	a.Close()
	if n := len(windowFiles(t, a)); n != 2 { // (the first model's install saved one: the periodic save)
		t.Fatalf("%d window files after the stop, want 2", n)
	}

	cfg.RefreshRecords = 200 // (a live key: the model still fits)
	b := newTestStage(t, cfg)
	if b.Model() == nil || b.Model().Version != 1 {
		t.Fatalf("stage b did not resume from the snapshot: %v", b.Model())
	}
	if b.win.Len() != 2000 || b.builds.sinceLast != 1000 || b.ext.rebuildDue {
		t.Fatalf("restored window %d records, %d since the last build, rebuild due %v; want 2,000, 1,000 (the stop's), not due",
			b.win.Len(), b.builds.sinceLast, b.ext.rebuildDue)
	}
	feed(t, b, mem, d, 2000, 2100, 100)
	b.collect(true)
	m := b.Model()
	if m.Version != 2 || m.WindowRecords != 2000 {
		t.Fatalf("after the restart's first batch: model version %d of %d records, want version 2 rebuilt from the whole window (2,000)", m.Version, m.WindowRecords)
	}
	want := Members{Topic: "t", Ranges: []PartitionRange{{Partition: 0, Lo: 100, Hi: 2099}}}
	if !slices.Equal(m.Members.Ranges, want.Ranges) || m.Members.Topic != want.Topic {
		t.Errorf("the rebuilt model's members %+v, want %+v (the saved window's newest 1,900 and the batch)", m.Members, want)
	}
	// The model of the uninterrupted stage, pushed the same batch and rebuilt, is the same.
	cfg.StateDir = ""
	c := newTestStage(t, cfg)
	feed(t, c, mem, d, 0, 2100, 250)
	c.collect(true)
	refCols, _ := c.reference()
	gotCols, _ := b.reference()
	for j := range refCols {
		if !slices.Equal(refCols[j], gotCols[j]) {
			t.Fatalf("column %d of the restarted stage's reference differs from the uninterrupted stage's", j)
		}
	}
}

// TestReloadAfterRestartRebuildsAtOnce: a reload of a key that shapes the model, right after a
// restart from state_dir, rebuilds at once from the restored window (operator29's rebuild_waits
// says nothing waits), the new model from the 1,500 saved records. Before, the window was empty:
// the rebuild waited for min_records (TestReloadAfterSnapshotStartSaysWhatTheRebuildWaitsFor
// keeps that case: a state_dir without a window file).
func TestReloadAfterRestartRebuildsAtOnce(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	stopAfter(t, cfg, mem, d, 1500, 250)

	b := newTestStage(t, cfg)
	next := cfg
	next.Distance.K = 12
	r, err := b.Reconfigure(next)
	if err != nil {
		t.Fatal(err)
	}
	if !r.RebuildStarted || r.RebuildWaits != "" {
		t.Fatalf("reload right after a restart from a saved window: %+v, want a rebuild started, waiting for nothing", r)
	}
	b.collect(true)
	if m := b.Model(); m.Version != 2 || m.Params.K != 12 || m.WindowRecords != 1500 {
		t.Errorf("model version %d, k %d, of %d records; want version 2 with k 12 from the saved 1,500", m.Version, m.Params.K, m.WindowRecords)
	}
}

// faultData is testData with rows at far out (x1 = 1000, a value the data never reach).
func faultData(rows int, far ...int) *synth.Data {
	d := testData(rows, 6)
	for _, i := range far {
		d.Cols[0][i] = 1000
	}
	return d
}

// TestRestartKeepsOutcastsOut: records flagged before the stop (flag_by: significance, a fault of
// ten records far out) are left out of the first rebuild after the restart, as they are of the
// uninterrupted stage's: their marks are saved with the window.
func TestRestartKeepsOutcastsOut(t *testing.T) {
	mem := checkedMem(t)
	far := []int{1200, 1201, 1202, 1203, 1204, 1205, 1206, 1207, 1208, 1209}
	d := faultData(2000, far...)
	cfg := testConfig()
	cfg.FlagBy, cfg.AlarmRate = FlagBySignificance, 0.5
	cfg.StateDir = t.TempDir()
	a := newTestStage(t, cfg)
	feed(t, a, mem, d, 0, 1500, 100)
	marked := a.recs.significant(a.win.Len())
	for _, i := range far {
		if !marked[i] {
			t.Fatalf("setup: the far record %d was not found significant before the stop", i)
		}
	}
	a.Close()

	b := newTestStage(t, cfg)
	if got := b.recs.significant(b.win.Len()); !slices.Equal(got, marked) {
		t.Fatal("the restored window's significance marks differ from the stop's")
	}
	next := cfg
	next.Distance.K = 12
	if _, err := b.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	b.collect(true)
	out := 0
	for _, m := range marked {
		if m {
			out++
		}
	}
	if m := b.Model(); m.Version != 2 || m.WindowRecords != 1500-out {
		t.Errorf("the first rebuild after the restart: version %d of %d records, want version 2 of the 1,500 saved less the %d flagged", m.Version, m.WindowRecords, out)
	}
	cols, _ := b.reference()
	if mx := slices.Max(cols[0]); mx >= 1000 {
		t.Errorf("the rebuild's reference holds x1 = %g: a record flagged before the stop", mx)
	}
}

// TestRestartRereadRecordsCountOnce: after a crash the records the window saved and Kafka gives
// back (the commit lagged the save) are read again: the saved copies are left out of the
// references, the copies read again stand, and the guard ends at the first record past the
// saved ones.
func TestRestartRereadRecordsCountOnce(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	stopAfter(t, cfg, mem, d, 1500, 250) // (the save a crash would have left: the window to record 1499)

	b := newTestStage(t, cfg)
	feed(t, b, mem, d, 1400, 1450, 50) // records 1400-1449 read again
	if b.ext.reread == nil {
		t.Fatal("the guard ended before the records past the saved ones")
	}
	feed(t, b, mem, d, 1450, 1600, 50)
	if b.ext.reread != nil {
		t.Error("the guard goes on past the saved records")
	}
	sig := b.recs.significant(b.win.Len()) // 1,500 saved, 200 pushed (1,400-1,599): the oldest 1,700
	if len(sig) != 1700 {
		t.Fatalf("%d records in the window, want 1,700", len(sig))
	}
	for i, s := range sig {
		saved, copyOf := i < 1500, i >= 1400 && i < 1500
		if s != (saved && copyOf) {
			t.Errorf("record %d of the window (saved %v): left out %v, want %v", i, saved, s, saved && copyOf)
		}
	}
	cols, _ := b.reference()
	if len(cols[0]) != 1600 {
		t.Errorf("the reference holds %d records, want the 1,600 distinct ones", len(cols[0]))
	}
}

// TestRestartWindowResized: a window saved under detect.window 2,000 and loaded under 1,200
// keeps its newest 1,200 records (the model snapshot, built for another window, does not fit:
// the first model is built from them at the first batch); under 3,000 it keeps all and fills on.
func TestRestartWindowResized(t *testing.T) {
	mem, d, cfg := restartSetup(t, 3000)
	stopAfter(t, cfg, mem, d, 2000, 250)
	for _, tc := range []struct{ window, held int }{{1200, 1200}, {3000, 2000}} {
		c := cfg
		c.Window, c.StateDir = tc.window, copyDir(t, cfg.StateDir)
		b := newTestStage(t, c)
		if b.Model() != nil || b.win.Len() != tc.held {
			t.Fatalf("window %d: model %v, %d records, want none (another window) and %d", tc.window, b.Model(), b.win.Len(), tc.held)
		}
		cols, _ := b.win.Snapshot()
		if !slices.Equal(cols[0], d.Cols[0][2000-tc.held:2000]) {
			t.Errorf("window %d: not the saved window's newest %d records", tc.window, tc.held)
		}
		feed(t, b, mem, d, 2000, 2100, 100)
		b.collect(true)
		if m := b.Model(); m == nil || m.WindowRecords != min(tc.held+100, tc.window) {
			t.Errorf("window %d: after the first batch %v, want a model of the restored window and the batch", tc.window, m)
		}
		b.Close()
	}
}

// copyDir copies dir's files into a new directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// TestWindowFileRefusals: a window file that is truncated, corrupt, of a hostile header, of other
// features or without the stream's uncertainty columns is skipped with a clear error (the
// older file or an empty window instead), never a crash or a half-loaded window.
func TestWindowFileRefusals(t *testing.T) {
	mem, d, cfg := restartSetup(t, 1500)
	a := stopAfter(t, cfg, mem, d, 1200, 200)
	good := windowFiles(t, a)[0]
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	w := a.windowCopy()
	hostile := func(edit func(w *windowState) []byte) []byte {
		var buf bytes.Buffer
		if err := windowSnapshotFile.Write(&buf, WindowSnapshotFormat, edit(w)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	var enc bytes.Buffer
	if err := writeWindowPayload(context.Background(), &enc, w); err != nil {
		t.Fatal(err)
	}
	payload := enc.Bytes()
	for _, tc := range []struct {
		name, want string
		file       []byte
	}{
		{"truncated", "truncated", data[:len(data)/2]},
		{"corrupt", "checksum", append(slices.Clone(data[:100]), append([]byte{data[100] ^ 1}, data[101:]...)...)},
		{"held past its bytes", "cannot be the", hostile(func(*windowState) []byte {
			p := slices.Clone(payload)
			const capAt = 8 + 3*(4+2) // dims, flags, three names of 2 bytes: then capacity, pushed, held
			p[capAt+3] = 0x7f         // capacity 2,000 + 0x7f << 24, under detect.window's bound
			p[capAt+8+6] = 0x7f       // pushed 1,200 + 0x7f << 48
			p[capAt+16+3] = 0x01      // held 1,200 + 1 << 24: 16.8 M records in a payload of 1,200
			return p
		})},
		{"unknown mark", "marks", hostile(func(*windowState) []byte {
			p := slices.Clone(payload)
			p[len(p)-1] = 0x80
			return p
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(good)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, windowPrefix+"00000000000000000099"+snapshotExt)
			if err := os.WriteFile(bad, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			c := cfg
			c.StateDir = dir
			s, logs := loggedStage(t, c)
			defer s.Close()
			if s.win.Len() != 1200 {
				t.Errorf("%d records restored, want the older file's 1,200", s.win.Len())
			}
			if !strings.Contains(logs.String(), "window snapshot skipped") || !strings.Contains(logs.String(), tc.want) ||
				!strings.Contains(logs.String(), filepath.Base(bad)) {
				t.Errorf("log %q: want the file named, skipped, with %q", logs.String(), tc.want)
			}
		})
	}
	// Another stream's columns: skipped, the log naming both.
	for _, tc := range []struct {
		features []string
		withSD   bool
		want     string
	}{{[]string{"x1", "x3", "x2"}, true, "[x1 x2 x3]"}, {[]string{"x1", "x2", "x3"}, false, "uncertainty"}} {
		var logs bytes.Buffer
		s, err := NewStage(cfg, tc.features, tc.withSD, Deps{Log: zerolog.New(&logs)})
		if err != nil {
			t.Fatal(err)
		}
		if s.win.Len() != 0 || !strings.Contains(logs.String(), tc.want) || !strings.Contains(logs.String(), "window snapshot skipped") {
			t.Errorf("features %v, uncertainty %v: %d records restored, log %q; want none, the mismatch named", tc.features, tc.withSD, s.win.Len(), logs.String())
		}
		s.Close()
	}
	if _, err := decodeWindow(payload[:40]); !errors.Is(err, ErrSnapshotFormat) {
		t.Errorf("a cut payload: %v, want ErrSnapshotFormat", err)
	}
}

// TestScorerKeepsNoWindow: a scorer saves and loads no window (it pushes none); a builder saves
// its window and loads it back.
func TestScorerKeepsNoWindow(t *testing.T) {
	mem, d, cfg := restartSetup(t, 1500)
	open := func(role Role) *Stage {
		s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.Nop(), Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bl := open(RoleBuilder)
	feed(t, bl, mem, d, 0, 1200, 200)
	bl.Close()
	if n := len(windowFiles(t, bl)); n != 2 { // (its first model's install, its stop)
		t.Fatalf("a builder's stop: %d window files, want 2", n)
	}
	sc := open(RoleScorer)
	defer sc.Close()
	if sc.win.Len() != 0 {
		t.Errorf("a scorer restored %d records", sc.win.Len())
	}
	bl = open(RoleBuilder)
	defer bl.Close()
	if bl.win.Len() != 1200 {
		t.Errorf("a builder restored %d records, want 1,200", bl.win.Len())
	}
}

// TestHeldWindowNotSaved: a stop before the first model under before_model: hold saves no window:
// its records were held, never passed on nor committed, and are read again after the restart;
// saved, each would be in the window twice and the first model, built once the window holds
// min_records, would be built from fewer distinct records.
func TestHeldWindowNotSaved(t *testing.T) {
	mem, d, cfg := restartSetup(t, 1000)
	a := newTestStage(t, cfg)
	feed(t, a, mem, d, 0, 600, 200) // held: min_records is 1,000
	if _, err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n := len(windowFiles(t, a)); n != 0 {
		t.Errorf("%d window files after a stop with every record held, want none", n)
	}
	b := newTestStage(t, cfg)
	if b.win.Len() != 0 {
		t.Errorf("%d records restored, want none", b.win.Len())
	}
}

// TestWindowCopyLeavesOutBatchesInFlight: a periodic save while batches are in flight (overlap.go:
// the oldest pushed, its verdicts not decided, so an outcast among them not marked yet; the
// others pushed once it is) copies the window without them: the saved window ends before the
// oldest record in flight, its stream index and trigger counts with it. Failed before the cut:
// 1,500 held (the oldest batch in flight's 250 among them), want 1,250.
func TestWindowCopyLeavesOutBatchesInFlight(t *testing.T) {
	mem := checkedMem(t)
	d := testData(2500, 6)
	cfg := overlapConfig()
	s, err := NewStage(cfg, d.Features, true, Deps{Log: zerolog.Nop(), Accelerator: &fakeAccel{exact: true}, Overlap: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feed(t, s, mem, d, 0, 2000, 250)
	if len(s.flight) == 0 {
		t.Fatal("setup: no batch in flight")
	}
	inFlight := 0
	for _, sc := range s.flight {
		inFlight += sc.b.Len()
	}
	w := s.windowCopy()
	if w.held() != 2000-inFlight || w.pushed != uint64(2000-inFlight) || len(w.cols[0]) != w.held() || len(w.sds[0]) != w.held() ||
		len(w.sig) != w.held() || w.offs[w.held()-1] != int64(2000-inFlight-1) {
		t.Errorf("copy with %d records in flight: %d held to offset %d, pushed %d; want the %d decided", inFlight, w.held(),
			w.offs[w.held()-1], w.pushed, 2000-inFlight)
	}
	out, err := s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range out {
		b.Record.Release()
	}
	if w = s.windowCopy(); w.held() != 2000 {
		t.Errorf("copy after the drain: %d records, want 2,000", w.held())
	}
}

// TestStopDeadlineCutsTheWindowSave: the stop's window save is bounded by its deadline
// (run.shutdown_timeout), as the keys' state's: past it the window is not saved (logged), the
// last complete file stands, and the next start loads it.
func TestStopDeadlineCutsTheWindowSave(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	a := stopAfter(t, cfg, mem, d, 1500, 250)
	before := windowFiles(t, a)

	b, logs := loggedStage(t, cfg)
	feed(t, b, mem, d, 1500, 1800, 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // (the deadline passed during the drain)
	b.CloseContext(ctx)
	if !strings.Contains(logs.String(), "window not saved: the stop's deadline") {
		t.Errorf("log %q: want the window's save said cut", logs.String())
	}
	if after := windowFiles(t, b); !slices.Equal(after, before) {
		t.Errorf("window files %v after a cut save, want %v", after, before)
	}
	c := newTestStage(t, cfg)
	if c.win.Len() != 1500 || newestOffset(c) != 1499 {
		t.Errorf("the start after a cut save: %d records, want the last complete save's 1,500 (to offset 1,499)", c.win.Len())
	}
}

// TestRestartWithAnOlderModelRebuildsAtOnce: when the model snapshot that loads is not the one
// that served at the window's save (here a config rolled back to k 10: the newest snapshot, of k
// 12, does not fit, the one before it loads), the triggers saved with the window are not its:
// the first batch rebuilds from the restored window.
func TestRestartWithAnOlderModelRebuildsAtOnce(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	a := newTestStage(t, cfg)
	feed(t, a, mem, d, 0, 1500, 250)
	next := cfg
	next.Distance.K = 12
	if _, err := a.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	a.collect(true)
	if a.Model().Version != 2 {
		t.Fatalf("setup: version %d after the reload, want 2", a.Model().Version)
	}
	a.Close()

	b := newTestStage(t, cfg) // (k 10 again)
	if b.Model() == nil || b.Model().Version != 1 || !b.ext.rebuildDue || b.win.Len() != 1500 {
		t.Fatalf("start: model %v, rebuild due %v, %d records; want version 1 loaded, a rebuild due, the 1,500 saved", b.Model(), b.ext.rebuildDue, b.win.Len())
	}
	feed(t, b, mem, d, 1500, 1600, 100)
	b.collect(true)
	if m := b.Model(); m.Version != 2 || m.Params.K != 10 || m.WindowRecords != 1600 {
		t.Errorf("after the first batch: version %d, k %d, of %d records; want a rebuild (k 10) from the 1,600", m.Version, m.Params.K, m.WindowRecords)
	}
}
