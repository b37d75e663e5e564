package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestStopInstallsABuildAfterTheFinalCommit is the evidence for a role-all run's "model serving"
// after its "stopping" line (BENCHMARKS §13.2.9's left list): a rebuild in progress at the stop
// is waited for after the final commit (detect.Stage.CloseContext) and installed then. Nothing
// wrong follows: the final commit covers every record fetched and no commit comes after it (no
// batch is scored by the late model, which could not match the committed offsets); its
// snapshot is written before the stop's alarm state save, not after it; the late model goes to
// the metrics' version and to state_dir, and a restart loads it (its window is the drained
// records, all committed); a role-all pipeline has no publisher, so nothing goes out after the
// stop; Run returns with the build's goroutine done and every batch's memory released.
func TestStopInstallsABuildAfterTheFinalCommit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g := newGatedBuilds(t)
	released := false
	defer func() {
		if !released {
			close(g.release)
		}
	}()
	cfg := detect.Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N, cfg.BeforeModel = 2000, 200, 5, detect.BeforeModelPass
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 200, 1<<30, time.Hour
	cfg.StateDir = t.TempDir()
	var logs testsupport.LogBuffer
	var p *Pipeline
	onModel := func(m *detect.Model, fresh bool) { p.modelChanged(m, fresh) } // (as New wires it)
	det, err := detect.NewStage(cfg, []string{"x"}, false, detect.Deps{Log: zerolog.New(&logs).Level(zerolog.DebugLevel), Accelerator: g, OnModel: onModel})
	if err != nil {
		t.Fatal(err)
	}
	var plan []step
	for off := int64(0); off < 6000; off += 100 {
		plan = append(plan, step{part: 0, first: off, n: 100})
	}
	src := newFakeSource(t, mem, plan)
	snk := newFakeSink(t)
	p = loopPipeline(t, pacedSource{src}, snk, func(c *Config) { c.Run.ShutdownTimeout = 20 * time.Second })
	p.stage, p.det = det, det
	done := runStoppedAtRebuild(t, p, g)
	// The final commit comes while the build is still held.
	deadline := time.Now().Add(15 * time.Second)
	var fetched int
	for {
		src.mu.Lock()
		fetched, commits := len(src.fetched), len(src.commits)
		src.mu.Unlock()
		if c := src.lastCommit(); commits > 0 && c[0] == int64(fetched) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final commit of the %d records fetched within 15 s of the stop while the build was held (last %v)", fetched, src.lastCommit())
		}
		time.Sleep(10 * time.Millisecond)
	}
	src.mu.Lock()
	fetched, commitsBefore := len(src.fetched), len(src.commits)
	src.mu.Unlock()
	before := p.stats.ModelVersion.Load()
	if n := len(logs.Lines(`"message":"model serving"`)); n != 1 {
		t.Fatalf("%d models served before the held build was released, want 1:\n%s", n, logs.String())
	}
	released = true
	close(g.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want a graceful stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	after := p.stats.ModelVersion.Load()
	if after <= before {
		t.Fatalf("model version %d after the stop, %d at the final commit: the held build was not installed", after, before)
	}
	src.mu.Lock()
	commitsAfter := len(src.commits)
	src.mu.Unlock()
	if commitsAfter != commitsBefore {
		t.Errorf("%d commits after the late model's install (want none: nothing is scored after the final commit)", commitsAfter-commitsBefore)
	}
	if len(snk.written) != fetched {
		t.Errorf("%d records written, want every one of the %d fetched", len(snk.written), fetched)
	}
	// The order of the stop's saves: the late model's snapshot, then the alarm state. (The
	// periodic save at the first model's install writes its alarm state on a goroutine of its
	// own: on a loaded machine its line came after the late model's "model serving", 1 of a
	// package run's on 2 shared cores, snapwin30. Only the stop's, the last alarm state line,
	// is ordered here.)
	type event struct {
		Msg     string `json:"message"`
		Version uint64 `json:"model_version"`
		File    string `json:"file"`
	}
	var events []event
	lastAlarms := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		var e event
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		events = append(events, e)
		if strings.HasPrefix(e.Msg, "alarm state") {
			lastAlarms = e.File
		}
	}
	var order []string
	for _, e := range events {
		switch {
		case e.Msg == "model serving" && e.Version == after:
			order = append(order, "serving")
		case e.Msg == "model snapshot written" && e.Version == after:
			order = append(order, "snapshot")
		case strings.HasPrefix(e.Msg, "alarm state") && len(order) > 0 && e.File == lastAlarms:
			order = append(order, "alarms")
		}
	}
	if got := strings.Join(order, " "); !strings.HasPrefix(got, "serving snapshot") || !strings.HasSuffix(got, "alarms") {
		t.Errorf("the late model's events %q, want serving, snapshot, then the alarm state's save:\n%s", got, logs.String())
	}
	// A restart serves the late model from state_dir.
	again, err := detect.NewStage(cfg, []string{"x"}, false, detect.Deps{Log: zerolog.Nop(), Accelerator: g.Accelerator})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if m := again.Model(); m == nil || m.Version != after {
		t.Errorf("a restart serves %v, want the model installed at the stop (version %d)", m, after)
	}
	t.Logf("versions %d at the final commit, %d installed after it; saves: %v", before, after, order)
}
