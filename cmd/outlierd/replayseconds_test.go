package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestReplayWarnsOfEpochSeconds: replay reads an integer time as epoch milliseconds, as the
// pipeline does, but has no Kafka timestamp to tell a producer's epoch seconds by (the pipeline
// refuses them: TestSourceEpochSecondsRefusedKfake): a file of Unix seconds was replayed as
// rows of January 1970, a second apart read as a millisecond (time_of_day, --pace event-time's
// batches and alert_cooldown all wrong), and nothing said so. Now, when every row's time read
// as seconds lies in 2000-2286 (so as milliseconds in 1970's first four months), stderr says so
// and the replay goes on; a file of milliseconds says nothing.
func TestReplayWarnsOfEpochSeconds(t *testing.T) {
	for _, c := range []struct {
		name  string
		scale int64
		warn  bool
	}{{"seconds", 1, true}, {"milliseconds", 1000, false}} {
		var b strings.Builder
		b.WriteString("ts,temp\n")
		for i := range 300 {
			fmt.Fprintf(&b, "%d,%g\n", (1_764_304_016+int64(i))*c.scale, 20+float64(i%7)/10)
		}
		in := writeFile(t, "seconds.csv", b.String())
		_, errs, code := outlierd(t, "replay", "--device", "cpu", "--input", in, "--timestamp-column", "ts", "--window", "100", "--min-records", "100")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		if got := strings.Contains(errs, "epoch seconds?"); got != c.warn {
			t.Errorf("%s: warned %v, want %v: %s", c.name, got, c.warn, errs)
		}
	}
}
