package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestRunSignalsServeOneRun: the signals mainWith catches for run (runSignals) serve that run
// alone. They were left set after it, released (their context ended), so a later run in the
// same process (a test's) would take them and stop "during the start" at once.
func TestRunSignalsServeOneRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	runSignals = catchRunSignals(&stderr) // (as mainWith("run") catches them)
	t.Cleanup(func() { runSignals = nil })
	if code := run([]string{"run", "--config", filepath.Join(t.TempDir(), "none.yaml")}, &stdout, &stderr); code == 0 {
		t.Fatalf("run on a missing config: exit 0, want a failure; stderr:\n%s", stderr.String())
	}
	if runSignals != nil {
		t.Fatalf("after the run, runSignals is still set (its context ended: %v); the next run in this process would take them", runSignals.ctx.Err())
	}
}
