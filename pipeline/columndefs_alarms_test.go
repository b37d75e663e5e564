package pipeline

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/stages/ingest"
)

// TestColumnsChangedResetAlarms: the alarm state (the deadband's series in alarm, the alert
// groups, the stage's cap) rests on the verdicts of the models it was saved with. When the
// columns change (a feature added or removed, a derived column redefined), those models are not
// loaded (skipped by their columns' names, or moved aside), and the alarm state went on all the
// same: a series in alarm against the old model held its next records flagged against the new
// one at flag_clear x min_score, a score the new model alone does not flag at; the keys' own
// caps (in the keys' state) started afresh meanwhile. Now a start whose columns differ from
// columns.txt moves the alarm state aside with the models (columns-changed-<time>/), as a
// detect.window change refuses it: the alarms start empty with the new model. The same columns
// again load it.
func TestColumnsChangedResetAlarms(t *testing.T) {
	cfg := derivedStateDir(t)
	dir := cfg.Detect.StateDir
	alarms := func(dir string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "alarms-*.osnap"))
		return m
	}
	if len(alarms(dir)) == 0 {
		t.Fatal("no alarm state saved in state_dir")
	}
	start := func(c Config) string { _, log := startStop(t, c); return log }
	const loaded = "alarm state loaded from snapshot"
	if log := start(cfg); !strings.Contains(log, loaded) {
		t.Fatalf("the same columns: the alarm state not loaded: %s", log)
	}

	plain := cfg // d dropped: the columns [temp hum d] -> [temp hum]
	plain.Ingest.Derive = nil
	redef := cfg // d redefined under its name
	redef.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "d"}}}
	for _, c := range []struct {
		name string
		cfg  Config
	}{{"a column redefined", redef}, {"a column dropped", plain}} {
		before := alarms(dir)
		asideBefore, _ := filepath.Glob(filepath.Join(dir, "columns-changed-*"))
		log := start(c.cfg)
		if strings.Contains(log, loaded) {
			t.Errorf("%s: the alarm state of the old columns' models was loaded: %s", c.name, log)
		}
		aside, _ := filepath.Glob(filepath.Join(dir, "columns-changed-*"))
		if len(before) == 0 || len(aside) != len(asideBefore)+1 || len(alarms(aside[len(aside)-1])) != len(before) {
			t.Fatalf("%s: alarm files %v, directories aside %v: want those moved into a new one", c.name, before, aside)
		}
		var line string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "alarms-") && strings.Contains(l, "moved_to") {
				line = l
			}
		}
		if !strings.Contains(line, `"level":"warn"`) || !strings.Contains(line, "columns-changed-") {
			t.Errorf("%s: no warning of the alarm state moved aside: %q", c.name, line)
		}
	}
	if log := start(plain); !strings.Contains(log, loaded) {
		t.Errorf("the same columns again: the alarm state its last run saved not loaded: %s", log)
	}
}
