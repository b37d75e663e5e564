package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestScorerHoldBoundFollowsReload: a scorer's intake pauses once detect.window records wait
// for its first model under before_model: hold (holdLimit), but the bound was taken from the
// configuration of the start: a scorer started under pass and reloaded to hold (both live keys)
// held every record fetched while the builder published nothing, without bound; one reloaded
// the other way stayed paused though it passes records on. The bound follows the stage's
// configuration in force.
func TestScorerHoldBoundFollowsReload(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := Default()
	cfg.Run.Role, cfg.Detect.BeforeModel = detect.RoleScorer, detect.BeforeModelPass
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Density.Clusters = 200, 100, 10
	det, err := detect.NewStage(cfg.Detect, []string{"x"}, false, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer det.Close()
	defer det.Abandon() // (the held batches: released, as at a stop without a model)
	p := &Pipeline{cfg: cfg, log: zerolog.Nop(), role: detect.RoleScorer, det: det, stage: det}
	hold := p.holdBound()

	held := cfg.Detect
	held.BeforeModel = detect.BeforeModelHold
	if _, err := det.Reconfigure(held); err != nil {
		t.Fatal(err)
	}
	rows := make([]testbatch.Row, 50)
	for off := int64(0); det.HeldRecords() < held.Window; off += int64(len(rows)) {
		for i := range rows {
			rows[i] = testbatch.Row{Offset: off + int64(i), Features: []float32{float32(i)}}
		}
		out, err := det.Process(context.Background(), testbatch.New(t, mem, "in", []string{"x"}, false, false, rows))
		if err != nil || len(out) != 0 {
			t.Fatalf("Process under hold without a model: %d batches out, %v", len(out), err)
		}
	}
	if !hold.pause(p) {
		t.Fatalf("%d records held for the first model after a reload to before_model: hold (detect.window %d): the intake goes on", det.HeldRecords(), held.Window)
	}
	if _, err := det.Reconfigure(cfg.Detect); err != nil { // back to pass
		t.Fatal(err)
	}
	if hold.pause(p) {
		t.Fatal("reloaded to before_model: pass, the intake stays paused")
	}
}

// TestWaitingReasonFollowsReload: /readyz's reason while the first model is awaited named the
// start's detect.min_records and before_model after a reload had changed them (both live).
func TestWaitingReasonFollowsReload(t *testing.T) {
	cfg := Default()
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Density.Clusters = 200, 100, 10
	det, err := detect.NewStage(cfg.Detect, []string{"x"}, false, detect.Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer det.Close()
	p := &Pipeline{cfg: cfg, log: zerolog.Nop(), role: detect.RoleAll, det: det, stage: det, metrics: metrics.New()}
	next := cfg.Detect
	next.MinRecords, next.BeforeModel = 150, detect.BeforeModelPass
	if _, err := det.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	p.noteWaiting(false)
	p.metrics.SetStarting("")
	if _, why := p.metrics.Ready(); !strings.Contains(why, "detect.min_records=150") || !strings.Contains(why, "before_model: pass") {
		t.Fatalf("/readyz reason after the reload: %q, want detect.min_records=150 under before_model: pass", why)
	}
}

// TestScorerWaitingSaysHeldRecords: a scorer waiting for the builder's first model logged
// "window_records": 0 and "min_records": 5000, a window it never keeps and a count it never
// waits for, while it held the records that had arrived (operator29: 6,000 records produced,
// the scorer's line said 0 of 5000). Its line and /readyz's reason now say how many records
// it holds (under hold) and that they go out unscored (under pass).
func TestScorerWaitingSaysHeldRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := Default()
	cfg.Run.Role, cfg.Run.ModelTopic = detect.RoleScorer, "models"
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Density.Clusters = 200, 100, 10
	det, err := detect.NewStage(cfg.Detect, []string{"x"}, false, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer det.Close()
	defer det.Abandon()
	var logs strings.Builder
	p := &Pipeline{cfg: cfg, log: zerolog.New(&logs), role: detect.RoleScorer, det: det, stage: det, metrics: metrics.New()}
	rows := make([]testbatch.Row, 120)
	for i := range rows {
		rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{float32(i)}}
	}
	if out, err := det.Process(context.Background(), testbatch.New(t, mem, "in", []string{"x"}, false, false, rows)); err != nil || len(out) != 0 {
		t.Fatalf("Process under hold without a model: %d batches out, %v", len(out), err)
	}
	p.noteWaiting(true)
	p.metrics.SetStarting("")
	line := logs.String()
	if !strings.Contains(line, `"held_records":120`) || strings.Contains(line, "min_records") || strings.Contains(line, "window_records") {
		t.Errorf("scorer's waiting line %q: want held_records 120, no window_records or min_records", line)
	}
	if _, why := p.metrics.Ready(); !strings.Contains(why, "120 records held") {
		t.Errorf("/readyz reason %q: want the 120 records held", why)
	}
}
