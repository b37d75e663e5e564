package main

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestRunSurvivesSIGHUPDuringStart: `outlierd run` caught SIGHUP (a reload) only once the
// pipeline had started; during the start (the topic check waits up to 30 s for brokers that
// cannot be reached) the signal's default action ended the process: a `systemctl reload` just
// after a start stopped the service (systemd counts SIGHUP a clean exit: no restart). The run
// goes on in a child process here (childCommand: the signal would end the test binary), with
// unreachable brokers: it must still be checking the topics after the signal.
func TestRunSurvivesSIGHUPDuringStart(t *testing.T) {
	runChild()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "pipeline.yaml", fmt.Sprintf("ingest:\n  brokers: [\"127.0.0.1:1\"]\n  topic: in\n  group_id: hup\n  features: [temp]\n"+
		"sink:\n  topic: out\n  dead_letter_topic: dlq\nhttp:\n  listen: 127.0.0.1:%d\n", port))
	cmd := childCommand(t, "run", "--config", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	readyz := "http://127.0.0.1:" + strconv.Itoa(port) + "/readyz"
	checking := func() bool {
		st, body, err := testsupport.TryGet(readyz)
		return err == nil && st == 503 && strings.Contains(body, "checking that the topics exist")
	}
	for deadline := time.Now().Add(20 * time.Second); !checking(); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("the run ended before its topic check: %v", waitErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the run's /readyz never said it checks the topics")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("SIGHUP during the start ended the run (%v)", ws.Signal())
			}
		}
		t.Fatalf("the run ended after SIGHUP during the start: %v", waitErr)
	case <-time.After(time.Second):
	}
	if !checking() {
		t.Error("after SIGHUP the run no longer checks the topics")
	}
}
