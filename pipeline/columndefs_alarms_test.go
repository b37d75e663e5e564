package pipeline

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestColumnsChangedResetAlarms: the alarm state (the deadband's series in alarm, the stage's
// cap) rests on the verdicts of the models it was saved with. When the
// columns change (a feature added or removed, a derived column redefined), those models are not
// loaded (skipped by their columns' names, or moved aside), and the alarm state went on all the
// same: a series in alarm against the old model held its next records flagged against the new
// one at flag_clear x min_score, a score the new model alone does not flag at; the keys' own
// caps (in the keys' state) started afresh meanwhile. Now a start whose columns differ from
// columns.txt moves the alarm state aside with the models (columns-changed-<time>/), as a
// detect.window change refuses it: the alarms start empty with the new model, but for the
// alert groups (TestColumnsChangedKeepsAlertGroups). The same columns again load it.
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

// TestColumnsChangedKeepsAlertGroups: a start whose columns differ from columns.txt moves the
// alarm state aside (TestColumnsChangedResetAlarms): the deadband's series in alarm and the
// caps rest on the old model's verdicts. The alert groups did not: a group is a key's open
// alert and its time (what alert_cooldown folds a key's next flags into), whatever model
// flagged it, and dropping them paged a fault in progress across the change twice (failed
// first: s1's far record after the change, 918 s after its alert and within the 30-minute
// cooldown, was a new alert). Now the start keeps the alert groups of the alarm state it moves
// aside, and nothing else of it: the far record flagged by the new columns' model folds into
// the alert of the old one.
func TestColumnsChangedKeepsAlertGroups(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	run := newAlertRun(t, br)
	// s1's records: 1201 its alert, 2119 far again 918 s later, after the change's restart.
	const first, alert, again, last = 1500, 1201, 2119, 2130
	run.produce(0, first, alert)
	cfg := run.config(t, 30*time.Minute)
	runUntilOut(t, cfg, first)

	// A derived column added: the old model is not loaded, its alarm state moved aside.
	changed := cfg
	changed.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "dh"}}}
	run.produce(first, last, again)
	r, logs := startLogged(t, changed)
	for deadline := time.Now().Add(60 * time.Second); r.p.Stats().RecordsOut.Load() < last-first; {
		if time.Now().After(deadline) {
			t.Fatalf("%d records out after 60 s, want %d", r.p.Stats().RecordsOut.Load(), last-first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(filepath.Join(cfg.Detect.StateDir, "columns-changed-*", "alarms-*.osnap")); len(aside) == 0 {
		t.Fatalf("the alarm state not moved aside at the change: %s", logs.String())
	}
	a, b := alertThenFlagged(t, br, run.out, alert, again, "after the change")
	if a.Timestamp == nil {
		t.Fatal("setup: s1's alert has no timestamp")
	}
	if !b.Scores.Folded || string(b.Scores.AlertTimestamp) != `"`+*a.Timestamp+`"` {
		t.Errorf("s1's far record 918 s after its alert, the columns changed in between: folded %v into the alert of %s, want folded into %s's (%s)",
			b.Scores.Folded, b.Scores.AlertTimestamp, *a.Timestamp, b.Explanation)
	}
	if strings.Contains(logs.String(), "alarm state loaded from snapshot") {
		t.Errorf("the old columns' alarm state loaded whole: %s", logs.String())
	}
}
