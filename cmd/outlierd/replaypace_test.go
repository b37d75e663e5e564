package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPaceBatches: batches close at size rows, or (maxWait > 0) at the first row maxWait or
// more after the batch's first; a row earlier than the batch's first joins it.
func TestPaceBatches(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		ts := make([]time.Time, len(ms))
		for i, m := range ms {
			ts[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return ts
	}
	for _, c := range []struct {
		times []time.Time
		size  int
		wait  time.Duration
		want  []int
	}{
		{at(0, 1, 2, 3, 4), 2, 0, []int{2, 4, 5}},
		{at(0, 1, 2, 3, 4), 10, 0, []int{5}},
		{at(0, 1000, 2000, 3000), 1000, 100 * time.Millisecond, []int{1, 2, 3, 4}},
		{at(0, 50, 99, 100, 150, 250), 1000, 100 * time.Millisecond, []int{3, 5, 6}},
		{at(0, 10, 20, 30), 2, 100 * time.Millisecond, []int{2, 4}},
		{at(500, 0, 520, 600, 610), 1000, 100 * time.Millisecond, []int{3, 5}}, // 0: out of order, joins
		{nil, 1000, 0, nil},
	} {
		if got := paceBatches(c.times, c.size, c.wait); !slices.Equal(got, c.want) {
			t.Errorf("paceBatches(%v, %d, %v) = %v, want %v", c.times, c.size, c.wait, got, c.want)
		}
	}
}

// TestReplayPaceEventTime: --pace event-time feeds rows a second apart one a batch, as a live
// pipeline sees a 1 Hz sensor (ingest.max_wait 100ms): its verdicts are those of
// ingest.batch_size: 1, which differ from the default 1000-row batches' (the model recalibrates
// between the rows); rows 10 ms apart go ten a batch; without the rows' times it is refused.
func TestReplayPaceEventTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	csvAt := func(name string, step time.Duration) string {
		var b strings.Builder
		b.WriteString("ts,temp,flow\n")
		t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		for i := range 600 {
			temp := 70 + rng.NormFloat64() + float64(i)/60 // a slow drift: staleness shows
			if i%97 == 50 {
				temp += 25
			}
			fmt.Fprintf(&b, "%s,%.3f,%.3f\n", t0.Add(time.Duration(i)*step).Format(time.RFC3339Nano), temp, 32+rng.NormFloat64())
		}
		return writeFile(t, name, b.String())
	}
	slow := csvAt("slow.csv", time.Second)
	dir := t.TempDir()
	run := func(path, tag string, extra ...string) (int, []byte) {
		t.Helper()
		v := filepath.Join(dir, tag+".csv")
		args := append([]string{"replay", "--input", path, "--timestamp-column", "ts", "--window", "400", "--min-records", "100",
			"--device", "cpu", "--verdicts-out", v, "--json"}, extra...)
		out, errs, code := outlierd(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tag, code, errs)
		}
		var res struct {
			Rows, Batches int
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Rows != 600 {
			t.Fatalf("%s: %d rows", tag, res.Rows)
		}
		body, err := os.ReadFile(v)
		if err != nil {
			t.Fatal(err)
		}
		return res.Batches, body
	}
	nb, paced := run(slow, "paced", "--pace", "event-time")
	one := writeFile(t, "one.yaml", "ingest:\n  batch_size: 1\n")
	n1, ones := run(slow, "ones", "--config", one)
	nd, dflt := run(slow, "default")
	if nb != 600 || n1 != 600 || nd != 1 {
		t.Errorf("batches: paced %d, batch_size 1 %d, default %d; want 600, 600, 1", nb, n1, nd)
	}
	if string(paced) != string(ones) {
		t.Error("--pace event-time at 1 s a row: verdicts differ from ingest.batch_size: 1's")
	}
	if string(paced) == string(dflt) {
		t.Error("--pace event-time gave the 1000-row batches' verdicts: the test no longer tells them apart")
	}
	if n, _ := run(csvAt("fast.csv", 10*time.Millisecond), "fast", "--pace", "event-time"); n != 60 {
		t.Errorf("rows 10 ms apart: %d batches, want 60 (ten rows within ingest.max_wait 100ms)", n)
	}
	for _, c := range [][]string{{"--pace", "event-time"}, {"--pace", "wall"}} {
		_, errs, code := outlierd(t, append([]string{"replay", "--input", slow}, c...)...)
		if code != 2 || !strings.Contains(errs, "--pace") {
			t.Errorf("%v without --timestamp-column: exit %d, %q; want 2 naming --pace", c, code, errs)
		}
	}
}

// TestReplayPaceWithoutTimeNamesTheColumn: --pace event-time without the rows' times is
// refused after the file's columns are read, so that a time-like column is named with the flag
// that reads it (it was refused before the file was opened: `gen --kind sensors --ts`'s "ts"
// went unmentioned).
func TestReplayPaceWithoutTimeNamesTheColumn(t *testing.T) {
	path := writeFile(t, "s.csv", "ts,temp,label\n1767225600000,70,0\n1767225660000,71,0\n1767225720000,70.5,1\n")
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--pace", "event-time", "--device", "cpu")
	if code != 2 || !strings.Contains(errs, "--pace event-time needs the rows' times") || !strings.Contains(errs, "--timestamp-column ts") {
		t.Errorf("exit %d, stderr %q: want exit 2, the --pace error and --timestamp-column ts", code, errs)
	}
	// A spreadsheet's "CSV UTF-8" export begins with a byte order mark, which replay skips
	// (csvfile.SkipBOM): the column named is "ts" all the same, not "\ufeffts" (which no
	// --timestamp-column matches) nor none.
	bom := writeFile(t, "bom.csv", "\ufeffts,temp,label\n1767225600000,70,0\n1767225660000,71,0\n1767225720000,70.5,1\n")
	_, errs, code = outlierd(t, "replay", "--input", bom, "--label-column", "label", "--pace", "event-time", "--device", "cpu")
	if code != 2 || !strings.Contains(errs, "--timestamp-column ts (the column \"ts\" looks like a time)") {
		t.Errorf("a file with a byte order mark: exit %d, stderr %q: want exit 2 naming --timestamp-column ts", code, errs)
	}
}
