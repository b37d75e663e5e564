package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestTailSaysWhatItPrintedWhenStopped: tail said "N printed, M copies skipped" only when
// --idle-exit ended it; stopped by Ctrl-C (SIGINT), SIGTERM or --max it printed nothing, so
// the copies it skipped went unsaid (README: the count "when it stops"). Every stop says it now.
// (SIGINT to a child process: the signal would reach the test binary itself.)
func TestTailSaysWhatItPrintedWhenStopped(t *testing.T) {
	runChild()
	top := t
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		path, names := kafkaConfig(t, br, "json")
		createTopics(t, path, 1)
		output := func(id string) *kgo.Record { return outlierOutput(names[1], id) }
		testsupport.Produce(t, br, output("in/0/1"), output("in/0/1"), output("in/0/2"))

		if _, errs, code := outlierd(t, "tail", "--config", path, "--from-beginning", "--max", "1"); code != 0 || !strings.Contains(errs, "1 printed, 0 copies skipped") {
			t.Errorf("--max 1: exit %d, stderr %q: want \"1 printed, 0 copies skipped\"", code, errs)
		}

		var stderr strings.Builder
		cmd, out := startTailChild(t, childCommand(top, "tail", "--config", path, "--from-beginning"), &stderr)
		lines := bufio.NewScanner(out)
		for range 2 { // both outliers printed (the copy skipped before the second)
			if !lines.Scan() {
				t.Fatalf("tail ended before printing 2 lines; stderr %q", stderr.String())
			}
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
		}
		err := cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(stderr.String(), "2 printed, 1 copy skipped") {
			t.Errorf("Ctrl-C: exit %d (%v), stderr %q: want exit 0 and \"2 printed, 1 copy skipped\"", code, err, stderr.String())
		}
	})
}

// TestTailSaysWhatItPrintedOnAnError: tail's help says that however it stops, stderr says how
// many outputs it printed and how many copies it skipped; a stop on an error (here a record of
// the topic that is no outlierd output; a reader's failure alike) said neither. The error names
// both counts.
func TestTailSaysWhatItPrintedOnAnError(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	path, names := kafkaConfig(t, br, "json")
	createTopics(t, path, 1)
	testsupport.Produce(t, br, outlierOutput(names[1], "in/0/1"), outlierOutput(names[1], "in/0/1"),
		&kgo.Record{Topic: names[1], Partition: 0, Value: []byte("not json")})
	_, errs, code := outlierd(t, "tail", "--config", path, "--from-beginning", "--idle-exit", "10s")
	if code != 1 || !strings.Contains(errs, "not an outlierd JSON output") || !strings.Contains(errs, "1 printed, 1 copy skipped") {
		t.Errorf("tail on a record that is no output: exit %d, stderr %q; want exit 1 and \"1 printed, 1 copy skipped\"", code, errs)
	}
}
