package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestDerivedColumnRedefinedDropsItsModels: a derived column keeps its name when its
// definition changes under an explicit name (ingest.derive's name: d, of temp -> of pressure),
// or when derive.timezone moves time_of_day. The snapshots of detect.state_dir are matched by
// the columns' names, so a restart loaded the model built on temp's differences and scored
// pressure's against it, silently (a diff of pressure, 30 times temp's spread: 14 % of a
// healthy stream flagged, outlierd run on a real broker, 2026-11-28). Now state_dir keeps what
// each column was (columns.txt): a column of the same name and another definition moves the
// models and keys' state saved there into a subdirectory (kept for a rollback, never loaded),
// logged with the column, its old and new definitions and the directory; the first model is
// then built from the stream. The alarm state goes with them (TestColumnsChangedResetAlarms).
// The same config again moves nothing.
func TestDerivedColumnRedefinedDropsItsModels(t *testing.T) {
	cfg := derivedStateDir(t)
	models := func(dir string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "model-*.osnap"))
		return m
	}
	saved := models(cfg.Detect.StateDir)
	savedAlarms, _ := filepath.Glob(filepath.Join(cfg.Detect.StateDir, "alarms-*.osnap"))
	if len(saved) == 0 || len(savedAlarms) == 0 {
		t.Fatalf("models %v, alarm state %v saved in state_dir: want both", saved, savedAlarms)
	}
	// start runs the pipeline of c on the state_dir and stops it: whether a model was loaded
	// (New loads the snapshots), with its log.
	start := func(c Config) (bool, string) { return startStop(t, c) }
	if loaded, log := start(cfg); !loaded {
		t.Fatalf("the same config did not load its model: %s", log)
	}
	// (That start's stop may save the alarm state once more, as its offsets moved: what the
	// redefinition must move is what state_dir holds now.)
	saved = models(cfg.Detect.StateDir)
	savedAlarms, _ = filepath.Glob(filepath.Join(cfg.Detect.StateDir, "alarms-*.osnap"))
	redef := cfg
	redef.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "hum", Name: "d"}}}
	loaded, log := start(redef)
	if loaded {
		t.Fatalf("column d redefined (temp's diff -> hum's), and the model built on temp's diff was loaded: %s", log)
	}
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "redefined") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines on the redefined column, want 2 (the column, the files moved): %s", len(lines), log)
	}
	for i, wants := range [][]string{{`"level":"warn"`, `"column":"d"`, `"was":"diff of temp"`, `"is":"diff of hum"`},
		{`"level":"warn"`, `"columns":["d"]`, "model-", `"moved_to":"` + cfg.Detect.StateDir + "/columns-changed-"}} {
		for _, want := range wants {
			if !strings.Contains(lines[i], want) {
				t.Errorf("line %d lacks %s: %q", i, want, lines[i])
			}
		}
	}
	if left := models(cfg.Detect.StateDir); len(left) != 0 {
		t.Errorf("models left in state_dir: %v", left)
	}
	moved, _ := filepath.Glob(filepath.Join(cfg.Detect.StateDir, "*", "model-*.osnap"))
	if len(moved) != len(saved) {
		t.Errorf("%d models moved aside, want %d: %v", len(moved), len(saved), moved)
	}
	if alarms, _ := filepath.Glob(filepath.Join(cfg.Detect.StateDir, "*", "alarms-*.osnap")); len(alarms) != len(savedAlarms) {
		t.Errorf("%d alarm state files moved aside, want the %d saved with the models: %v", len(alarms), len(savedAlarms), alarms)
	}
	if _, err := os.Stat(filepath.Join(cfg.Detect.StateDir, columnsFileName)); err != nil {
		t.Errorf("no %s: %v", columnsFileName, err)
	}
	if _, log := start(redef); strings.Contains(log, "redefined") {
		t.Errorf("the same config again moved something: %s", log)
	}
}

// derivedStateDir runs 1,500 records of two sensors (temp, hum; d, temp's first difference,
// derived) through a pipeline with a state_dir, which then holds its models and alarm state:
// the columns' tests' common start. It returns that pipeline's config.
func derivedStateDir(t *testing.T) Config {
	t.Helper()
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	const n = 1500
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", i%3),
			Value: fmt.Appendf(nil, `{"temp":%g,"hum":%g}`, 20+float64(i%7)/10, 1000+float64(i%13)*3)}
	}
	testsupport.Produce(t, br, recs...)
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	cfg.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"}}}
	cfg.Detect.FlagBy = detect.FlagBySignificance
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 1000, 500, 50
	cfg.Detect.StateDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	runUntilOut(t, cfg, n)
	return cfg
}

// startStop starts the pipeline of c on its state_dir and stops it: whether a model was loaded
// (New loads the snapshots), with its log.
func startStop(t *testing.T, c Config) (bool, string) {
	t.Helper()
	r, logs := startLogged(t, c)
	loaded := r.p.Detect().Model() != nil
	if err := r.stop(t, c.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
	return loaded, logs.String()
}
