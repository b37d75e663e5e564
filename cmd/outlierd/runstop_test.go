package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestRunStopDuringStart: a SIGTERM while `outlierd run` starts (pipeline.New checking the
// topics: here for brokers that cannot be reached, up to 30 s) is a graceful stop: the process
// exits 0 at once, saying it stopped during the start. The signal handler was installed after
// New: Go's default action killed the process (no clean exit, no exit status).
//
// The command runs in a process of its own (childCommand).
func TestRunStopDuringStart(t *testing.T) {
	runChild()
	port, _ := testsupport.ReservePort(t) // refused, held for the test: the brokers cannot be reached
	path := writeFile(t, "pipeline.yaml", fmt.Sprintf("ingest:\n  brokers: [\"127.0.0.1:%d\"]\n  topic: in\n  group_id: g\n  features: [temp, pressure]\n"+
		"sink:\n  topic: out\n  dead_letter_topic: dlq\nhttp:\n  listen: \"\"\n", port)) // (no listener: its default port may be taken)
	cmd := childCommand(t, "run", "--config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The signal once the topic check waits for the brokers (New runs), the rest of stderr kept.
	waiting := make(chan struct{})
	var logs strings.Builder
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if !seen && strings.Contains(sc.Text(), "waiting for the brokers to check the topic") {
				seen = true
				close(waiting)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-waiting:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never logged that the topic check waits for the brokers")
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-read; exited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not exit within 15 s of SIGTERM (the start waits up to 30 s)")
	}
	d := time.Since(t0)
	if werr != nil {
		t.Fatalf("run after SIGTERM during the start: %v, want exit status 0 (a graceful stop)\n%s", werr, logs.String())
	}
	if d > 5*time.Second {
		t.Errorf("the run exited %v after SIGTERM, want promptly", d.Round(time.Millisecond))
	}
	if !strings.Contains(logs.String(), "stopped during the start") {
		t.Errorf("the log does not say that the run stopped during the start:\n%s", logs.String())
	}
	t.Logf("exit 0, %v after SIGTERM", d.Round(time.Millisecond))
}
