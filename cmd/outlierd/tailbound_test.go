package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// Bounds of TestTailPastALostRequest. tailLostWhile: the broker loses every request for 2 s:
// a fetch in flight (a long poll of 500 ms) and whatever the reader asks next. tailRecoverWithin:
// once the broker answers again, the attempt in flight ends within 5 s (pipeline's
// brokerAttemptWait, the bound of one exchange with a broker), then a backoff (under 1 s after
// the two or three attempts a loss of 2 s costs), a dial and a fetch answered at once; 3 s of
// slack for a loaded 2-core machine's timers and dials (pipeline's attemptSlack). tailStopWithin:
// ^C ends a read at once; the same slack.
const (
	tailLostWhile     = 2 * time.Second
	tailRecoverWithin = 5*time.Second + time.Second + 3*time.Second
	tailStopWithin    = 3 * time.Second
)

// TestTailPastALostRequest: tail's broker loses every request for tailLostWhile, then answers
// again: the output written after that is printed within tailRecoverWithin, and ^C, while the
// broker loses every request again, ends tail within tailStopWithin with its summary. Failed
// first (kafka-go's Reader): its re-dial's metadata request, lost, was bounded by nothing but
// the Reader's close, so tail never printed the second output (nor said anything). In a child
// process: SIGINT would reach the test binary.
func TestTailPastALostRequest(t *testing.T) {
	runChild()
	br, lose := testsupport.LosingBroker(t)
	path, names := kafkaConfig(t, br, "json")
	createTopics(t, path, 1)
	testsupport.Produce(t, br, outlierOutput(names[1], "in/0/1"))

	var stderr testsupport.LogBuffer
	cmd, out := startTailChild(t, childCommand(t, "tail", "--config", path, "--from-beginning"), &stderr)
	exited := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	printed := func(id string, within time.Duration) {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok || !strings.HasPrefix(l, id+" ") {
				t.Fatalf("tail printed %q (open %v), want output %s; stderr:\n%s", l, ok, id, stderr.String())
			}
		case <-time.After(within):
			t.Fatalf("tail did not print output %s within %v; stderr:\n%s", id, within, stderr.String())
		}
	}
	printed("in/0/1", 20*time.Second)

	lose(true)
	time.Sleep(tailLostWhile)
	lose(false)
	testsupport.Produce(t, br, outlierOutput(names[1], "in/0/2"))
	t0 := time.Now()
	printed("in/0/2", tailRecoverWithin)
	t.Logf("output 2 printed %v after it was written, the broker having lost every request for %v", time.Since(t0).Round(time.Millisecond), tailLostWhile)

	lose(true)
	time.Sleep(tailLostWhile / 2)
	t0 = time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	select {
	case err := <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(stderr.String(), "2 printed, 0 copies skipped") {
			t.Errorf("^C: exit %d (%v), stderr:\n%s\nwant exit 0 and \"2 printed, 0 copies skipped\"", code, err, stderr.String())
		}
		t.Logf("tail stopped %v after ^C, the broker losing its requests", time.Since(t0).Round(time.Millisecond))
	case <-time.After(tailStopWithin):
		t.Fatalf("tail had not stopped %v after ^C, the broker losing its requests; stderr:\n%s", tailStopWithin, stderr.String())
	}
}

// startTailChild starts cmd (a child `outlierd tail`) with its stderr to stderr and returns its
// stdout.
func startTailChild(t *testing.T, cmd *exec.Cmd, stderr io.Writer) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}
