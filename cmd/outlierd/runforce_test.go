package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/rs/zerolog"
)

// TestRunSecondSignalExitsAtOnce: a second SIGINT or SIGTERM during the graceful stop was
// swallowed (the stop ran on to run.shutdown_timeout, and then some): the convention of Ctrl-C
// twice is an exit at once. Here the stop is held up by the config load (a named pipe nobody
// writes): the first SIGTERM starts the stop and the run stays; the second signal (SIGINT) ends
// the process at once with status 128+2, logging that the stop did not finish and what that
// leaves undone.
func TestRunSecondSignalExitsAtOnce(t *testing.T) {
	runChild()
	cmd, _, stderr, exited := startRunOnFIFO(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The second signal once the first was taken (logged): sent before, both would wait in Go's
	// signal queue, which hands out the lower number first, SIGINT, as the first.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "stopping:"); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the run exited at the first SIGTERM while its config load was waiting (%v), want the stop to wait for it\n%s", err, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not log the first SIGTERM within 10 s\n%s", stderr)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the run did not exit at a second signal during its stop\n%s", stderr)
	}
	if sig := signalled(err); sig != "" {
		t.Fatalf("the second signal killed the run (%s), want an exit with a status and a log line", sig)
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit status %d (%v), want %d (128 + SIGINT)\n%s", code, err, 128+int(syscall.SIGINT), stderr)
	}
	for _, want := range []string{"second signal", "not committed", "exit_status"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, stderr)
		}
	}
}

// TestSecondStopSignalPlainLine: produce and tail, whose stderr is plain text, say the forced exit
// in their own format ("outlierd tail: ..."), with the status; the first signal ends the context
// and says nothing (their stop prints its own summary). The signals are sent to this process,
// which catches them (catchStop) for the test's length.
func TestSecondStopSignalPlainLine(t *testing.T) {
	var buf testsupport.LogBuffer // (the signals' goroutine writes it: a strings.Builder read here raced its writes)
	codes := stopCaught(t, plainLog(&buf, "tail"), "", "nothing else is lost", syscall.SIGINT)
	if buf.String() != "" {
		t.Errorf("the first signal wrote %q, want nothing", buf.String())
	}
	exitsWith(t, codes, syscall.SIGTERM, "the second signal did not exit")
	want := "outlierd tail: second signal during the stop: exiting at once, the stop unfinished: nothing else is lost exit_status=143 signal=terminated\n"
	if buf.String() != want {
		t.Errorf("second signal's line:\n%q\nwant\n%q", buf.String(), want)
	}
}

// stopCaught has this process catch its stop signals (catchStop with log, stopping and lost)
// for the test's length, with exitNow reporting the status on the channel it returns, and sends
// it first, returning once the first signal ended the stop's context.
func stopCaught(t *testing.T, log zerolog.Logger, stopping, lost string, first syscall.Signal) <-chan int {
	t.Helper()
	codes := make(chan int, 1)
	exitNow = func(code int) { codes <- code }
	t.Cleanup(func() { exitNow = os.Exit })
	s := catchStop(log, stopping, lost)
	t.Cleanup(s.release)
	if err := syscall.Kill(os.Getpid(), first); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the first %v did not end the context", first)
	}
	return codes
}

// exitsWith sends sig to this process and asserts the exit it asks for (exitNow) comes within
// 5 s with status 128 + sig; failing with missed when none comes.
func exitsWith(t *testing.T, codes <-chan int, sig syscall.Signal, missed string) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-codes:
		if code != 128+int(sig) {
			t.Errorf("exit status %d, want %d (128 + %v)", code, 128+int(sig), sig)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(missed)
	}
}
