package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestProduceInterruptedSaysSo: Ctrl-C during a paced produce ended it with "writing to topic
// T on B after 200 records: context canceled", read as a broker failure. It now says that it
// was interrupted, how many records went and that the rest of the file did not (exit status 1:
// the file was not sent whole). (SIGINT to a child process: the signal would reach the test
// binary itself.)
func TestProduceInterruptedSaysSo(t *testing.T) {
	runChild()
	top := t
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		path, names := kafkaConfig(t, br, "json")
		createTopics(t, path, 1)
		var b strings.Builder
		b.WriteString("temp,pressure\n")
		for i := range 1000 {
			fmt.Fprintf(&b, "%d,%d\n", 70+i%3, 100+i%5)
		}
		data := writeFile(t, "slow.csv", b.String())
		cmd := childCommand(top, "produce", "--config", path, "--input", data, "--rate", "100")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Interrupted once records went (1,000 take 10 s at 100/s): a fixed wait raced the
		// child's start and its topic check on a loaded machine, which say otherwise.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if end, err := testsupport.EndOffsets(context.Background(), br, names[0], 1); err == nil && end[0] > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no record reached topic %s within 20 s; stderr %q", names[0], stderr.String())
			}
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		msg := stderr.String()
		m := regexp.MustCompile(`interrupted: (\d+) records? went to topic \S+, the rest of \S+ was not sent`).FindStringSubmatch(msg)
		if code := cmd.ProcessState.ExitCode(); code != 1 || m == nil || strings.Contains(msg, "context canceled") {
			t.Errorf("Ctrl-C: exit %d (%v), stderr %q: want exit 1 and \"interrupted: N records went to topic ..., the rest of ... was not sent\"", code, err, msg)
		}
	})
}

// TestProducePacedEndsAtItsLastRecord: --rate waited after every write until the records sent
// were due, the last write too: a 1-record file at --rate 0.5 took 2 s after its record went,
// a 100-record file at 10/s 10 s, not 9.9. The wait comes before a write now, never after the
// last.
func TestProducePacedEndsAtItsLastRecord(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		path, _ := kafkaConfig(t, br, "json")
		createTopics(t, path, 1)
		data := writeFile(t, "one.csv", "temp,pressure\n1,2\n")
		start := time.Now()
		if _, errs, code := outlierd(t, "produce", "--config", path, "--input", data, "--rate", "0.5"); code != 0 {
			t.Fatalf("produce: exit %d: %s", code, errs)
		}
		// The record goes at once (its write, the broker's ack: well under a second on either
		// broker); before, 2 s were waited after it (1 record / 0.5 per s).
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("one record at --rate 0.5 took %s: the pace was waited after the last record", took)
		}
	})
}
