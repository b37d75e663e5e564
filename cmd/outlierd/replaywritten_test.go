package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/configs"
	"github.com/outlierd/outlierd/stages/detect"
)

// replayFigures runs replay --json and returns the figures that say which models scored the
// rows (its elapsed time left out), failing the test on a non-zero exit.
func replayFigures(t *testing.T, args ...string) (figures, stderr string) {
	t.Helper()
	out, errs, code := outlierd(t, append([]string{"replay", "--device", "cpu", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var res replayResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		Rows, Batches, Flagged, Unscored, Models int
		AUC, AP                                  string
	}{res.Rows, res.Batches, res.Flagged, res.Unscored, res.ModelsBuilt, fmtFigure(res.ROCAUC), fmtFigure(res.AveragePrecision)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b), errs
}

// TestReplayWrittenMinRecordsIsKept: a detect.min_records the config writes is the user's
// choice, kept where the window holds every row of the file: the first model at that many
// records and the rest as a stream, as the live pipeline does (the batch case set min_records
// to the file's rows, one model of the whole file, whatever the file said), with a stderr line
// saying so and how to get the batch case. Only a min_records left to its default gives the
// batch case, whether the config's window or --window holds the rows; --window below a written
// min_records caps it and says so.
func TestReplayWrittenMinRecordsIsKept(t *testing.T) {
	path, _ := labelledCSV(t, 2000)
	cfg := writeFile(t, "mr.yaml", "detect:\n  min_records: 500\n")
	stream, _ := replayFigures(t, "--input", path, "--label-column", "label", "--window", "5000", "--min-records", "500")
	whole, _ := replayFigures(t, "--input", path, "--label-column", "label", "--window", "5000", "--min-records", "2000")
	if stream == whole {
		t.Fatalf("min_records 500 and 2000 replay alike (%s): the case misses its point", stream)
	}
	note := "detect.min_records 500 (the config's): the first model is built of the first 500 rows"
	for _, args := range [][]string{{"--window", "5000"}, nil} {
		got, errs := replayFigures(t, append([]string{"--input", path, "--label-column", "label", "--config", cfg}, args...)...)
		if got != stream || !strings.Contains(errs, note) || !strings.Contains(errs, "--min-records 2000") {
			t.Errorf("%v: %s, stderr %q: want %s (--min-records 500) and %q naming --min-records 2000", args, got, errs, stream, note)
		}
	}
	// A written min_records above the file's rows: no model, as live; said with its source.
	big := writeFile(t, "big.yaml", "detect:\n  min_records: 3000\n")
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--config", big, "--device", "cpu")
	if want := "2000 rows, fewer than detect.min_records=3000 (the config's): no model would score them (--min-records 2000 or fewer)"; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("min_records 3000 written, 2000 rows: exit %d, stderr %q: want exit 2 and %q", code, errs, want)
	}
	// The window written, min_records not: the batch case, as before.
	win := writeFile(t, "win.yaml", "detect:\n  window: 5000\n")
	if got, errs := replayFigures(t, "--input", path, "--label-column", "label", "--config", win); got != whole || !strings.Contains(errs, "the batch case") {
		t.Errorf("window written alone: %s, stderr %q: want %s (one model of the whole file)", got, errs, whole)
	}
	// --window below the written min_records: capped at it, said.
	capped, _ := replayFigures(t, "--input", path, "--label-column", "label", "--window", "300", "--min-records", "300")
	got, errs := replayFigures(t, "--input", path, "--label-column", "label", "--config", cfg, "--window", "300")
	if want := "detect.min_records 500 (the config's) is above --window 300: capped at 300"; got != capped || !strings.Contains(errs, want) {
		t.Errorf("--window 300 under min_records 500: %s, stderr %q: want %s and %q", got, errs, capped, want)
	}
}

// TestReplayWindowFlagRederivesMinRecords: a min_records the config leaves out follows the
// window the replay runs with, as Derive makes it follow the file's window live (it kept the
// config's window's: a config window of 1000 and --window 1500 built the first model at 1000).
func TestReplayWindowFlagRederivesMinRecords(t *testing.T) {
	path, _ := labelledCSV(t, 3000)
	cfg := writeFile(t, "win.yaml", "detect:\n  window: 1000\n")
	want, _ := replayFigures(t, "--input", path, "--label-column", "label", "--window", "1500", "--min-records", "1500")
	if old, _ := replayFigures(t, "--input", path, "--label-column", "label", "--window", "1500", "--min-records", "1000"); old == want {
		t.Fatalf("min_records 1000 and 1500 replay alike (%s): the case misses its point", want)
	}
	if got, _ := replayFigures(t, "--input", path, "--label-column", "label", "--config", cfg, "--window", "1500"); got != want {
		t.Errorf("config window 1000, --window 1500: %s, want %s (min_records 1500)", got, want)
	}
}

// TestReplayTinyFlagsNameTheFlag: --min-records or --window below 2, or --min-records above
// the window, is refused naming the flag and what it must be; it was refused with keys the
// user never set ("detect.distance.k: must be in [1, min_records=1), got 1", which followed
// min_records down). 2 and 3 replay with every detector.
func TestReplayTinyFlagsNameTheFlag(t *testing.T) {
	path, _ := labelledCSV(t, 300)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--min-records", "1"}, "--min-records 1: a model needs at least 2 records"},
		{[]string{"--min-records", "1", "--window", "100"}, "--min-records 1: a model needs at least 2 records"},
		{[]string{"--window", "1"}, "--window 1: a window holds at least 2 records"},
		{[]string{"--min-records", "200", "--window", "100"}, "--min-records 200 is above --window 100"},
		{[]string{"--min-records", "60000"}, "--min-records 60000 is above detect.window 50000"},
	} {
		_, errs, code := outlierd(t, append([]string{"replay", "--input", path, "--label-column", "label", "--device", "cpu"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Contains(errs, "distance") || strings.Contains(errs, "detect.min_records") {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 and %q, no key the user did not set", c.args, code, errs, c.want)
		}
	}
	all := writeFile(t, "all.yaml", "detect:\n  proclus:\n    enabled: true\n  hypercube:\n    enabled: true\n")
	for _, det := range []string{"both", "density", "distance"} {
		cfg := writeFile(t, det+".yaml", "detect:\n  score:\n    detectors: "+det+"\n")
		for _, mr := range []string{"2", "3"} {
			for _, c := range []string{cfg, all} {
				if got, _ := replayFigures(t, "--input", path, "--label-column", "label", "--config", c, "--min-records", mr, "--window", "100"); !strings.Contains(got, `"Unscored":0`) {
					t.Errorf("%s, --min-records %s: %s", c, mr, got)
				}
			}
		}
	}
}

// TestReplayLoweredWrittenSizeSaid: a size bounded by min_records that the config writes
// (distance.k) follows a smaller --min-records down so that the replay runs, and stderr says
// so: it was lowered silently, though the value was the user's.
func TestReplayLoweredWrittenSizeSaid(t *testing.T) {
	path, _ := labelledCSV(t, 300)
	cfg := writeFile(t, "k.yaml", "detect:\n  distance:\n    k: 20\n")
	_, errs := replayFigures(t, "--input", path, "--label-column", "label", "--config", cfg, "--min-records", "5", "--window", "100")
	if want := "detect.distance.k 20 (the config's) is lowered to 4"; !strings.Contains(errs, want) || strings.Contains(errs, "density.clusters") {
		t.Errorf("stderr %q: want %q, and nothing of keys the config does not write", errs, want)
	}
}

// TestReplayHelpSaysKeysColdStartAndWrittenMinRecords: replay's help says, where it describes
// models per key, that a key's first keys.min_records rows are scored by the global model and
// that nothing is scored before the global model's first (a user replaying a fleet saw rows
// "scored by the global model" the help never mentioned); and that a min_records the config
// writes is kept rather than the batch case.
func TestReplayHelpSaysKeysColdStartAndWrittenMinRecords(t *testing.T) {
	out, _, code := outlierd(t, "replay", "-h")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	about, flags, _ := strings.Cut(out, "\nFlags:")
	about = strings.Join(strings.Fields(about), " ")
	for _, want := range []string{
		// (the default as the help writes it: a change of the default fails here)
		fmt.Sprintf("a key's first detect.keys.min_records rows (%d) are scored by the global model", detect.Default().Keys.MinRecords),
		"none before the global model's first",
		"a detect.min_records the config writes is kept",
	} {
		if !strings.Contains(about, want) {
			t.Errorf("replay's help lacks %q:\n%s", want, about)
		}
	}
	_, keyBy, _ := strings.Cut(flags, "-key-by")
	keyBy, _, _ = strings.Cut(keyBy, "\n  -")
	if !strings.Contains(keyBy, "keys.min_records") || !strings.Contains(keyBy, "global model") {
		t.Errorf("--key-by's text says nothing of a key's cold start: %q", keyBy)
	}
	_, win, _ := strings.Cut(flags, "-window")
	if win, _, _ = strings.Cut(win, "\n  -"); !strings.Contains(win, "detect.min_records") {
		t.Errorf("--window's text does not say the batch case needs min_records left to the default: %q", win)
	}
}

// TestReplaySkabCommandAsWritten: configs/skab.yaml's replay command, as its comment writes
// it (no --min-records), builds the first model of its written min_records 170 rows, the
// verdicts of --min-records 170; a plant file shorter than the window was the batch case.
func TestReplaySkabCommandAsWritten(t *testing.T) {
	path, _ := plantCSV(t)
	shipped, err := configs.FS.ReadFile("skab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(shipped), "--label-column anomaly\n") {
		t.Fatal("configs/skab.yaml's replay command has changed: this test runs it")
	}
	cfg := writeFile(t, "skab.yaml", string(shipped))
	want, _ := replayFigures(t, "--input", path, "--label-column", "label", "--config", cfg, "--min-records", "170")
	if batch, _ := replayFigures(t, "--input", path, "--label-column", "label", "--config", cfg, "--min-records", "1200"); batch == want {
		t.Fatalf("min_records 170 and the batch case (1200, the file's rows) replay alike (%s): the case misses its point", want)
	}
	if got, _ := replayFigures(t, "--input", path, "--label-column", "label", "--config", cfg); got != want {
		t.Errorf("skab.yaml without --min-records: %s, want %s (--min-records 170)", got, want)
	}
}
