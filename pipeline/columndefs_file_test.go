package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

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
		err := checkColumns(context.Background(), cfg, zerolog.Nop())
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
	if err := checkColumns(context.Background(), cfg, zerolog.Nop()); err != nil {
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
