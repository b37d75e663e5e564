package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestColumnsFileCorruptIsAnError: a columns.txt that does not read (an operator's edit gone
// wrong, a disk's damage: the start's own writes are atomic) was logged as a warning without its
// line, and the start went on: it matched the snapshots by the columns' names only, loading a
// model of a column redefined since (what columns.txt is for), and wrote the record again over
// it, so nothing was left to tell. Now the start stops with an error naming the file and the
// line and column of the fault, and leaves the file as it is (failed first: both loaded, the
// file rewritten).
func TestColumnsFileCorruptIsAnError(t *testing.T) {
	// at: the faulty byte's line:column (the second "is" without its comma; the 7; the object).
	for _, c := range []struct {
		name, text, at string
	}{
		{"syntax", "[\n  {\"column\": \"temp\", \"is\": \"a feature\"},\n  {\"column\": \"d\" \"is\": \"diff of temp\"}\n]\n", ":3:18:"},
		{"type", "[\n  {\"column\": \"temp\", \"is\": \"a feature\"},\n  {\"column\": \"d\", \"is\": 7}\n]\n", ":3:25:"},
		{"not a list", "{\"column\": \"d\"}\n", ":1:1:"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, columnsFileName)
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		var cfg Config
		cfg.Detect.StateDir = dir
		cfg.Ingest.Features = []string{"temp"}
		cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
		_, err := checkColumns(context.Background(), cfg, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), path+c.at) {
			t.Errorf("%s: error %v, want one naming %s%s", c.name, err, path, c.at)
		}
		if got, _ := os.ReadFile(path); string(got) != c.text {
			t.Errorf("%s: columns.txt rewritten:\n%s", c.name, got)
		}
	}
}

// TestColumnsFileCrashLeftoverRemoved: columns.txt is written atomically (atomicfile: a temporary
// file beside it, renamed over it), so a crash in the write leaves the old record whole, and the
// temporary file .columns.txt.tmp*: the detect stage removes its own snapshots' leftovers at the
// start, not this one, so each crash in that write left one in state_dir for good (failed
// first: the leftover stayed). Now the start removes it; other files stay.
func TestColumnsFileCrashLeftoverRemoved(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "."+columnsFileName+".tmp123456")
	other := filepath.Join(dir, ".model-000001.osnap.tmp99")
	for _, p := range []string{left, other} {
		if err := os.WriteFile(p, []byte("[\n  {\"column\": \"te"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cfg Config
	cfg.Detect.StateDir = dir
	cfg.Ingest.Features = []string{"temp"}
	if _, err := checkColumns(context.Background(), cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); err == nil {
		t.Errorf("%s left in state_dir", left)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file (the stage's to remove): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, columnsFileName)); err != nil {
		t.Errorf("columns.txt not written: %v", err)
	}
}

// TestColumnsMoveCutShortRecovered: a start that moves the models, keys' state and alarm state
// aside (a column redefined) and crashes between two of its files, or in the write of the
// directory's columns.txt (its temporary file left there), leaves part of them moved and
// state_dir's columns.txt still the old record. The next start moved the rest into a second
// directory: the old state split in two, one without its columns.txt and with the temporary
// file for good, so that the documented rollback (move the directory's files back, its
// columns.txt too) found half of it (failed first: two directories). Now the next start finds
// the move it cut short and ends it: one directory holding every file and the record they were
// built under, nothing else, and none of them left in state_dir.
func TestColumnsMoveCutShortRecovered(t *testing.T) {
	dir, redef, was := recordedStateDir(t)
	state := []string{"alarms-000001.osnap", "keys-000001.osnap", "model-000001.osnap", "model-000002.osnap"}
	for _, f := range state {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	crash := errors.New("crashed")
	moveAsideCut = func(moved int) error {
		if moved == 2 {
			return crash
		}
		return nil
	}
	_, err := checkColumns(context.Background(), redef, zerolog.Nop())
	moveAsideCut = nil
	if !errors.Is(err, crash) {
		t.Fatalf("the cut move: %v, want the crash", err)
	}
	// The crash also left the atomic write's temporary file in the directory.
	asides, _ := filepath.Glob(filepath.Join(dir, "*columns-changed-*"))
	if len(asides) != 1 {
		t.Fatalf("the cut move left %v", asides)
	}
	if err := os.WriteFile(filepath.Join(asides[0], "."+columnsFileName+".tmp42"), []byte("[\n  {"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // (the next start's clock is later: another directory's name)
	var logs testsupport.LogBuffer
	if _, err := checkColumns(context.Background(), redef, zerolog.New(&logs)); err != nil {
		t.Fatal(err)
	}
	asides, _ = filepath.Glob(filepath.Join(dir, "*columns-changed-*"))
	if len(asides) != 1 {
		t.Fatalf("after the next start: %v, want one directory holding the old state; log: %s", asides, logs.String())
	}
	ents, err := os.ReadDir(asides[0])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := append([]string{"alarms-000001.osnap", columnsFileName}, state[1:]...); !slices.Equal(names, want) {
		t.Errorf("%s holds %v, want %v", asides[0], names, want)
	}
	if got, _ := os.ReadFile(filepath.Join(asides[0], columnsFileName)); !bytes.Equal(got, was) {
		t.Errorf("its %s is %q, want the record the state was built under %q", columnsFileName, got, was)
	}
	for _, f := range state {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s left in state_dir", f)
		}
	}
	if !strings.Contains(logs.String(), "cut short") {
		t.Errorf("the move cut short not logged: %s", logs.String())
	}
}

// TestColumnsCutMoveKeptNeverComesBack: a directory of a move cut short (.partial) whose model
// file has a namesake in state_dir stays, as logged ("undone in part"). The start then moves
// state_dir's models aside (the columns still differ) and records the columns in force; the
// start after it found the .partial again, and its model file, without a namesake now, went
// back into state_dir, whose record says the columns in force: a model built on the old
// definition loaded as of the new one (failed so before the fix). Now a directory left in part
// loses its suffix (an ordinary directory aside, its columns.txt kept): no later start moves
// anything out of it.
func TestColumnsCutMoveKeptNeverComesBack(t *testing.T) {
	dir, redef, was := recordedStateDir(t)
	const model = "model-000001.osnap"
	cut := filepath.Join(dir, "columns-changed-20260101T000000.000Z"+partialSuffix)
	for path, data := range map[string][]byte{filepath.Join(dir, model): []byte("state_dir's"),
		filepath.Join(cut, model): []byte("the cut move's"), filepath.Join(cut, columnsFileName): was} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for start := 1; start <= 2; start++ {
		var logs testsupport.LogBuffer
		if _, err := checkColumns(context.Background(), redef, zerolog.New(&logs)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, model)); err == nil {
			got, _ := os.ReadFile(filepath.Join(dir, model))
			t.Fatalf("start %d: state_dir holds %s (%q), built on the old definition, under the record of the new one; log: %s", start, model, got, logs.String())
		}
		time.Sleep(5 * time.Millisecond) // (the next start's clock is later: another directory's name)
	}
	kept := strings.TrimSuffix(cut, partialSuffix)
	if got, err := os.ReadFile(filepath.Join(kept, model)); err != nil || string(got) != "the cut move's" {
		t.Errorf("the directory left in part: %s holds %q (%v), want the cut move's model", kept, got, err)
	}
	if got, _ := os.ReadFile(filepath.Join(kept, columnsFileName)); !bytes.Equal(got, was) {
		t.Errorf("the directory left in part: its %s is %q, want the record its models were built under %q", columnsFileName, got, was)
	}
}

// recordedStateDir is a state_dir whose columns.txt a start (checkColumns) wrote for the columns
// temp, hum and d = diff of temp (was: that record), and redef, the configuration of a start
// that redefines d as diff of hum.
func recordedStateDir(t *testing.T) (dir string, redef Config, was []byte) {
	t.Helper()
	dir = t.TempDir()
	var cfg Config
	cfg.Detect.StateDir = dir
	cfg.Ingest.Features = []string{"temp", "hum"}
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
	if _, err := checkColumns(context.Background(), cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	was, err := os.ReadFile(filepath.Join(dir, columnsFileName))
	if err != nil {
		t.Fatal(err)
	}
	redef = cfg
	redef.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "d"}}}
	return dir, redef, was
}
