package detect

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
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
	if err := k.decodeKeys(2, old, s.features, &s.cfg); err != nil {
		t.Fatal(err)
	}
	// Written again (format 4: a stream position, and each key's cap's, none here, and the
	// fleet's pool, empty, besides format 2's): 8 bytes more for the file and each key, 4 for the
	// pool, and it reads back to the same bytes.
	again := encodeKeyStates(k.keysCopy(), k.fleet.fleetCopy(), 0, s.features, &s.cfg)
	k3 := s.newKeyed()
	if err := k3.decodeKeys(KeysSnapshotFormat, again, s.features, &s.cfg); err != nil {
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
