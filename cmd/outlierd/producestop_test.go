package main

import (
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
		path, _ := kafkaConfig(t, br, "json")
		if _, errs, code := outlierd(t, "topics", "create", "--config", path, "--partitions", "1"); code != 0 {
			t.Fatalf("topics create: %s", errs)
		}
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
		time.Sleep(1500 * time.Millisecond) // about 150 of the 1,000 records sent (10 s at 100/s)
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		msg := stderr.String()
		m := regexp.MustCompile(`interrupted: (\d+) records went to topic \S+, the rest of \S+ was not sent`).FindStringSubmatch(msg)
		if code := cmd.ProcessState.ExitCode(); code != 1 || m == nil || strings.Contains(msg, "context canceled") {
			t.Errorf("Ctrl-C: exit %d (%v), stderr %q: want exit 1 and \"interrupted: N records went to topic ..., the rest of ... was not sent\"", code, err, msg)
		}
	})
}
