package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/stages/ingest"
)

// TestStateDirWithoutColumnsFileDistrustsDerivedModels: a state_dir written before columns.txt
// existed (a release before 2026-11-28) holds models whose derived columns' definitions nothing
// records. Its first start loaded them whatever ingest.derive now says, so a column redefined
// under its name at that start (d: temp's diff -> hum's) was scored by the model of the old
// values, silently, and columns.txt then recorded the new definition as the models'. Now such a
// state_dir's models and keys' state, where the stream has derived columns, are moved aside
// with the alarm state (columns-unknown-<time>/, kept: never loaded from there), logged with the derived columns and
// how to take them back; columns.txt is written, so moved back they load at the next start
// (the same derive), and a start after that moves nothing. A state_dir without derived
// columns, or with no models yet, moves nothing.
func TestStateDirWithoutColumnsFileDistrustsDerivedModels(t *testing.T) {
	cfg := derivedStateDir(t)
	dir := cfg.Detect.StateDir
	models := func(dir string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "model-*.osnap"))
		return m
	}
	saved := models(dir)
	savedAlarms, _ := filepath.Glob(filepath.Join(dir, "alarms-*.osnap"))
	if len(saved) == 0 || len(savedAlarms) == 0 {
		t.Fatalf("models %v, alarm state %v saved in state_dir: want both", saved, savedAlarms)
	}
	// The state_dir of a release before columns.txt.
	if err := os.Remove(filepath.Join(dir, columnsFileName)); err != nil {
		t.Fatal(err)
	}
	start := func(c Config) (bool, string) { return startStop(t, c) }
	redef := cfg
	redef.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "d"}}}
	loaded, log := start(redef)
	if loaded {
		t.Fatalf("a state_dir without %s, d redefined (temp's diff -> hum's): the model built on temp's diff was loaded: %s", columnsFileName, log)
	}
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "moved_to") {
			line = l
		}
	}
	for _, want := range []string{`"level":"warn"`, `"columns":["d"]`, "model-", `"moved_to":"` + dir + "/columns-unknown-", "columns.txt"} {
		if !strings.Contains(line, want) {
			t.Errorf("the line of the files moved lacks %s: %q (log %s)", want, line, log)
		}
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "columns-unknown-*"))
	if len(models(dir)) != 0 || len(aside) != 1 || len(models(aside[0])) != len(saved) {
		t.Fatalf("models left %v, aside %v: want the %d models moved into one columns-unknown directory", models(dir), aside, len(saved))
	}
	if alarms, _ := filepath.Glob(filepath.Join(aside[0], "alarms-*.osnap")); len(alarms) != len(savedAlarms) {
		t.Errorf("%d alarm state files moved aside with the models, want %d", len(alarms), len(savedAlarms))
	}

	// The operator's way back: the old derive, columns.txt written with it, the files moved back.
	if err := os.Remove(filepath.Join(dir, columnsFileName)); err != nil {
		t.Fatal(err)
	}
	if _, log := start(cfg); strings.Contains(log, "moved_to") { // (state_dir holds no model now)
		t.Fatalf("a state_dir without models moved something: %s", log)
	}
	for _, m := range models(aside[0]) {
		if err := os.Rename(m, filepath.Join(dir, filepath.Base(m))); err != nil {
			t.Fatal(err)
		}
	}
	if loaded, log := start(cfg); !loaded || strings.Contains(log, "moved_to") {
		t.Fatalf("moved back under columns.txt of the same derive: loaded %v, want loaded and nothing moved: %s", loaded, log)
	}

	// No derived columns: nothing to distrust.
	if err := os.Remove(filepath.Join(dir, columnsFileName)); err != nil {
		t.Fatal(err)
	}
	plain := cfg
	plain.Ingest.Derive = nil
	if _, log := start(plain); strings.Contains(log, "moved_to") {
		t.Errorf("no derived columns, and files were moved: %s", log)
	}
}
