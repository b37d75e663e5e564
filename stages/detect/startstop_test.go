package detect

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestNewStageContextCutsTheSnapshotLoad: a stop during the start (the context of
// pipeline.New) did not cut the load of detect.state_dir's keys' state: NewStage took no context,
// and the load (about 1.3 GB at 100,000 keys: read, checksummed, decoded) ran to its end before
// the process could exit. Cancelled a tenth of the way into the load, NewStageContext must return
// the context's error well before the load's time, without taking the file for a bad one (no
// "skipped" warning: the next start loads it).
func TestNewStageContextCutsTheSnapshotLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 keys' models")
	}
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	kb := newKeyedBench(t, cfg, 10_000, nil, 0)
	kb.s.Close() // (the stop's save: the keys' state file)
	d, err := OpenSnapshotDir(cfg.StateDir, cfg.Snapshots, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	saved, err := d.list(keysPrefix)
	if err != nil || len(saved) == 0 {
		t.Fatalf("keys' state files %v (%v), want some", saved, err)
	}
	cfg = kb.s.cfg
	load := func(ctx context.Context, log zerolog.Logger) (*Stage, time.Duration, error) {
		t0 := time.Now()
		s, err := NewStageContext(ctx, cfg, kb.s.features, false, Deps{Log: log})
		return s, time.Since(t0), err
	}
	full := time.Duration(1<<63 - 1)
	for range 2 { // the shorter of two whole loads (the machine is shared)
		s, took, err := load(context.Background(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if st := s.KeyStats(); st.Live != 10_000 {
			t.Fatalf("the whole load gave %d warm keys, want 10000", st.Live)
		}
		s.PassedOnDropped() // (Close saves nothing: the files stay those written above)
		s.Close()
		full = min(full, took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(full/10, cancel)
	var logs testsupport.LogBuffer
	s, took, err := load(ctx, zerolog.New(&logs))
	t.Logf("whole load %v; cancelled at %v: returned after %v (%v)", full.Round(time.Millisecond),
		(full / 10).Round(time.Millisecond), took.Round(time.Millisecond), err)
	if !errors.Is(err, context.Canceled) {
		if s != nil {
			s.PassedOnDropped()
			s.Close()
		}
		t.Fatalf("NewStageContext cancelled during the load: %v, want context.Canceled", err)
	}
	if s != nil {
		t.Error("NewStageContext returned a stage with its error")
	}
	if took > full/2 {
		t.Errorf("NewStageContext returned %v after the start, %v after the cancel: the whole load takes %v", took, took-full/10, full)
	}
	if strings.Contains(logs.String(), "skipped") {
		t.Errorf("the cut load took the file for a bad one:\n%s", logs.String())
	}
	if files, err := d.list(keysPrefix); err != nil || !slices.Equal(files, saved) {
		t.Errorf("keys' state files after the cut load %v (%v), want those saved %v", files, err, saved)
	}
}
