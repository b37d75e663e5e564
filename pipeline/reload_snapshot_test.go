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
)

// TestReloadAfterSnapshotStartLogsWhatTheRebuildWaitsFor is operator29's finding, as an
// operator meets it: a pipeline restarted with detect.state_dir serves its snapshot's model,
// its window empty; an edit of a key that shapes the model (detect.distance.k) is reloaded,
// and the log said only "rebuild_started": false (OPERATIONS: "when a build already runs").
// No build ran: the snapshot's model kept scoring with the old k until min_records records had
// arrived (at 100 records/s and min_records 5,000: 50 s; at 1/s, 83 min). The reload's line
// now says what the rebuild waits for, with the window's count.
//
// Since snapwin30 the stop saves the window too (detect window-<sequence>.osnap): the restart
// has its 1,200 records, and the reload rebuilds at once, waiting for nothing (withWindow); a
// state_dir without the file (a release before it) waits as operator29 found, and says so.
func TestReloadAfterSnapshotStartLogsWhatTheRebuildWaitsFor(t *testing.T) {
	for _, withWindow := range []bool{true, false} {
		t.Run(map[bool]string{true: "window saved", false: "no window file"}[withWindow], func(t *testing.T) {
			reloadAfterSnapshotStart(t, withWindow)
		})
	}
}

func reloadAfterSnapshotStart(t *testing.T, withWindow bool) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	input := newInput(in, 1, makeSensorRecords(t, 1600, 1, 29, 0.01, 0))

	cfg := sensorConfig(br, in, out, dlq, group, "all")
	d := &cfg.Detect
	d.Window, d.MinRecords, d.RefreshRecords, d.RecalibrateRecords, d.RefreshInterval = 4000, 1000, 1<<30, 1<<30, time.Hour
	d.Density.Clusters, d.Density.Iterations, d.Density.Samples = 50, 2, 100
	d.Distance.K, d.Distance.N, d.Distance.M = 10, 20, 50
	d.StateDir = t.TempDir()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	saveConfig(t, path, cfg)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cl := testsupport.NewProducer(t, br)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The first run: a model at 1,000 records, snapshotted; the stop commits the 1,200.
	if err := produceRecords(ctx, cl, input, input.records[:1200]); err != nil {
		t.Fatal(err)
	}
	runUntilOut(t, cfg, 1200)
	if !withWindow {
		files, err := filepath.Glob(filepath.Join(d.StateDir, "window-*.osnap"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no window file after the stop (%v)", err)
		}
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The restart: the snapshot's model serves at once; 200 records arrive.
	var rl *Reloader
	logs := &testsupport.LogBuffer{}
	run := startPipeline(t, cfg, func(p *Pipeline) { rl = NewReloader(p, path, zerolog.New(logs)) })
	if err := produceRecords(ctx, cl, input, input.records[1200:1400]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for run.p.Stats().RecordsOut.Load() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 200 records out after the restart", run.p.Stats().RecordsOut.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	next := cfg
	next.Detect.Distance.K = 12
	saveConfig(t, path, next)
	rl.reloadAndLog(ctx, "test")
	line := logs.String()
	if withWindow {
		if !strings.Contains(line, `"rebuild":["detect.distance.k"]`) || !strings.Contains(line, `"rebuild_started":true`) ||
			strings.Contains(line, "rebuild_waits") {
			t.Errorf("reload's log %q: want a rebuild of detect.distance.k started at once, waiting for nothing", line)
		}
		if err := run.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !strings.Contains(line, `"rebuild":["detect.distance.k"]`) || !strings.Contains(line, `"rebuild_started":false`) {
		t.Fatalf("reload's log %q: want a rebuild of detect.distance.k, not started", line)
	}
	for _, want := range []string{`"rebuild_waits"`, "200 of detect.min_records=1000", "snapshot"} {
		if !strings.Contains(line, want) {
			t.Errorf("reload's log %q lacks %q", line, want)
		}
	}
	if err := run.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
}
