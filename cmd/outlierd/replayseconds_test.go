package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
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

// TestReplayEpochSecondsWarningOnlyOfNumbers: the pipeline's epoch-seconds dead letter is for
// epoch integers only (b477d87: a time written as text says its unit), but replay's warning
// looked at the times as read whatever their form, so a file of RFC 3339 or "2006-01-02
// 15:04:05" times in January 1970 (a fixture, a device without a real-time clock) was told
// "epoch seconds?", which live reads as written and no producer of seconds wrote (failed before
// the fix: both text files warned). The same instants as epoch integers still warn.
func TestReplayEpochSecondsWarningOnlyOfNumbers(t *testing.T) {
	start := time.UnixMilli(1_764_304_016).UTC() // 1970-01-21T10:05:04.016Z: 1764304016 read as ms
	for _, c := range []struct {
		name   string
		format func(time.Time) string
		warn   bool
	}{
		{"RFC 3339", func(at time.Time) string { return at.Format(time.RFC3339Nano) }, false},
		{"SQL text", func(at time.Time) string { return at.Format("2006-01-02 15:04:05.000") }, false},
		{"epoch integer", func(at time.Time) string { return fmt.Sprint(at.UnixMilli()) }, true},
	} {
		var b strings.Builder
		b.WriteString("ts,temp\n")
		for i := range 300 {
			fmt.Fprintf(&b, "%s,%g\n", c.format(start.Add(time.Duration(i)*time.Millisecond)), 20+float64(i%7)/10)
		}
		in := writeFile(t, "text1970.csv", b.String())
		_, errs, code := outlierd(t, "replay", "--device", "cpu", "--input", in, "--timestamp-column", "ts", "--window", "100", "--min-records", "100")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		if got := strings.Contains(errs, "epoch seconds?"); got != c.warn {
			t.Errorf("%s times of January 1970: warned %v, want %v: %s", c.name, got, c.warn, errs)
		}
	}
}
