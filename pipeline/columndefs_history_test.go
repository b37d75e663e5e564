package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestStateDirCreatedAtStart: detect.state_dir need not exist: lint accepts a directory that
// can be created (checkStateDir) and the detect stage creates it (OpenSnapshotDir). The
// columns' record (columns.txt) was written before the stage ran, into the directory not yet
// created, and the start failed: "pipeline: detect.state_dir: .../columns.txt: no such file
// or directory" (failed before the fix). Now the directory is created first, as the stage
// would, and the start goes on with columns.txt written.
func TestStateDirCreatedAtStart(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Detect.StateDir = filepath.Join(t.TempDir(), "var", "state")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a state_dir that can be created refused by Validate: %v", err)
	}
	r, _ := startLogged(t, cfg)
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Detect.StateDir, columnsFileName)); err != nil {
		t.Errorf("no %s in the state_dir created at the start: %v", columnsFileName, err)
	}
}

// TestColumnRedefinedAfterItWasGone: columns.txt held the columns of the last start only, so a
// column's definition was forgotten as soon as one start went without the column, while the
// models built on it stay in state_dir (a snapshot of other columns is skipped, not removed:
// a rollback loads it). A derived column d = diff of temp, then d renamed e (or ingest.derive
// removed), then d again as diff of hum: the third start compared d with nothing and loaded the
// first one's model of temp's differences for hum's (failed before the fix: the model loaded,
// nothing moved). Now columns.txt keeps the definitions of the columns gone too, and the third
// start moves the models aside as a redefinition in place does
// (TestDerivedColumnRedefinedDropsItsModels).
func TestColumnRedefinedAfterItWasGone(t *testing.T) {
	derive := func(of, name string) *ingest.Derive {
		return &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: of, Name: name}}}
	}
	cfg := derivedStateDir(t) // (d: derive("temp", "d"))
	saved, _ := filepath.Glob(filepath.Join(cfg.Detect.StateDir, "model-*.osnap"))
	if len(saved) == 0 {
		t.Fatal("no model saved in state_dir")
	}
	start := func(c Config) (bool, string) { return startStop(t, c) }
	renamed, removed, redef := cfg, cfg, cfg
	renamed.Ingest.Derive = derive("temp", "e")
	removed.Ingest.Derive = nil
	redef.Ingest.Derive = derive("hum", "d")
	for _, between := range []struct {
		name string
		cfg  Config
	}{{"d renamed e", renamed}, {"derive removed", removed}} {
		dir := t.TempDir()
		for _, f := range append(saved, filepath.Join(cfg.Detect.StateDir, columnsFileName)) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, c := between.cfg, redef
		b.Detect.StateDir, c.Detect.StateDir = dir, dir
		if loaded, log := start(b); loaded {
			t.Fatalf("%s: the model of columns [temp hum d] loaded for other columns: %s", between.name, log)
		}
		loaded, log := start(c)
		if loaded {
			t.Errorf("%s, then d = diff of hum: the model built on d = diff of temp was loaded: %s", between.name, log)
		}
		if !strings.Contains(log, `"was":"diff of temp"`) || !strings.Contains(log, `"moved_to":"`+dir+"/columns-changed-") {
			t.Errorf("%s, then d = diff of hum: no line on d redefined and the models moved: %s", between.name, log)
		}
		if moved, _ := filepath.Glob(filepath.Join(dir, "*", "model-*.osnap")); len(moved) != len(saved) {
			t.Errorf("%s: %d models moved aside, want %d", between.name, len(moved), len(saved))
		}
	}
}

// TestColumnsRollback: the models moved aside at a redefinition are "kept for a rollback: move
// them back with the old config" (OPERATIONS). But the record stayed behind, saying the new
// definition: the old config's start found its column redefined again and moved the files
// straight back aside (failed before the fix: moved again, into a second directory). The
// directory now holds the record they were built under (its columns.txt), and moving its
// files back, that one too, with the old config loads them.
func TestColumnsRollback(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Default()
	cfg.Detect.StateDir = dir
	cfg.Ingest.Features = []string{"temp", "hum"}
	old, redef := cfg, cfg
	old.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
	redef.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "d"}}}
	if _, err := checkColumns(ctx, old, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	files := []string{"model-00000000000000000004.osnap", "keys-00000000000000000002.osnap"}
	for _, f := range files { // (checkColumns goes by the names: detect.IsModelFile)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := checkColumns(ctx, redef, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "columns-changed-*"))
	if len(aside) != 1 {
		t.Fatalf("%d directories aside, want 1: %v", len(aside), aside)
	}
	// The rollback: the directory's files back into state_dir, the old config started.
	ents, err := os.ReadDir(aside[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(aside[0], e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	var logs testsupport.LogBuffer
	if _, err := checkColumns(ctx, old, zerolog.New(&logs)); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not in state_dir after the rollback (moved aside again?): %v; log: %s", f, err, logs.String())
		}
	}
}
