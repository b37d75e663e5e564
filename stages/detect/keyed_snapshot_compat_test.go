package detect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
)

// TestKeysSnapshotBeforeFlagRings: a keys' state written before the significance marks and
// alarm flags became bit rings (flagRing; commit 1382615^1) reads back whole. The payload in
// testdata was written by that code (encodeKeyStates of a stage fed rows 0..2000 of the fleet
// below, keys.window 70: two words of bits, every key's window and alarm ring wrapped, some
// flags set). Today's code must decode it, write it back as format 4 (format 2, the stream's
// and caps' positions: 8 bytes more, then 8 a key, and the fleet's pool, empty: 4 bytes), and score the rest of the stream from the
// state read back: the digest is of the scores of rows 2000..3000 of the records its keys'
// models scored (index, score bits, outlier, suppressed). That code wrote the same state from the same rows as today's did, and the digest
// was its scores, until a key's outcasts became its significant records that are also far out
// (keepFarOutcasts, 2026-11-27): since, the models built from a window holding a significant
// record near the others differ, and the digest is today's scores from the state read back (the
// same number by key and significant as that code's, 27).
func TestKeysSnapshotBeforeFlagRings(t *testing.T) {
	old, err := os.ReadFile("testdata/keys_before_flagring.bin")
	if err != nil {
		t.Fatal(err)
	}
	const oldScores = "f96524f37cf1b659b8bedb662dd4b2bd93b78a35981c94fc9ed59e6f75b75181" // (27 significant)
	cfg := keyedConfig()
	cfg.Keys.Window, cfg.Keys.MinRecords = 70, 40
	rows := fleet(4, 3000, 0.03, 5)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := newFleetStage(t, cfg, []string{"value"})
	defer s.Close()
	feedFleet(t, s, mem, rows, 0, 2000)
	s.keysQuiet()
	k := s.newKeyed()
	if _, err := k.decodeKeys(context.Background(), 2, old, s.features, &s.cfg); err != nil {
		t.Fatal(err)
	}
	// Written again (format 4: a stream position, and each key's cap's, none here, and the
	// fleet's pool, empty, besides format 2's): 8 bytes more for the file and each key, 4 for the
	// pool, and it reads back to the same bytes.
	again := encodeKeyStates(k.keysCopy(), k.fleet.fleetCopy(), 0, s.features, &s.cfg)
	k3 := s.newKeyed()
	if _, err := k3.decodeKeys(context.Background(), KeysSnapshotFormat, again, s.features, &s.cfg); err != nil {
		t.Fatal(err)
	}
	if len(again) != len(old)+8+8*len(k.keys)+4 || !bytes.Equal(encodeKeyStates(k3.keysCopy(), k3.fleet.fleetCopy(), 0, s.features, &s.cfg), again) {
		t.Fatalf("the keys' state read back and written again: %d bytes (%d read, %d keys), or not read back whole", len(again), len(old), len(k.keys))
	}
	s.keyed.takeStateOf(k)
	got := feedFleet(t, s, mem, rows, 2000, 3000)
	var b strings.Builder
	byKey, sig := 0, 0
	for i, sc := range got {
		if sc.ByKey {
			byKey++
			if sc.Outlier || sc.Suppressed {
				sig++
			}
			fmt.Fprintf(&b, "%d %x %v %v\n", 2000+i, math.Float64bits(sc.Score), sc.Outlier, sc.Suppressed)
		}
	}
	if d := fmt.Sprintf("%x", sha256.Sum256([]byte(b.String()))); d != oldScores || byKey != 1000 || sig == 0 {
		t.Fatalf("scores from the state read back: %d by key, %d significant, digest %s; want 1000 by key, 27 significant, digest %s", byKey, sig, d, oldScores)
	}
}

// TestAlarmStateFormat1: a scorer's alarm state written before the fleet's pool was saved
// (format 1; commit 569b3ff) reads back whole. The file in testdata was written by that code: a
// scorer under keys.tail: fleet serving the global model and the ten keys' models of a builder fed
// rows 0..2000 of the fleet below, fed rows 2000..4000 (a +12 sd shift of one key from row 3000:
// its cap, series and groups in alarm), stopped. Today's code reads it with its pool empty (as
// that code's restart started it), its groups' partitions and generation unknown (a group
// timed unless at 0 ms), writes it back as format 1 byte for byte and as format 4 (the empty
// pool: 4 bytes more, the groups' generation 8, and 5 a group, its partition -1 and flags),
// and reads that back to the same state, and a scorer restarted from it scores rows 4000..5000 as that code's restarted scorer did
// (the digest, of index, score bits, flagged, suppressed, held, grouped).
func TestAlarmStateFormat1(t *testing.T) {
	old, err := os.ReadFile("testdata/alarms_v1_scorer_fleet.bin")
	if err != nil {
		t.Fatal(err)
	}
	const oldScores = "bccff6be1197275973779ee3230daaf88e905edad56bbd6e470585bd5e5f7394"
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	cfg.Keys.Tail = TailFleet
	cfg.AlertCooldown = time.Minute
	unit := func(int) float64 { return 2 }
	rows := shiftFleet(10, 500, 300, 300, 12, 8, 0.01, unit, 7)
	format, p, err := alarmsSnapshotFile.Read(bytes.NewReader(old))
	if err != nil || format != 1 {
		t.Fatalf("format %d, %v", format, err)
	}
	a, err := decodeAlarms(format, p, cfg.Window, cfg.Keys.Window)
	if err != nil {
		t.Fatal(err)
	}
	if a.fleet != nil || a.series.pos != 2000 || len(a.keyCaps) != 10 || len(a.groups) == 0 {
		t.Fatalf("read back: pool %v, position %d, %d keys' caps, %d groups; want none, 2000, 10, some", a.fleet != nil, a.series.pos, len(a.keyCaps), len(a.groups))
	}
	for k, g := range a.groups {
		if g.partition != -1 || g.timed != (g.at != 0) {
			t.Fatalf("group %q read from format 1 at partition %d, timed %v (at %d), want -1 (not known), timed unless at 0", k, g.partition, g.timed, g.at)
		}
	}
	if a.genKnown {
		t.Fatalf("format 1 read with the groups' generation %d, want none", a.gen)
	}
	if !bytes.Equal(a.encodeAs(1, cfg.Keys.Window), p) {
		t.Fatal("written again as format 1: other bytes (the older formats' writing, which the tests of their reading use)")
	}
	again := a.encode(cfg.Keys.Window)
	if len(again) != len(p)+4+8+5*len(a.groups)+4+12 {
		t.Fatalf("written again: %d bytes, want the %d read, 4 (an empty pool), 8 (the groups' generation, none), 5 a group (%d: partition -1, flags), 4 (no committed offsets) and 12 (an empty recent past)",
			len(again), len(p), len(a.groups))
	}
	if b, err := decodeAlarms(AlarmsSnapshotFormat, again, cfg.Window, cfg.Keys.Window); err != nil || !bytes.Equal(b.encode(cfg.Keys.Window), again) {
		t.Fatalf("written again and read back: %v, or other bytes", err)
	}
	const warm = 2000
	gm, kms := fleetLeaderModels(t, cfg, rows[:warm])
	cfg.StateDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.StateDir, alarmsPrefix+"00000000000000000001.osnap"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s, err := NewStage(cfg, []string{"value"}, false, Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Role: RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.InstallModel(gm, nil); err != nil {
		t.Fatal(err)
	}
	s.InstallKeyModels(kms)
	if s.series.pos != 2000 {
		t.Fatalf("the scorer restarted at stream position %d, want the file's 2000", s.series.pos)
	}
	var b strings.Builder
	i, sig := 4000, 0
	for lo := 4000; lo < 5000; lo += 500 {
		bs, err := s.Process(context.Background(), restartBatch(t, mem, rows, lo, lo+500))
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range bs {
			for _, sc := range out.Scores {
				fmt.Fprintf(&b, "%d %x %v %v %v %v\n", i, math.Float64bits(sc.Score), sc.Outlier, sc.Suppressed, sc.Held, sc.Grouped)
				if sc.Outlier {
					sig++
				}
				i++
			}
			out.Release()
		}
	}
	if d := fmt.Sprintf("%x", sha256.Sum256([]byte(b.String()))); d != oldScores || i != 5000 || sig == 0 {
		t.Fatalf("scores from the state read back: %d records to %d, %d flagged, digest %s; want to 5000, some flagged, digest %s", i-4000, i, sig, d, oldScores)
	}
}
