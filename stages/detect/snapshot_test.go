package detect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/core/atomicfile"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// testConfig is small enough that a model builds in tens of milliseconds on 2 cores, and
// never refreshes on its own (the tests decide when builds happen).
func testConfig() Config {
	c := Default()
	c.Window, c.MinRecords, c.RefreshRecords, c.RecalibrateRecords, c.RefreshInterval = 2000, 1000, 1<<30, 1<<30, time.Hour
	c.Density.Clusters, c.Density.Iterations, c.Density.Samples = 20, 2, 100
	c.Distance.K, c.Distance.N, c.Distance.M = 10, 20, 50
	c.FlagBy = FlagByVerdicts // these tests follow the paper's verdicts; calibrate_test.go the rate
	return c
}

// testData is synthetic uncertain data (ALGORITHMS.md §2 'one') in 3 dimensions.
func testData(rows int, seed uint64) *synth.Data {
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims, p.Seed = rows, 3, seed
	return synth.One(p)
}

// makeBatch builds a batch of rows [lo, hi) of d with feature (and, when withSD, uncertainty)
// columns and the source coordinates the stage reads: partition 0, offset = the row, so a
// record's identity (and its density stream) is its row.
func makeBatch(t testing.TB, mem memory.Allocator, d *synth.Data, lo, hi int, withSD bool) *batch.Batch {
	t.Helper()
	return makeBatchAt(t, mem, d, lo, hi, withSD, int64(lo))
}

// makeBatchAt is makeBatch with the records at offsets first, first+1, ... (rows re-sent as
// new records).
func makeBatchAt(t testing.TB, mem memory.Allocator, d *synth.Data, lo, hi int, withSD bool, first int64) *batch.Batch {
	t.Helper()
	return testbatch.FromColumns(t, mem, "t", d.Features, d.Cols, d.SD, withSD, lo, hi, first)
}

// feed pushes rows [lo, hi) of d through s in batches of size and releases what comes out.
func feed(t testing.TB, s *Stage, mem memory.Allocator, d *synth.Data, lo, hi, size int) {
	t.Helper()
	for i := lo; i < hi; i += size {
		out, err := s.Process(context.Background(), makeBatch(t, mem, d, i, min(i+size, hi), s.withSD))
		if err != nil {
			t.Fatalf("Process rows %d..: %v", i, err)
		}
		for _, b := range out {
			b.Record.Release()
		}
	}
}

// scoreWith scores rows [lo, hi) of d with s (each record's density stream is its identity,
// the row), without touching the window.
func scoreWith(t testing.TB, s *Stage, mem memory.Allocator, d *synth.Data, lo, hi int) []batch.Score {
	t.Helper()
	b := makeBatch(t, mem, d, lo, hi, s.withSD)
	defer b.Record.Release()
	if err := s.score(b); err != nil {
		t.Fatalf("score: %v", err)
	}
	return b.Scores
}

func newTestStage(t testing.TB, cfg Config) *Stage {
	t.Helper()
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("NewStage: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func buildTestModel(t testing.TB, d *synth.Data, cfg Config) *Model {
	t.Helper()
	m, err := Build(d.Cols, d.SD, d.Features, cfg, 7)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return m
}

func snapshotBytes(t testing.TB, m *Model) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, m); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}

func TestSnapshotRoundTripScoresIdentically(t *testing.T) {
	d := testData(2500, 1)
	m := buildTestModel(t, d, testConfig())
	m.Members = Members{Topic: "sensors", Ranges: []PartitionRange{{0, 10, 900}, {3, 0, 0}, {7, 1 << 40, 1<<40 + 5}}}
	got, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, m)))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if !got.BuiltAt.Equal(m.BuiltAt) {
		t.Errorf("BuiltAt %v, want %v", got.BuiltAt, m.BuiltAt)
	}
	got.BuiltAt = m.BuiltAt // the location differs (UTC); the instant is checked above
	// The density model's caches are built lazily: compare it by behaviour below, the rest whole.
	gd, md := got.Density, m.Density
	got.Density, m.Density = nil, nil
	if !reflect.DeepEqual(got, m) {
		t.Errorf("model fields differ after the round trip:\n got %+v\nwant %+v", got, m)
	}
	got.Density, m.Density = gd, md
	if !slices.Equal(gd.H, md.H) || gd.N != md.N {
		t.Errorf("density H/N %v/%d, want %v/%d", gd.H, gd.N, md.H, md.N)
	}

	// Scores: bit-identical verdicts, eta-probabilities and weights (exact equality: the same
	// float arithmetic on the same inputs).
	q := testData(500, 99)
	nm, ns := m.normalised(q.Cols, q.SD, nil)
	mode, _ := density.ParseMode("independent")
	p := density.Params{Eta: 0.5, Delta: 0.5, Samples: 100, Mode: mode, Seed: 3, Exact: true}
	for _, pair := range []struct{ a, b *Model }{{m, got}} {
		va, vb := make([]density.Verdict, 500), make([]density.Verdict, 500)
		if err := pair.a.Density.DetectRecords(nm, ns, p, va); err != nil {
			t.Fatal(err)
		}
		if err := pair.b.Density.DetectRecords(nm, ns, p, vb); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(va, vb) {
			t.Error("density verdicts differ after the round trip")
		}
		wa, wb := make([]float64, 500), make([]float64, 500)
		pair.a.Distance.ScoreBatch(nm, wa, 1)
		pair.b.Distance.ScoreBatch(nm, wb, 1)
		if !slices.Equal(wa, wb) {
			t.Error("solving-set weights differ after the round trip")
		}
		flagged := 0
		for _, v := range va {
			if v.Outlier {
				flagged++
			}
		}
		if flagged == 0 || flagged == len(va) {
			t.Errorf("%d of %d flagged: the comparison would not discriminate", flagged, len(va))
		}
	}
}

func TestReadSnapshotRefusesDamage(t *testing.T) {
	good := snapshotBytes(t, buildTestModel(t, testData(1500, 2), testConfig()))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: 0 of 20 header bytes"},
		{"truncated header", good[:10], "truncated: 10 of 20 header bytes"},
		{"truncated body", good[:len(good)-100], "truncated"},
		{"flipped payload byte", mut(func(b []byte) []byte { b[500] ^= 1; return b }), "checksum mismatch"},
		{"flipped checksum byte", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum mismatch"},
		{"wrong magic", mut(func(b []byte) []byte { b[1] = 'X'; return b }), "wrong magic"},
		{"solving-set file", mut(func(b []byte) []byte { return append([]byte("\x89OSSM\r\n\x1a"), b[8:]...) }), "wrong magic"},
		{"newer version", mut(func(b []byte) []byte { b[8] = SnapshotFormat + 1; return b }), "newer than the newest"},
		{"version 0", mut(func(b []byte) []byte { b[8] = 0; return b }), "version 0"},
		{"trailing bytes", append(bytes.Clone(good), 0), "trailing bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadSnapshot(bytes.NewReader(c.data))
			if !errors.Is(err, ErrSnapshotFormat) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrSnapshotFormat with %q", err, c.want)
			}
		})
	}
}

// writeFile writes a snapshot file with a given sequence number.
func writeFile(t *testing.T, dir string, seq int, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, "model-"+strings.Repeat("0", 19)+string(rune('0'+seq))+".osnap")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadNewestSkipsDamagedAndMismatched(t *testing.T) {
	d := testData(1500, 3)
	cfg := testConfig()
	good := buildTestModel(t, d, cfg)
	otherK := cfg
	otherK.Distance.K = 5
	badK := buildTestModel(t, d, otherK)
	goodB := snapshotBytes(t, good)

	dir := t.TempDir()
	writeFile(t, dir, 1, goodB)                  // the newest valid one: chosen
	writeFile(t, dir, 0, snapshotBytes(t, good)) // older valid one: not reached
	writeFile(t, dir, 2, goodB[:len(goodB)/2])   // truncated
	writeFile(t, dir, 3, snapshotBytes(t, badK)) // built with another k
	corrupt := bytes.Clone(goodB)
	corrupt[len(corrupt)/3] ^= 0x40
	writeFile(t, dir, 4, corrupt)                                     // corrupt
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644) // not a snapshot: ignored

	sd, err := OpenSnapshotDir(dir, 3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ld, err := sd.LoadNewest(good.Features, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ld.Model == nil || filepath.Base(ld.Path) != "model-00000000000000000001.osnap" {
		t.Fatalf("loaded %q, want the newest valid snapshot (seq 1)", ld.Path)
	}
	if ld.Model.Version != good.Version || ld.Model.Distance.WStar != good.Distance.WStar {
		t.Errorf("loaded version %d w* %v, want %d %v", ld.Model.Version, ld.Model.Distance.WStar, good.Version, good.Distance.WStar)
	}
	wantReasons := []struct {
		seq  string
		want error
		text string
	}{
		{"4", ErrSnapshotFormat, "checksum mismatch"},
		{"3", ErrSnapshotMismatch, "distance.k 5 -> 10"},
		{"2", ErrSnapshotFormat, "truncated"},
	}
	if len(ld.Skipped) != len(wantReasons) {
		t.Fatalf("skipped %v, want %d", ld.Skipped, len(wantReasons))
	}
	for i, w := range wantReasons {
		s := ld.Skipped[i]
		if !strings.HasSuffix(s.Path, w.seq+".osnap") || !errors.Is(s.Reason, w.want) || !strings.Contains(s.Reason.Error(), w.text) {
			t.Errorf("skipped[%d] = %s: %v, want seq %s, %v with %q", i, s.Path, s.Reason, w.seq, w.want, w.text)
		}
	}

	// Other features are refused whatever else fits.
	ld, err = sd.LoadNewest([]string{"x1", "x2", "y"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ld.Model != nil {
		t.Errorf("loaded %s for other features", ld.Path)
	}
	for _, s := range ld.Skipped {
		if errors.Is(s.Reason, ErrSnapshotMismatch) && !strings.Contains(s.Reason.Error(), "features") {
			t.Errorf("%s: %v, want a features mismatch", s.Path, s.Reason)
		}
	}
}

func TestLoadNewestWStarPolicy(t *testing.T) {
	d := testData(1500, 4)
	cfg := testConfig()
	m := buildTestModel(t, d, cfg)
	dir := t.TempDir()
	writeFile(t, dir, 0, snapshotBytes(t, m))
	sd, err := OpenSnapshotDir(dir, 3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	smaller := cfg
	smaller.Distance.N = 5
	ld, _ := sd.LoadNewest(m.Features, smaller)
	if ld.Model == nil {
		t.Fatalf("n=5 < 20: want the snapshot with a derived w*, skipped %v", ld.Skipped)
	}
	// 1500 records of a 2000-record window: n scales to the records (EffectiveN).
	eff5, eff20 := EffectiveN(5, cfg.Window, m.WindowRecords), EffectiveN(20, cfg.Window, m.WindowRecords)
	if ld.Model.Distance.WStar != m.TopWeights[eff5-1] || ld.Model.Distance.WStar <= m.Distance.WStar {
		t.Errorf("w* for n=5 is %v, want TopWeights[%d] = %v (> w* for n=20 = %v)", ld.Model.Distance.WStar, eff5-1, m.TopWeights[eff5-1], m.Distance.WStar)
	}
	if m.Distance.WStar != m.TopWeights[eff20-1] {
		t.Errorf("as built, w* %v != TopWeights[%d] %v", m.Distance.WStar, eff20-1, m.TopWeights[eff20-1])
	}
	larger := cfg
	larger.Distance.N = 2*len(m.TopWeights) + 2
	if ld, _ = sd.LoadNewest(m.Features, larger); ld.Model != nil || len(ld.Skipped) != 1 || !errors.Is(ld.Skipped[0].Reason, ErrSnapshotMismatch) {
		t.Errorf("n beyond the known weights: loaded %v, skipped %v; want a mismatch", ld.Model != nil, ld.Skipped)
	}
}

func TestSnapshotDirSaveKeepsNewest(t *testing.T) {
	m := buildTestModel(t, testData(1200, 5), testConfig())
	dir := t.TempDir()
	stale := filepath.Join(dir, ".model-00000000000000000009.osnap.tmp123")
	os.WriteFile(stale, []byte("half"), 0o644)
	sd, err := OpenSnapshotDir(dir, 3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a crash's temporary file survived Open: %v", err)
	}
	for v := uint64(1); v <= 5; v++ {
		c := *m
		c.Version = v
		if _, err := sd.Save(&c); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := sd.List()
	if len(files) != 3 {
		t.Fatalf("%d files kept, want 3: %v", len(files), files)
	}
	for i, f := range files {
		got, err := ReadSnapshotFile(f)
		if err != nil || got.Version != uint64(5-i) {
			t.Errorf("%s: version %v err %v, want %d", f, got, err, 5-i)
		}
	}
	// A reopened directory continues the sequence: the next save is the newest.
	sd2, _ := OpenSnapshotDir(dir, 3, zerolog.Nop())
	c := *m
	c.Version = 1 // versions restart when no snapshot fits; the sequence does not
	p, err := sd2.Save(&c)
	if err != nil {
		t.Fatal(err)
	}
	if files, _ = sd2.List(); files[0] != p || len(files) != 3 {
		t.Errorf("after reopening, newest %s (of %d), want %s", files[0], len(files), p)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestStageResumesFromSnapshot: a state_dir without a window file (of a release before it) loads
// as before: the snapshot's model serves until the window holds min_records, then a model of
// the stream replaces it.
func TestStageResumesFromSnapshot(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	d := testData(4000, 6)
	cfg := testConfig()
	cfg.StateDir = t.TempDir()

	a := newTestStage(t, cfg)
	feed(t, a, mem, d, 0, 1500, 250) // hold: the first model is built at 1000 records
	if a.Model() == nil || a.Model().Version != 1 {
		t.Fatalf("stage a: model %v, want version 1", a.Model())
	}
	a.Close() // waits for the snapshot write
	files, _ := a.ext.snaps.List()
	if len(files) != 1 {
		t.Fatalf("%d snapshots after one model, want 1", len(files))
	}
	// A state_dir of a release before the window file: the window starts empty
	// (TestRestartRebuildsFromTheRestoredWindow: with it).
	removeWindowFiles(t, cfg.StateDir)

	b := newTestStage(t, cfg)
	if b.Model() == nil || b.Model().Version != 1 {
		t.Fatalf("stage b did not resume from the snapshot: %v", b.Model())
	}
	// The same records at the same stream index score identically on both stages, their recent
	// scores too: the stream's recent past is saved with the alarm state (recent_state.go; before,
	// a resumed stage started it empty and a's was emptied here to match).
	sa := scoreWith(t, a, mem, d, 3000, 3400)
	sb := scoreWith(t, b, mem, d, 3000, 3400)
	if !reflect.DeepEqual(sa, sb) {
		t.Error("scores differ between the stage that built the model and the one that loaded it")
	}
	// The first batch after a restart is scored at once (hold would otherwise wait for 1000).
	out, err := b.Process(context.Background(), makeBatch(t, mem, d, 1500, 1600, true))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].ModelVersion != 1 || !out[0].Scores[0].Scored {
		t.Fatalf("first batch after restart: %d batches out, want 1 scored by version 1", len(out))
	}
	out[0].Record.Release()
	if b.builds.running {
		t.Error("a rebuild started before the window holds min_records")
	}
	// Once the window holds min_records, a model of the current stream replaces the snapshot.
	feed(t, b, mem, d, 1600, 2600, 250)
	b.collect(true)
	if b.Model().Version != 2 {
		t.Errorf("version %d after the window filled, want 2 (rebuilt from the stream)", b.Model().Version)
	}
	b.Close()
	if files, _ = b.ext.snaps.List(); len(files) != 2 {
		t.Errorf("%d snapshots, want 2", len(files))
	}
}

func TestStageSkipsCorruptSnapshotAtStart(t *testing.T) {
	cfg := testConfig()
	cfg.StateDir = t.TempDir()
	writeFile(t, cfg.StateDir, 0, []byte("\x89ODSN\r\n\x1a garbage"))
	s := newTestStage(t, cfg)
	if s.Model() != nil {
		t.Fatal("a corrupt snapshot was loaded")
	}
	// An unusable directory is an error: the configuration asks for snapshots.
	cfg.StateDir = filepath.Join(cfg.StateDir, "model-00000000000000000000.osnap", "sub")
	if _, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.Nop()}); err == nil {
		t.Error("NewStage with a state_dir below a file: want an error")
	}
}

// TestSnapshotDirSyncCutKeepsTheOlder: a save whose directory fsync the stop's deadline cut
// (atomicfile.Write's DirSync) has its new file complete and in place, but perhaps not durable:
// the save returns it, the log says what was cut, and the older files stay past keep (a power
// loss could lose the new file's rename); the next save whose fsync ends prunes them.
func TestSnapshotDirSyncCutKeepsTheOlder(t *testing.T) {
	m := buildTestModel(t, testData(1200, 5), testConfig())
	var logs testsupport.LogBuffer
	sd, err := OpenSnapshotDir(t.TempDir(), 1, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	save := func(v uint64) string {
		t.Helper()
		c := *m
		c.Version = v
		p, err := sd.Save(&c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := save(1)
	sd.write = func(ctx context.Context, path string, write func(io.Writer) error) (atomicfile.Written, error) {
		w, err := atomicfile.Write(ctx, path, write)
		w.DirSync = fmt.Errorf("%w (%w)", atomicfile.ErrDirSyncCut, context.DeadlineExceeded)
		return w, err
	}
	cut := save(2)
	if files, _ := sd.List(); !slices.Equal(files, []string{cut, first}) {
		t.Errorf("after a save whose directory fsync was cut: %v, want the new file and the older one %v", files, []string{cut, first})
	}
	if got, err := ReadSnapshotFile(cut); err != nil || got.Version != 2 {
		t.Errorf("the cut save's file: %v, %v; want it whole", got, err)
	}
	if len(logs.Lines("fsync of the snapshot directory cut by the stop's deadline", cut)) != 1 {
		t.Errorf("the log does not say the directory's fsync was cut:\n%s", logs.String())
	}
	sd.write = atomicfile.Write
	last := save(3)
	if files, _ := sd.List(); !slices.Equal(files, []string{last}) {
		t.Errorf("after a whole save: %v, want only %s (keep 1)", files, last)
	}
}
