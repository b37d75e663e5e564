package detect

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// BenchmarkKeysStopSave is the keys' state save a stop makes (Close's saveKeys(true): the keys'
// and alarm state copied, encoded, written and synced to state_dir) at OUTLIERD_BENCH_SAVE_KEYS
// warm keys (default 100,000; 3 features, keyedConfig's keys' settings), the time an operator's
// run.shutdown_timeout must leave it after the drain. One op is one save; each op's time, the
// median and the keys' file's size are logged, then one save's parts (copy, encode, checksum
// and write, fsync, and the digest that tells an unchanged state), then a stop's save of the
// state as the last save left it (copied and digested, not written). state_dir is
// OUTLIERD_BENCH_STATE_DIR (the disk a deployment's is on) or a temporary directory.
//
//	go test ./stages/detect -run '^$' -bench KeysStopSave -benchtime 3x -timeout 30m
func BenchmarkKeysStopSave(b *testing.B) {
	keys := 100_000
	if n, ok := benchCount(b, "OUTLIERD_BENCH_SAVE_KEYS", 1); ok {
		keys = n
	}
	cfg := keyedConfig()
	cfg.StateDir = b.TempDir()
	if d := os.Getenv("OUTLIERD_BENCH_STATE_DIR"); d != "" {
		var err error
		if cfg.StateDir, err = os.MkdirTemp(d, "keysave"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(cfg.StateDir) })
	}
	kb := newKeyedBench(b, cfg, keys, nil, 0)
	s := kb.s
	s.ext.saves.Wait() // (the saves made while the bench stage was fed)
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		s.ext.saved.set(&s.ext.saved.keys, 0, "") // (each op a whole save: the state is the one saved before)
		s.ext.saved.set(&s.ext.saved.alarms, 0, "")
		t0 := time.Now()
		s.saveKeys(true)
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	files, err := s.ext.snaps.list(keysPrefix)
	if err != nil || len(files) == 0 {
		b.Fatalf("keys' state files %v (%v)", files, err)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		b.Fatal(err)
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	b.Logf("%d keys: file %d bytes (%.0f a key); saves %v, median %v", keys, fi.Size(), float64(fi.Size())/float64(keys),
		took, sorted[len(sorted)/2].Round(time.Millisecond))
	b.ReportMetric(float64(fi.Size()), "file_bytes")

	// One save's parts, as saveKeys and SnapshotDir.saveAs make them.
	t0 := time.Now()
	states, fleet := s.keyed.keysCopy(), s.keyed.fleet.fleetCopy()
	copied := time.Since(t0)
	t0 = time.Now()
	payload, err := encodeKeyStatesContext(context.Background(), states, fleet, s.series.pos, s.features, &s.cfg)
	if err != nil {
		b.Fatal(err)
	}
	encoded := time.Since(t0)
	f, err := os.CreateTemp(cfg.StateDir, ".parts.tmp*")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	t0 = time.Now()
	if err := keysSnapshotFile.WriteContext(context.Background(), f, KeysSnapshotFormat, payload); err != nil {
		b.Fatal(err)
	}
	written := time.Since(t0)
	t0 = time.Now()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	synced := time.Since(t0)
	t0 = time.Now()
	s.keysDigest(len(states), eachOf(states), fleet, s.series.pos)
	digested := time.Since(t0)
	b.Logf("one save's parts: copy %v, encode %v, checksum and write %v, fsync %v; the digest that tells an unchanged state (keyed_unchanged.go) %v",
		copied.Round(time.Millisecond), encoded.Round(time.Millisecond), written.Round(time.Millisecond), synced.Round(time.Millisecond),
		digested.Round(time.Millisecond))
	// A stop that finds the state as the last save left it (a stop right after a start, as the
	// start's load leaves it): copied and digested, not written.
	t0 = time.Now()
	s.saveKeys(true)
	unchanged := time.Since(t0)
	if after, err := s.ext.snaps.list(keysPrefix); err != nil || !slices.Equal(after, files) {
		b.Fatalf("a save of the unchanged state wrote %v (%v), want %v", after, err, files)
	}
	b.Logf("a stop's save of the unchanged state: %v", unchanged.Round(time.Millisecond))
}
