package detect

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// feedFleet runs rows[lo:hi] (offsets = their index, partitions by key: fleetPartition)
// through s in batches of 500 and returns their scores in order.
func feedFleet(t *testing.T, s *Stage, mem memory.Allocator, rows []fleetRow, lo, hi int) []batch.Score {
	t.Helper()
	return feedRows(t, s, mem, rows, lo, hi, atRow, fleetPartition)
}

// fleetPartition is a fleet key's partition: its last digit mod 3.
func fleetPartition(key string) int32 { return int32(key[len(key)-1]-'0') % 3 }

func newFleetStage(t *testing.T, cfg Config, features []string) *Stage {
	t.Helper()
	return newFleetStageOn(t, cfg, features, nil)
}

// keyedTwinAccel is fakeAccel (the CPU's verdicts) that keeps the keys' models on the keyed
// kernels' CPU twin (keyed_device_test.go), as a GPU does.
type keyedTwinAccel struct {
	fakeAccel
	twins []*twinKeyed
}

func (a *keyedTwinAccel) KeyedModels(dims, window int) (KeyedModels, error) {
	tw := newTwinKeyed(window)
	a.twins = append(a.twins, tw)
	return tw, nil
}

func newFleetStageOn(t *testing.T, cfg Config, features []string, accel Accelerator) *Stage {
	t.Helper()
	s, err := NewStage(cfg, features, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)), Accelerator: accel})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKeyedStateSurvivesRestart (issue 21 item 3): a restarted stage with key_by and state_dir
// resumes every key: the keys warm at the stop are warm at once after it, and every record that
// the uninterrupted stream scores by its key's model gets the same score and verdict after the
// restart (each key's window, significance bits, alarm cap and model come back whole). Before,
// every key started cold after a restart, scored by the global model for keys.min_records
// records.
func TestKeyedStateSurvivesRestart(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { keyedRestart(t, nil) })
	// The keys' models loaded go to the device at once (the kernels' CPU twin here), and score
	// there as they did before the stop.
	t.Run("device", func(t *testing.T) {
		a := &keyedTwinAccel{fakeAccel: fakeAccel{exact: true}}
		keyedRestart(t, a)
		if len(a.twins) != 2 || len(a.twins[1].models) != 40 || a.twins[1].scores == 0 {
			t.Fatalf("device stores %d; the restarted stage's holds %d models and scored %d times: want the 40 keys' models loaded onto it and scoring",
				len(a.twins), len(a.twins[len(a.twins)-1].models), a.twins[len(a.twins)-1].scores)
		}
	})
}

func keyedRestart(t *testing.T, accel Accelerator) {
	rows := fleet(40, 24000, 0.003, 3)
	const cut = 12000
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)

	ref := newFleetStage(t, keyedConfig(), []string{"value"})
	want := feedFleet(t, ref, mem, rows, 0, len(rows))
	ref.Close()

	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	a := newFleetStageOn(t, cfg, []string{"value"}, accel)
	feedFleet(t, a, mem, rows, 0, cut)
	warmAtStop := a.KeyStats()
	a.Close() // the keys' state is written at the stop
	if warmAtStop.Live != 40 {
		t.Fatalf("%d keys warm at the stop, want all 40", warmAtStop.Live)
	}

	b := newFleetStageOn(t, cfg, []string{"value"}, accel)
	defer b.Close()
	if st := b.KeyStats(); st.Live != warmAtStop.Live || st.Warming != warmAtStop.Warming || st.Bytes != warmAtStop.Bytes {
		t.Fatalf("after the restart: %+v, want the keys as they were at the stop: %+v", st, warmAtStop)
	}
	got := feedFleet(t, b, mem, rows, cut, len(rows))
	byKey, flagged := 0, 0
	for i, w := range want[cut:] {
		g := got[i]
		if !w.ByKey {
			continue
		}
		byKey++
		if w.Outlier {
			flagged++
		}
		if !g.ByKey || g.Score != w.Score || g.Outlier != w.Outlier || g.Suppressed != w.Suppressed {
			t.Fatalf("record %d (%s) after the restart: by key %v, score %v, outlier %v, suppressed %v; without the restart: score %v, outlier %v, suppressed %v",
				cut+i, rows[cut+i].key, g.ByKey, g.Score, g.Outlier, g.Suppressed, w.Score, w.Outlier, w.Suppressed)
		}
	}
	if byKey != len(rows)-cut || flagged == 0 {
		t.Fatalf("%d of %d records after the restart scored by their key's model (%d flagged), want all and some flagged", byKey, len(rows)-cut, flagged)
	}
	t.Logf("%d keys resumed warm; %d records after the restart scored as without it, %d flagged", warmAtStop.Live, byKey, flagged)
}

// TestKeyedStateRefused: a keys' state written for other features or other keys' settings, or
// corrupt, is refused with the reason (logged, skipped, as the global snapshots): the keys
// start cold, and the newest file that fits is the one taken.
func TestKeyedStateRefused(t *testing.T) {
	rows := fleet(10, 3000, 0, 4)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	a := newFleetStage(t, cfg, []string{"value"})
	feedFleet(t, a, mem, rows, 0, len(rows))
	a.Close()
	files, err := a.ext.snaps.list(keysPrefix)
	if err != nil || len(files) == 0 {
		t.Fatalf("keys' state files %v, %v: want the one of the stop", files, err)
	}
	for _, f := range files[1:] { // (the one of the first global model: cold keys)
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	other := cfg
	other.Keys.Window = 100
	other.Keys.MinRecords = 25
	for _, c := range []struct {
		name     string
		cfg      Config
		features []string
		want     error
		reason   string
	}{
		{"keys.window", other, []string{"value"}, ErrSnapshotMismatch, "other settings (keys.window 200 -> 100)"},
		{"features", cfg, []string{"reading"}, ErrSnapshotMismatch, "built for features [value], the stream has [reading]"},
	} {
		s := newFleetStage(t, c.cfg, c.features)
		sk := s.SkippedKeys()
		s.ext.saves.Wait()
		if st := s.KeyStats(); st.Live+st.Warming != 0 || len(sk) != 1 || !errors.Is(sk[0].Reason, c.want) || !strings.Contains(sk[0].Reason.Error(), c.reason) {
			t.Errorf("%s: keys %+v, skipped %v: want the file refused for %q", c.name, st, sk, c.reason)
		}
		s.ext.snaps = nil // (not saved at its Close: the file stays the only one)
		s.Close()
	}

	// Corrupt: one byte flipped; the stage starts cold and says why.
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x40
	bad := filepath.Join(cfg.StateDir, "keys-09999999999999999999.osnap")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newFleetStage(t, cfg, []string{"value"})
	sk := s.SkippedKeys()
	st := s.KeyStats()
	s.ext.snaps = nil
	s.Close()
	if len(sk) != 1 || sk[0].Path != bad || !errors.Is(sk[0].Reason, ErrSnapshotFormat) || !strings.Contains(sk[0].Reason.Error(), "checksum") {
		t.Fatalf("skipped %v, want the corrupt newest file refused by its checksum", sk)
	}
	if st.Live != 10 { // the older, intact file serves
		t.Fatalf("keys %+v after skipping the corrupt file, want the 10 warm keys of the intact one", st)
	}
}

// TestKeyModelMessage: a key's model as the model topic carries it reads back scoring exactly as
// it was built, and is refused for other features or keys' settings, or when cut or corrupt.
func TestKeyModelMessage(t *testing.T) {
	rows := fleet(3, 3000, 0, 5)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	s := newFleetStage(t, cfg, []string{"value"})
	feedFleet(t, s, mem, rows, 0, len(rows))
	defer s.Close()
	r, _ := s.KeyModelOf("sensor-001")
	if r == nil {
		t.Fatal("sensor-001 has no model")
	}
	v, err := EncodeKeyModel([]string{"value"}, &cfg, "sensor-001", 77, r)
	if err != nil {
		t.Fatal(err)
	}
	if bound := KeyModelBound([]string{"value"}, &cfg, len("sensor-001")); len(v) > bound || len(v) < bound*3/4 {
		t.Errorf("a key's model of a full window takes %d bytes, KeyModelBound says %d: want a bound, and a close one", len(v), bound)
	}
	// A model built under score.weights agreement and sent after a reload to equal (a live
	// change: the keys' models rebuild later) still fits the bound of the configuration now.
	eq := cfg
	eq.Score.Weights = WeightsEqual
	if v2, err := EncodeKeyModel([]string{"value"}, &eq, "sensor-001", 77, r); err != nil || len(v2) > KeyModelBound([]string{"value"}, &eq, len("sensor-001")) {
		t.Errorf("a key's model built under score.weights %s takes %d bytes (%v) under equal, KeyModelBound says %d", r.Params.Weights, len(v2), err, KeyModelBound([]string{"value"}, &eq, len("sensor-001")))
	}
	t.Logf("a key's model of a full window (%d records, 1 feature): %d bytes on the model topic", cfg.Keys.Window, len(v))
	// A format-1 message (written before the weights: the same payload without them) reads
	// back as built with equal weights, and scores as the plain mean did.
	if _, p, err := keyModelFile.Read(bytes.NewReader(v)); err != nil {
		t.Fatal(err)
	} else {
		var b bytes.Buffer
		if err := keyModelFile.Write(&b, 1, p[:len(p)-(4+len(r.Params.Weights)+16)]); err != nil {
			t.Fatal(err)
		}
		_, _, old, err := DecodeKeyModel(b.Bytes(), []string{"value"}, &cfg)
		if err != nil || old.Params.Weights != WeightsEqual || old.DensityWeight != 0.5 || old.DistanceWeight != 0.5 {
			t.Fatalf("a format-1 key's model: %v (%+v)", err, old)
		}
		for _, x := range []float32{rows[0].value, rows[0].value + 50} { // (one feature: built with equal weights)
			if a, b := r.ScoreRecord([]float32{x}), old.ScoreRecord([]float32{x}); a != b {
				t.Errorf("score of %v: %v built, %v read back from format 1", x, a, b)
			}
		}
	}
	key, version, back, err := DecodeKeyModel(v, []string{"value"}, &cfg)
	if err != nil || key != "sensor-001" || version != 77 {
		t.Fatalf("decoded %q version %d, %v", key, version, err)
	}
	for _, x := range []float32{rows[0].value, rows[0].value + 50, -1e30} {
		if a, b := r.ScoreRecord([]float32{x}), back.ScoreRecord([]float32{x}); a != b {
			t.Errorf("score of %v: %v built, %v read back", x, a, b)
		}
	}
	other := cfg
	other.Keys.K = 5
	if _, _, _, err := DecodeKeyModel(v, []string{"value"}, &other); !errors.Is(err, ErrSnapshotMismatch) || !strings.Contains(err.Error(), "keys.k 10 -> 5") {
		t.Errorf("keys.k changed: %v, want a mismatch naming keys.k", err)
	}
	if _, _, _, err := DecodeKeyModel(v, []string{"temp"}, &cfg); !errors.Is(err, ErrSnapshotMismatch) {
		t.Errorf("other features: %v, want a mismatch", err)
	}
	if _, _, _, err := DecodeKeyModel(v[:len(v)-40], []string{"value"}, &cfg); !errors.Is(err, ErrSnapshotFormat) {
		t.Errorf("cut short: %v, want a format error", err)
	}
}

// TestKeysStateAcrossMinRecords: keys.min_records decides when a cold key's first model is built,
// nothing of a model: a keys' state written under another value (the default was 50, then 40,
// now 30: a deployment that never set it) is loaded, and a key's model on the model topic
// installed, rather than every key starting cold at the upgrade (a scorer updated first, as
// OPERATIONS asks, refused every model of the builder not yet updated). A key held cold with
// at least the new keys.min_records builds at its next record.
func TestKeysStateAcrossMinRecords(t *testing.T) {
	rows := fleet(40, 1800, 0, 3) // about 35 readings a key at the stop, 45 at the end
	const cut = 1400
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	old := keyedConfig()
	old.StateDir, old.Keys.MinRecords = t.TempDir(), 40
	a := newFleetStage(t, old, []string{"value"})
	feedFleet(t, a, mem, rows, 0, cut)
	atStop := a.KeyStats()
	var key string
	for k := range a.KeyVersions() {
		key = k
	}
	r, _ := a.KeyModelOf(key)
	a.Close()
	if atStop.Live == 0 || atStop.Warming == 0 {
		t.Fatalf("keys at the stop %+v: want some warm and some cold", atStop)
	}

	cfg := old
	cfg.Keys.MinRecords = 30
	b := newFleetStage(t, cfg, []string{"value"})
	defer b.Close()
	if st, sk := b.KeyStats(), b.SkippedKeys(); len(sk) != 0 || st.Live != atStop.Live || st.Warming != atStop.Warming {
		t.Fatalf("keys %+v after the restart at keys.min_records 30 (skipped %v), want those of the stop at 40: %+v", st, sk, atStop)
	}
	feedFleet(t, b, mem, rows, cut, len(rows))
	seen, enough := map[string]int{}, 0
	for _, row := range rows {
		if seen[row.key]++; seen[row.key] == 30 {
			enough++
		}
	}
	if st := b.KeyStats(); st.Live != enough {
		t.Errorf("%d keys warm, want the %d with 30 readings or more", st.Live, enough)
	}
	v, err := EncodeKeyModel([]string{"value"}, &old, key, 3, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, back, err := DecodeKeyModel(v, []string{"value"}, &cfg); err != nil || back.ScoreRecord([]float32{rows[0].value}) != r.ScoreRecord([]float32{rows[0].value}) {
		t.Errorf("a key's model sent at keys.min_records 40, read at 30: %v", err)
	}
}

// TestKeyedReloadOfScoreDetectors: score.detectors and score.combine shape a key's model as
// keys.k does (the keys' state's header and each key's model carry them: checkKeyHeader,
// checkKeyRanker), but a reload took them as rebuild keys under key_by: the keys built before
// it kept their models of the old settings beside those built after, and the keys' state saved
// from then on was refused whole at the next start (every key cold), as a builder's keys'
// models were by its scorers. A reload of them under key_by is refused, as keys.k's is, or
// leaves a state that loads.
func TestKeyedReloadOfScoreDetectors(t *testing.T) {
	rows := fleet(10, 2010, 0, 4)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	a := newFleetStage(t, cfg, []string{"value"})
	feedFleet(t, a, mem, rows, 0, 2000)
	next := cfg
	next.Score.Detectors = DetectorsDensity
	_, err := a.Reconfigure(next)
	if err != nil {
		a.Close()
		if !strings.Contains(err.Error(), "score.detectors") {
			t.Fatalf("reload refused, not naming score.detectors: %v", err)
		}
		return
	}
	feedFleet(t, a, mem, rows, 2000, len(rows)) // (a stop soon after the reload: few keys built since)
	atStop := a.KeyStats()
	a.Close()
	b := newFleetStage(t, next, []string{"value"})
	defer b.Close()
	if st := b.KeyStats(); atStop.Live == 0 || st.Live != atStop.Live {
		t.Fatalf("reload of score.detectors accepted; after a restart with it %d keys warm, %d at the stop", st.Live, atStop.Live)
	}
}
