package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/csvfile"
	"github.com/outlierd/outlierd/stages/ingest"
)

// outlierd runs the CLI in-process and returns stdout, stderr and the exit status.
func outlierd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func gen(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := outlierd(t, append([]string{"gen"}, args...)...)
	if code != 0 {
		t.Fatalf("gen %v: exit %d: %s", args, code, errs)
	}
	return writeFile(t, "data.csv", out)
}

// TestTopNSolvingSetEqualsBruteForce runs the documented contract end to end: both algorithms
// give the same outliers and w*, the JSON has the contract's fields, and the exact weights
// agree with the oracle computed independently here.
func TestTopNSolvingSetEqualsBruteForce(t *testing.T) {
	path := gen(t, "--kind", "g3d", "--rows", "3000", "--seed", "4")
	var res [2]map[string]any
	for i, algo := range []string{"solvingset", "bruteforce"} {
		out, errs, code := outlierd(t, "topn", "--input", path, "--k", "10", "--n", "15", "--m", "50", "--algorithm", algo, "--device", "cpu", "--json")
		res[i] = contractJSON(t, algo, out, errs, code, "algorithm", "device", "rows", "dims", "k", "n", "m", "w_star", "outliers",
			"solving_set_size", "iterations", "distance_computations", "elapsed_ms")
	}
	if res[0]["w_star"] != res[1]["w_star"] {
		t.Fatalf("w* differs: solvingset %v, bruteforce %v", res[0]["w_star"], res[1]["w_star"])
	}
	a, _ := json.Marshal(res[0]["outliers"])
	b, _ := json.Marshal(res[1]["outliers"])
	if string(a) != string(b) {
		t.Fatalf("outliers differ:\n%s\n%s", a, b)
	}
	// Independent check of the weights: the oracle over the same file.
	tab, err := csvfile.ReadFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	w := solvingset.Weights(tab.Cols, 10, 0)
	idx := make([]int, len(w))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool { return w[idx[x]] > w[idx[y]] || (w[idx[x]] == w[idx[y]] && idx[x] < idx[y]) })
	outs := res[0]["outliers"].([]any)
	for r, o := range outs[:15] {
		row := int(o.(map[string]any)["row"].(float64))
		if row != idx[r] || o.(map[string]any)["weight"].(float64) != w[row] {
			t.Fatalf("rank %d: row %d weight %v, oracle row %d weight %v", r, row, o.(map[string]any)["weight"], idx[r], w[idx[r]])
		}
	}
}

// TestTopNModelPredictNeverMisses: the model written by topn flags, in predict, every held-out
// row whose exact weight against the training data reaches w*.
func TestTopNModelPredictNeverMisses(t *testing.T) {
	train := gen(t, "--kind", "g2d", "--rows", "4000", "--seed", "1")
	test := gen(t, "--kind", "g2d", "--rows", "1000", "--seed", "2")
	model := filepath.Join(t.TempDir(), "g2d.model")
	if _, errs, code := outlierd(t, "topn", "--input", train, "--k", "20", "--n", "30", "--model-out", model, "--json", "--device", "cpu"); code != 0 {
		t.Fatalf("topn: %s", errs)
	}
	out, errs, code := outlierd(t, "predict", "--model", model, "--input", test, "--json", "--device", "cpu")
	if code != 0 {
		t.Fatalf("predict: %s", errs)
	}
	var pr struct {
		Rows    int     `json:"rows"`
		WStar   float64 `json:"w_star"`
		Flagged int     `json:"flagged"`
		Results []struct {
			Row     int     `json:"row"`
			Weight  float64 `json:"weight"`
			Outlier bool    `json:"outlier"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	trainTab, _ := csvfile.ReadFile(train, "")
	testTab, _ := csvfile.ReadFile(test, "")
	exact := make([]float64, testTab.Rows())
	solvingset.KNNWeights(trainTab.Cols, testTab.Cols, 20, 0, exact)
	flagged := 0
	for i, r := range pr.Results {
		if r.Row != i {
			t.Fatalf("results not in input order at %d", i)
		}
		if exact[i] >= pr.WStar && !r.Outlier {
			t.Fatalf("row %d: exact weight %v >= w* %v but not flagged (weight vs S %v)", i, exact[i], pr.WStar, r.Weight)
		}
		if r.Weight < exact[i] {
			t.Fatalf("row %d: w_k(q,S) %v < w_k(q,D) %v: S is a subset of D, impossible", i, r.Weight, exact[i])
		}
		if r.Outlier {
			flagged++
		}
	}
	if flagged != pr.Flagged || pr.Rows != 1000 {
		t.Fatalf("flagged %d vs %d, rows %d", flagged, pr.Flagged, pr.Rows)
	}
}

func TestBadInputOneClearLine(t *testing.T) {
	good := writeFile(t, "good.csv", "a,b\n1,2\n3,4\n5,6\n")
	bad := writeFile(t, "bad.csv", "a,b\n1,2\n3,x\n")
	other := writeFile(t, "other.csv", "a,c\n1,2\n3,4\n")
	model := filepath.Join(t.TempDir(), "m.model")
	if _, errs, code := outlierd(t, "topn", "--input", good, "--k", "1", "--n", "1", "--model-out", model); code != 0 {
		t.Fatal(errs)
	}
	corrupt := writeFile(t, "corrupt.model", "not a model")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topn", "--input", bad}, 1, bad + `:3:3: column "b": not a number: "x"`},
		{[]string{"topn", "--input", filepath.Join(t.TempDir(), "missing.csv")}, 1, "missing.csv: cannot open"},
		{[]string{"topn", "--input", good, "--k", "3", "--n", "1"}, 2, "k must be"},
		{[]string{"topn", "--input", good, "--k", "1", "--n", "0"}, 2, "n must be"},
		{[]string{"topn", "--input", good, "--label-column", "zzz"}, 1, `label column "zzz" not in the header`},
		{[]string{"predict", "--model", model, "--input", other}, 1, "differ from the model's"},
		{[]string{"predict", "--model", corrupt, "--input", good}, 1, "corrupt.model"},
		{[]string{"density", "--input", good, "--eta", "2"}, 2, "--eta must be in (0, 1]"},
		{[]string{"gen", "--kind", "nope", "--rows", "10"}, 2, "--kind must be one of"},
		// --rows left out: said to be required (it read "--rows must be >= 2, got 0").
		{[]string{"gen", "--kind", "sensors"}, 2, "--rows is required"},
		{[]string{"gen", "--kind", "sensors", "--rows", "1"}, 2, "--rows must be >= 2, got 1"},
		{[]string{"nope"}, 2, "unknown command"},
	}
	for _, c := range cases {
		_, errs, code := outlierd(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errs)
			continue
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		last := lines[len(lines)-1] // earlier lines are the log (device choice)
		if !strings.Contains(last, c.want) {
			t.Errorf("%v: message %q does not contain %q", c.args, last, c.want)
		}
	}
}

// TestDensityScoresOutAgreesWithJSON: F1 recomputed from --scores-out equals the JSON's, the
// CSV has one line per input row in order, and the subspace names are features.
func TestDensityScoresOutAgreesWithJSON(t *testing.T) {
	path := gen(t, "--kind", "three", "--rows", "3000", "--dims", "4", "--seed", "3")
	scores := filepath.Join(t.TempDir(), "scores.csv")
	for _, gran := range []string{"cluster", "record"} {
		out, errs, code := outlierd(t, "density", "--input", path, "--label-column", "label", "--clusters", "50",
			"--granularity", gran, "--scores-out", scores, "--json", "--device", "cpu")
		js := contractJSON(t, gran, out, errs, code, "mode", "granularity", "rows", "dims", "clusters", "flagged", "elapsed_ms",
			"timings", "precision", "recall", "f1", "roc_auc")
		f, _ := os.Open(scores)
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(recs[0], ",") != "row,flag,eta_probability,subspace" || len(recs) != 3001 {
			t.Fatalf("scores header %v, %d lines", recs[0], len(recs))
		}
		tab, _ := csvfile.ReadFile(path, "label")
		flags := make([]bool, 3000)
		for i, r := range recs[1:] {
			if r[0] != strconv.Itoa(i) {
				t.Fatalf("line %d has row %s", i+1, r[0])
			}
			flags[i] = r[1] == "1"
			for _, name := range strings.Split(r[3], "+") {
				if name != "" && !strings.HasPrefix(name, "x") {
					t.Fatalf("subspace %q is not a feature name", r[3])
				}
			}
		}
		f1 := quality.Count(flags, tab.Outliers()).F1()
		if math.Abs(f1-js["f1"].(float64)) > 1e-12 {
			t.Fatalf("%s: F1 from scores-out %v, JSON %v", gran, f1, js["f1"])
		}
		// 'three' has well separated inlier clusters: the paper's method finds its outliers.
		if f1 < 0.5 {
			t.Errorf("%s: F1 %v on 'three' is implausibly low", gran, f1)
		}
	}
}

func TestLintShippedAndBadConfig(t *testing.T) {
	if out, errs, code := outlierd(t, "lint", "--config", "../../configs/pipeline.yaml"); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("lint pipeline.yaml: %d %s", code, errs)
	}
	bad := writeFile(t, "bad.yaml", "ingest:\n  topic: t\n  featurez: [a]\n")
	_, errs, code := outlierd(t, "lint", "--config", bad)
	if code == 0 || !strings.Contains(errs, "bad.yaml:3:3") || !strings.Contains(errs, "featurez") {
		t.Fatalf("misspelt key: exit %d, %q", code, errs)
	}
}

// contractJSON checks a command's run against its JSON contract: exit 0, stdout one JSON object
// with every one of fields; it returns the object. what names the run in failures.
func contractJSON(t *testing.T, what, out, errs string, code int, fields ...string) map[string]any {
	t.Helper()
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", what, code, errs)
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("%s: stdout is not one JSON object: %v\n%s", what, err, out)
	}
	for _, f := range fields {
		if _, ok := js[f]; !ok {
			t.Errorf("%s: JSON lacks %q", what, f)
		}
	}
	return js
}

// TestGenSensorsColumns: gen --kind sensors writes ts, key, the features, anomaly_kind and
// label in that order, the label agrees with the kind column, and the other kinds' options
// are refused with it (and its options with them).
func TestGenSensorsColumns(t *testing.T) {
	out, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "3000", "--ts", "--keys", "5", "--sensors", "2",
		"--spike-rate", "0.01", "--stuck", "1", "--stuck-length", "20", "--kind-column", "--seed", "3")
	if code != 0 {
		t.Fatal(errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "ts,key,value1,value2,anomaly_kind,label" || len(lines) != 3001 {
		t.Fatalf("header %q, %d lines", lines[0], len(lines))
	}
	spikes, stuck := 0, 0
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if (f[4] != "") != (f[5] == "1") {
			t.Fatalf("kind %q disagrees with label %q: %s", f[4], f[5], l)
		}
		spikes += strings.Count(f[4], "spike")
		stuck += strings.Count(f[4], "stuck")
	}
	if spikes != 30 || stuck != 20 {
		t.Fatalf("%d spike rows and %d stuck rows, want 30 and 20", spikes, stuck)
	}
	for _, c := range []struct{ args []string }{
		{[]string{"gen", "--kind", "sensors", "--rows", "10", "--outlier-ratio", "0.1"}},
		{[]string{"gen", "--kind", "g2d", "--rows", "10", "--spike-rate", "0.1"}},
		{[]string{"gen", "--kind", "sensors", "--rows", "10", "--correlation", "1"}},
	} {
		if _, errs, code := outlierd(t, c.args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d (%s), want 2 with a message", c.args, code, errs)
		}
	}
}

// TestGenKeyColumnNameFitsCSV: a --key-column name with the delimiter, a quote or a line break
// is refused. Written as is, "a,b" made a header of one column more than every row: a file
// that the batch commands and replay refuse, or read shifted by a column.
func TestGenKeyColumnNameFitsCSV(t *testing.T) {
	for _, name := range []string{"a,b", `a"b`, "a\nb", "a\rb"} {
		out, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "10", "--keys", "2", "--key-column", name)
		if code != 2 || out != "" || !strings.Contains(errs, "--key-column") {
			t.Errorf("--key-column %q: exit %d, %d bytes out, stderr %q: want exit 2 naming the flag, nothing written", name, code, len(out), errs)
		}
	}
}

// TestGenHugeCountsRefused: gen holds the data set in memory, and a count too large for it
// (rows, dims, a fleet's keys or sensors, spans) is refused naming it. --rows
// 9223372036854775807 panicked (makeslice: len out of range) on every kind, and --shifts so
// large grew memory without bound before writing a row.
func TestGenHugeCountsRefused(t *testing.T) {
	huge := "9223372036854775807"
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--rows", []string{"--kind", "sensors", "--rows", huge}},
		{"--rows", []string{"--kind", "g2d", "--rows", huge}},
		{"--rows", []string{"--kind", "machines", "--rows", huge}},
		{"--rows", []string{"--kind", "three", "--rows", huge}},
		{"--dims", []string{"--kind", "g2d", "--rows", "10", "--dims", huge}},
		{"--dims", []string{"--kind", "one", "--rows", "10", "--dims", huge}},
		{"--dims", []string{"--kind", "g2d", "--rows", "100000000", "--dims", "100"}},
		{"--keys", []string{"--kind", "sensors", "--rows", "10", "--keys", huge}},
		{"--sensors", []string{"--kind", "sensors", "--rows", "10", "--keys", "2", "--sensors", huge}},
		{"shifts must be at most rows", []string{"--kind", "sensors", "--rows", "100", "--shifts", huge}},
		{"stuck must be at most rows", []string{"--kind", "sensors", "--rows", "100", "--stuck", huge}},
	} {
		out, errs, code := outlierd(t, append([]string{"gen"}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, c.flag) || strings.Contains(errs, "panic") {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 naming %s", c.args, code, errs, c.flag)
		}
	}
}

// TestGenTimesFitEpochMS: --start-ms and --period-ms whose last row's time is past int64 epoch
// milliseconds are refused; the ts column wrapped around to negative times, a stream out of the
// time order it promises. The extremes that fit are written.
func TestGenTimesFitEpochMS(t *testing.T) {
	for _, args := range [][]string{
		{"--period-ms", "9223372036854775807"},
		{"--start-ms", "9223372036854775807", "--period-ms", "1000"},
		{"--start-ms", "0", "--period-ms", "4611686018427387904"},
	} {
		out, errs, code := outlierd(t, append([]string{"gen", "--kind", "sensors", "--rows", "3", "--ts"}, args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, "start-ms") {
			t.Errorf("%v: exit %d, stderr %q, out %q: want exit 2 naming start-ms and period-ms", args, code, errs, out)
		}
	}
}

// TestGenTimesFitRFC3339: a --start-ms, --rows and --period-ms whose first or last row's time is
// outside RFC 3339's years 0000-9999 is refused at the flags, naming them and the time it would
// write: replay and the pipeline refuse such a time (bad_event_time), so gen wrote a stream
// they read none of (exit 0 before). The widest span that fits, 0000-01-01T00:00:00Z to
// 9999-12-31T23:59:59.999Z, is written.
func TestGenTimesFitRFC3339(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--start-ms", "253402300799999"}, []string{"--start-ms 253402300799999", "--rows 3", "--period-ms 60000", "253402300919999", "10000-01-01T00:01:59.999Z", "bad_event_time"}},
		{[]string{"--start-ms", "0", "--period-ms", "126701150400000"}, []string{"--period-ms 126701150400000", "253402300800000", "10000-01-01T00:00:00Z"}},
		{[]string{"--start-ms", "-62167219200001"}, []string{"--start-ms -62167219200001", "-0001-12-31T23:59:59.999Z", "0000-01-01T00:00:00Z"}},
		{[]string{"--start-ms", "-9223372036854775808", "--period-ms", "4611686018427387903"}, []string{"--start-ms -9223372036854775808"}},
	} {
		out, errs, code := outlierd(t, append([]string{"gen", "--kind", "sensors", "--rows", "3", "--ts"}, c.args...)...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stderr %q, out %q: want exit 2", c.args, code, errs, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q does not say %q", c.args, errs, w)
			}
		}
	}
	out, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "2", "--ts", "--start-ms", "-62167219200000", "--period-ms", "315569519999999")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(rows) != 3 || !strings.HasPrefix(rows[1], "-62167219200000,") || !strings.HasPrefix(rows[2], "253402300799999,") {
		t.Errorf("the widest span that fits: exit %d, stderr %q, out %q", code, errs, out)
	}
}

// TestOutputIsNotTheInput: an output file option naming the input file is refused before any
// work; replay --verdicts-out, density and hypercube --scores-out, proclus --assignments-out
// and topn --model-out overwrote the input (exit 0), the data they were made from lost.
func TestOutputIsNotTheInput(t *testing.T) {
	raw, err := os.ReadFile(gen(t, "--kind", "machines", "--rows", "300", "--seed", "7", "--outlier-ratio", "0.01"))
	if err != nil {
		t.Fatal(err)
	}
	data := string(raw)
	for _, c := range []struct{ cmd, flag string }{
		{"replay", "--verdicts-out"}, {"density", "--scores-out"}, {"hypercube", "--scores-out"},
		{"proclus", "--assignments-out"}, {"topn", "--model-out"},
	} {
		path := writeFile(t, "in.csv", data)
		args := []string{c.cmd, "--input", path, "--label-column", "label", c.flag, path}
		if c.cmd == "proclus" {
			args = append(args, "--k", "2", "--l", "2")
		}
		_, errs, code := outlierd(t, args...)
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if code != 2 || !strings.Contains(errs, "is the input file") || string(after) != data {
			t.Errorf("%s %s the input: exit %d, stderr %q, input kept %v", c.cmd, c.flag, code, errs, string(after) == data)
		}
	}
}

// TestGenRefusalsNameKindsThatTakeThem: gen refuses an option the kind ignores, and where the
// message says which kinds it applies to ("applies to --kind one|three only"), each of them
// takes it (--offset on g2d named three, which refuses it in turn).
func TestGenRefusalsNameKindsThatTakeThem(t *testing.T) {
	values := map[string]string{"outlier-ratio": "0.1", "offset": "3", "outlier-dims": "0.5", "uncertainty-multiplier": "1"}
	for _, kind := range []string{"g2d", "g3d", "machines", "three"} {
		for flag, v := range values {
			_, errs, code := outlierd(t, "gen", "--kind", kind, "--rows", "10", "--"+flag, v)
			if code == 0 {
				continue
			}
			_, list, ok := strings.Cut(errs, "applies to --kind ")
			if !ok {
				continue
			}
			list, _, _ = strings.Cut(list, " ")
			for _, k := range strings.Split(list, "|") {
				if _, errs2, code := outlierd(t, "gen", "--kind", k, "--rows", "10", "--"+flag, v); code != 0 {
					t.Errorf("--kind %s --%s: %q; but --kind %s --%s: %s", kind, flag, strings.TrimSpace(errs), k, flag, errs2)
				}
			}
		}
	}
}

// TestGenFleetOptionsNeedKeys: the fleet's options (--key-column, --baseline-*, --noise-*)
// shape only a fleet (--keys); without it they were ignored without a word (a --key-column
// wrote no key column), where every other option a stream ignores is refused.
func TestGenFleetOptionsNeedKeys(t *testing.T) {
	for _, f := range [][2]string{{"key-column", "sensor_id"}, {"baseline-min", "3"}, {"baseline-max", "30"}, {"noise-min", "2"}, {"noise-max", "3"}} {
		_, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "10", "--"+f[0], f[1])
		if code != 2 || !strings.Contains(errs, "--"+f[0]) || !strings.Contains(errs, "--keys") {
			t.Errorf("--%s %s without --keys: exit %d, %q (want 2, naming it and --keys)", f[0], f[1], code, errs)
		}
		if _, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "10", "--keys", "2", "--"+f[0], f[1]); code != 0 {
			t.Errorf("--%s %s with --keys 2: %s", f[0], f[1], errs)
		}
	}
}

// TestDemoRefusesImpossibleRates: --anomaly-rate and --malformed-rate are fractions and
// --duration a time to stop after; demo started with 1.5 ("150.0% anomalies"), -0.1 or a
// negative duration (then running until Ctrl-C) instead of refusing them as it refuses --rate 0.
func TestDemoRefusesImpossibleRates(t *testing.T) {
	for _, args := range [][]string{
		{"--anomaly-rate", "1.5"}, {"--anomaly-rate", "-0.1"}, {"--anomaly-rate", "NaN"},
		{"--malformed-rate", "2"}, {"--malformed-rate", "-1"}, {"--duration", "-1s"},
	} {
		done := make(chan struct{})
		var errs string
		var code int
		go func() {
			defer close(done)
			_, errs, code = outlierd(t, append([]string{"demo"}, args...)...)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("demo %v: still running after 20 s (want it refused at once)", args)
		}
		if code != 2 || !strings.Contains(errs, args[0]) {
			t.Errorf("demo %v: exit %d, %q (want 2, naming %s)", args, code, errs, args[0])
		}
	}
}

// TestCSVWithByteOrderMark: a spreadsheet's "CSV UTF-8" export starts with a UTF-8 byte order
// mark. It stuck to the first column's name ("\ufefftemp"): replay --config refused the file
// ("temp" is neither a csv_header name nor a column index; "columns not read: \ufefftemp",
// the mark invisible), topn named the feature with it, and produce sent every record as
// {"\ufefftemp": ...}, a dead letter for a config with feature temp. The mark is skipped.
func TestCSVWithByteOrderMark(t *testing.T) {
	var b strings.Builder
	b.WriteString("\ufefftemp,pressure,label\n")
	for i := range 300 {
		fmt.Fprintf(&b, "%d.5,%d,%d\n", 20+i%7, 100+i%3, 0)
	}
	path := writeFile(t, "bom.csv", b.String())
	cfg := writeFile(t, "c.yaml", "ingest:\n  features: [temp, pressure]\ndetect:\n  window: 300\n  min_records: 100\n")
	if _, errs, code := outlierd(t, "replay", "--input", path, "--config", cfg, "--label-column", "label", "--json"); code != 0 || strings.Contains(errs, "not read") {
		t.Errorf("replay --config: exit %d: %s", code, errs)
	}
	out, errs, code := outlierd(t, "topn", "--input", path, "--label-column", "label", "--k", "5", "--n", "3", "--device", "cpu", "--json")
	if code != 0 || !strings.Contains(out, `"features":["temp","pressure"]`) {
		t.Errorf("topn: exit %d, %s %s", code, out[max(0, len(out)-150):], errs)
	}
	for _, format := range []ingest.Format{ingest.FormatJSON, ingest.FormatLogfmt} {
		in := ingestJSON()
		in.Format, in.Features = format, []string{"temp", "pressure"}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := newRecordReader(f, path, "csv", in, ',', "")
		if err != nil {
			t.Fatal(err)
		}
		_, v, err := r.next()
		f.Close()
		if err != nil || len(r.lacks) != 0 || !strings.HasPrefix(string(v), `{"temp":20.5`) && !strings.HasPrefix(string(v), "temp=20.5") {
			t.Errorf("produce as %s: first message %q, lacks %q, %v", format, v, r.lacks, err)
		}
	}
}

// TestTailRefusesNegativeLimits: tail --idle-exit -1s ran until Ctrl-C and --max -1 printed
// without limit, both silently; as their zeros mean "no limit", a negative one is a mistake.
func TestTailRefusesNegativeLimits(t *testing.T) {
	cfg := writeFile(t, "c.yaml", "ingest:\n  brokers: [\"127.0.0.1:1\"]\n  topic: in\n  features: [a]\nsink:\n  topic: out\n  dead_letter_topic: dlq\n")
	for _, args := range [][]string{{"--idle-exit", "-1s"}, {"--max", "-1"}} {
		done := make(chan struct{})
		var errs string
		var code int
		go func() {
			defer close(done)
			_, errs, code = outlierd(t, append([]string{"tail", "--config", cfg}, args...)...)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("tail %v: still running after 20 s (want it refused at once)", args)
		}
		if code != 2 || !strings.Contains(errs, args[0]) {
			t.Errorf("tail %v: exit %d, %q (want 2, naming %s)", args, code, errs, args[0])
		}
	}
}

// TestTopicsCreateRefusesNoTimeout: topics create --timeout 0s or -1s failed every topic at
// once with "brokers ... unreachable for -1s: context deadline exceeded", reachable brokers
// included; the wait must be positive.
func TestTopicsCreateRefusesNoTimeout(t *testing.T) {
	cfg := writeFile(t, "c.yaml", "ingest:\n  brokers: [\"127.0.0.1:1\"]\n  topic: in\n  features: [a]\nsink:\n  topic: out\n  dead_letter_topic: dlq\n")
	for _, v := range []string{"0s", "-1s"} {
		_, errs, code := outlierd(t, "topics", "create", "--config", cfg, "--timeout", v)
		if code != 2 || !strings.Contains(errs, "--timeout") {
			t.Errorf("--timeout %s: exit %d, %q (want 2, naming --timeout)", v, code, errs)
		}
	}
}

// TestGenReportsTheFirstCauseAlone: an invalid gen value is reported by itself, not with a
// second error that only follows from it (--sensors 0 also said "sensor must be -1 (any) or
// in [0, 0), got 0" of the default --anomaly-sensor 0).
func TestGenReportsTheFirstCauseAlone(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sensors", "0"}, "sensors must be in [1, 8]"},
		{[]string{"--sensors", "-2"}, "sensors must be in [1, 8]"},
		{[]string{"--sensors", "9"}, "sensors must be in [1, 8]"},
		{[]string{"--sensors", "0", "--resolution", "0,0.5"}, "sensors must be in [1, 8]"},
		{[]string{"--spike-rate", "5"}, "spike-rate must be in [0, 1)"},
		{[]string{"--spike-rate", "NaN"}, "spike-rate must be in [0, 1)"},
		{[]string{"--contextual", "-1"}, "counts and lengths must be >= 0"},
		{[]string{"--head", "-5", "--spike-rate", "0.5"}, "head must be in [0, rows)"},
	} {
		args := append([]string{"gen", "--kind", "sensors", "--rows", "10"}, c.args...)
		_, errs, code := outlierd(t, args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Contains(errs, "; ") {
			t.Errorf("%v: exit %d, %q (want 2 and %q alone)", c.args, code, strings.TrimSpace(errs), c.want)
		}
	}
	// Independent problems are still reported together.
	_, errs, _ := outlierd(t, "gen", "--kind", "sensors", "--rows", "10", "--sensors", "0", "--correlation", "1")
	if !strings.Contains(errs, "sensors must be") || !strings.Contains(errs, "correlation must be") {
		t.Errorf("two independent problems: %q", errs)
	}
}
