package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/ingest"
)

// sensorRows are rows of a 3-sensor stream with a key, a time and a label: every 97th row a
// temperature spike.
type sensorRow struct {
	id      string
	ms      int64
	t, p, h float64
	label   int
}

func sensorRows(n int, seed uint64) []sensorRow {
	rng := rand.New(rand.NewPCG(seed, 9))
	out := make([]sensorRow, n)
	for i := range out {
		t := 70 + 2*rng.NormFloat64()
		r := sensorRow{id: fmt.Sprint("s", i%3), ms: 1763877600000 + int64(i)*60000, t: t,
			p: 1000 + 3*(t-70) + rng.NormFloat64(), h: 40 - (t - 70) + rng.NormFloat64()}
		if i%97 == 50 {
			r.t, r.label = r.t+40, 1
		}
		out[i] = r
	}
	return out
}

// writeSensors writes rows as CSV (with a header), JSON lines or logfmt.
func writeSensors(t testing.TB, name string, rows []sensorRow) string {
	t.Helper()
	var b strings.Builder
	switch filepath.Ext(name) {
	case ".csv":
		b.WriteString("id,epoch_ms,temp,pressure,humidity,label\n")
		for _, r := range rows {
			fmt.Fprintf(&b, "%s,%d,%g,%g,%g,%d\n", r.id, r.ms, r.t, r.p, r.h, r.label)
		}
	case ".jsonl":
		for _, r := range rows {
			fmt.Fprintf(&b, `{"id":%q,"epoch_ms":%d,"temp":%g,"sensor":{"pressure":%g},"humidity":%g,"label":%d}`+"\n", r.id, r.ms, r.t, r.p, r.h, r.label)
		}
	case ".logfmt":
		for _, r := range rows {
			fmt.Fprintf(&b, "id=%s epoch_ms=%d temp=%g pressure=%g humidity=%g label=%d\n", r.id, r.ms, r.t, r.p, r.h, r.label)
		}
	}
	return writeFile(t, name, b.String())
}

// readVerdictRows reads a --verdicts-out file's rows (row,score,outlier,reason,recent), its
// header left out.
func readVerdictRows(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs[1:]
}

// readVerdicts reads a --verdicts-out file: each row's combined score and flag.
func readVerdicts(t *testing.T, path string) ([]string, []bool) {
	t.Helper()
	var scores []string
	var flags []bool
	for _, r := range readVerdictRows(t, path) {
		scores, flags = append(scores, r[1]), append(flags, r[2] == "true") // row,score,outlier,reason,recent
	}
	return scores, flags
}

// TestReplayShuffledFileSameScores: the batch case of a file and of the same rows shuffled
// score every record alike (score and flag), because the distance sample R and the
// calibration records are chosen by record identity. Before that (R by window position with a
// fixed seed) the shuffled file gave other scores and other flags.
func TestReplayShuffledFileSameScores(t *testing.T) {
	path, _ := labelledCSV(t, 3000)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	perm := rand.New(rand.NewPCG(5, 6)).Perm(len(lines) - 1)
	shuffled := []string{lines[0]}
	for _, i := range perm {
		shuffled = append(shuffled, lines[1+i])
	}
	spath := writeFile(t, "shuffled.csv", strings.Join(shuffled, "\n")+"\n")
	dir := t.TempDir()
	// flag_by: rate (the window's quantile: about 60 flags here), so that flags are compared too.
	cfg := writeFile(t, "rate.yaml", "detect:\n  flag_by: rate\n")
	run := func(in, out string) ([]string, []bool) {
		_, errs, code := outlierd(t, "replay", "--input", in, "--label-column", "label", "--window", "5000", "--device", "cpu",
			"--config", cfg, "--verdicts-out", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		return readVerdicts(t, out)
	}
	s0, f0 := run(path, filepath.Join(dir, "a.csv"))
	s1, f1 := run(spath, filepath.Join(dir, "b.csv"))
	flagged, differ := 0, 0
	for k, i := range perm { // shuffled row k is file row i
		if f0[i] {
			flagged++
		}
		if s0[i] != s1[k] || f0[i] != f1[k] {
			differ++
		}
	}
	if differ > 0 || flagged == 0 {
		t.Fatalf("%d of %d records scored otherwise in the shuffled file (%d flagged)", differ, len(perm), flagged)
	}
}

// TestReplayReadsWhatThePipelineReads: with the config's ingest section, replay reads CSV,
// JSON lines and logfmt through the pipeline's decoders into the same table (features from
// ingest.features only: epoch_ms is the time, not a feature, and the CSV's unread columns are
// named on stderr), with the derived features of ingest.derive, and scores them alike.
func TestReplayReadsWhatThePipelineReads(t *testing.T) {
	rows := sensorRows(1200, 1)
	cfgYAML := func(pressure string) string {
		return fmt.Sprintf(`ingest:
  features: [temp, %s, humidity]
  event_time_field: epoch_ms
  key_field: id
  derive:
    features:
      - {kind: diff, of: temp}
      - {kind: robust_z, of: temp, last: 20}
      - {kind: std, of: humidity, last: 8}
      - {kind: time_of_day}
detect:
  window: 5000
`, pressure)
	}
	var tables []*replayTable
	var verdicts [][]string
	for _, c := range []struct{ file, pressure string }{{"s.csv", "pressure"}, {"s.jsonl", "sensor.pressure"}, {"s.logfmt", "pressure"}} {
		path := writeSensors(t, c.file, rows)
		cfgPath := writeFile(t, "c.yaml", cfgYAML(c.pressure))
		cfg := replayConfig(pipeline.Default())
		if err := config.Load(cfgPath, &cfg); err != nil {
			t.Fatal(err)
		}
		var warn strings.Builder
		tab, err := readReplayInput(replayInput{path: path, label: "label", ingest: cfg.Ingest, configPath: cfgPath}, &warn)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if c.file == "s.csv" && warn.String() != "" {
			t.Errorf("stderr %q: every column is read", warn.String())
		}
		tables = append(tables, tab)
		vpath := filepath.Join(t.TempDir(), "v.csv")
		if _, errs, code := outlierd(t, "replay", "--input", path, "--config", cfgPath, "--label-column", "label", "--device", "cpu", "--verdicts-out", vpath); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.file, code, errs)
		}
		s, _ := readVerdicts(t, vpath)
		verdicts = append(verdicts, s)
	}
	want := []string{"temp", "pressure", "humidity", "temp.diff", "temp.rz20", "humidity.std8", "tod.sin", "tod.cos"}
	a := tables[0]
	if !slices.Equal(a.features, want) {
		t.Fatalf("features %v, want %v", a.features, want)
	}
	for k, b := range tables[1:] {
		for j := range a.means {
			if !slices.Equal(a.means[j], b.means[j]) {
				t.Fatalf("format %d: column %s differs from the CSV's", k+1, a.features[j])
			}
		}
		if !slices.Equal(a.outliers, b.outliers) || !slices.Equal(verdicts[0], verdicts[k+1]) {
			t.Fatalf("format %d: labels or verdicts differ from the CSV's", k+1)
		}
	}
	// Row 3 is key s0's second record: its difference against row 0, its time from epoch_ms.
	if got, w := a.means[3][3], float32(rows[3].t)-float32(rows[0].t); got != w || string(a.keys[3]) != "s0" || a.times[3].UnixMilli() != rows[3].ms {
		t.Fatalf("row 3: diff %v (want %v), key %q, time %v", got, w, a.keys[3], a.times[3])
	}
	// Row 3's humidity.std8: the sample sd of key s0's two humidities (rows 0 and 3), |h3 - h0| / sqrt(2).
	if got, w := a.means[5][3], float32(math.Abs(float64(float32(rows[3].h))-float64(float32(rows[0].h)))/math.Sqrt2); got != w {
		t.Fatalf("row 3: humidity.std8 %v, want %v", got, w)
	}
	// Without epoch_ms and label in the config's view, the CSV's extra column is named.
	path := writeSensors(t, "x.csv", rows[:50])
	var warn strings.Builder
	ic := ingest.Default()
	ic.Features = []string{"temp"}
	if _, err := readReplayInput(replayInput{path: path, ingest: ic}, &warn); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "columns not read (not in ingest.features, key_field, event_time_field or --label-column): id, epoch_ms, pressure, humidity, label") {
		t.Fatalf("stderr %q", warn.String())
	}
}

// TestReplayInputFlags: --key-column and --timestamp-column stand for the config's key_field
// and event_time_field; without ingest.features a CSV's columns but those are the features
// (and stderr says so); the formats' requirements are errors naming the fix.
func TestReplayInputFlags(t *testing.T) {
	rows := sensorRows(300, 2)
	path := writeSensors(t, "s.csv", rows)
	var warn strings.Builder
	tab, err := readReplayInput(replayInput{path: path, label: "label", key: "id", timeCol: "epoch_ms", ingest: ingest.Default()}, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tab.features, []string{"temp", "pressure", "humidity"}) || string(tab.keys[1]) != "s1" || !tab.times[2].Equal(time.UnixMilli(rows[2].ms)) {
		t.Fatalf("features %v, key %q, time %v", tab.features, tab.keys[1], tab.times[2])
	}
	if !strings.Contains(warn.String(), "no ingest.features in the config: the features are the columns temp, pressure, humidity") {
		t.Fatalf("stderr %q", warn.String())
	}
	warn.Reset()
	if _, err := readReplayInput(replayInput{path: path, label: "label", key: "id", ingest: ingest.Default()}, &warn); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), `the feature "epoch_ms" looks like a time: pass --timestamp-column epoch_ms`) {
		t.Fatalf("stderr %q: no word on epoch_ms", warn.String())
	}
	jsonl := writeSensors(t, "s.jsonl", rows)
	cfg := writeFile(t, "c.yaml", "ingest:\n  features: [temp]\n  derive:\n    features: [{kind: day_of_week}]\n")
	bad := writeFile(t, "bad.jsonl", `{"temp":1}`+"\n"+`{"temp":"x"}`+"\n")
	badCfg := writeFile(t, "b.yaml", "ingest:\n  features: [temp]\n")
	nope := writeFile(t, "n.yaml", "ingest:\n  features: [nope]\n")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--input", jsonl}, 2, "JSON lines (by the extension .jsonl) need the features named: a --config with ingest.features"},
		{[]string{"--input", jsonl, "--config", cfg}, 2, "ingest.derive.features[0] (day_of_week) needs the records' time: set ingest.event_time_field or --timestamp-column"},
		{[]string{"--input", bad, "--config", badCfg}, 1, `bad.jsonl:2: field "temp": not a number: "x"`},
		{[]string{"--input", path, "--format", "xml"}, 2, `--format "xml": want csv, json or logfmt`},
		{[]string{"--input", path, "--config", nope}, 1, nope + `:2:14: ingest.features[0]: "nope" is not a column of ` + path + `'s header [id epoch_ms temp pressure humidity label]`},
	} {
		_, errs, code := outlierd(t, append([]string{"replay", "--device", "cpu", "--window", "1000"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, c.code, c.msg)
		}
	}
	// The time read from the file, day_of_week from it.
	_, errs, code := outlierd(t, "replay", "--device", "cpu", "--window", "1000", "--input", jsonl, "--config", cfg, "--timestamp-column", "epoch_ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestFormatByExtension: produce and replay tell a file's format from its extension the same
// way (.log is logfmt for both, as produce's help has always said); only where the extension
// says nothing do they differ (produce asks for --format, replay takes the config's or CSV).
func TestFormatByExtension(t *testing.T) {
	for path, want := range map[string]ingest.Format{
		"a.csv": ingest.FormatCSV, "a.CSV": ingest.FormatCSV, "a.json": ingest.FormatJSON, "a.jsonl": ingest.FormatJSON,
		"a.ndjson": ingest.FormatJSON, "a.logfmt": ingest.FormatLogfmt, "a.log": ingest.FormatLogfmt, "a.txt": "",
	} {
		if got := ingest.Format(formatOf(path)); got != want {
			t.Errorf("formatOf(%s) = %q, want %q", path, got, want)
		}
		in := replayInput{path: path, ingest: ingest.Config{Format: ingest.FormatJSON, Features: []string{"temp"}}}
		got, err := in.replayFormat()
		if want == "" {
			want = ingest.FormatJSON // the config's
		}
		if err != nil || got != want {
			t.Errorf("replay's format of %s = %q (%v), want %q", path, got, err, want)
		}
	}
}

// TestReplayLabelWithFillAndUncertainty: the label is read in the same pass as the features,
// whatever the ingest section says of missing values and uncertainty: with missing: fill (its
// fill names features only) and an uncertainty per feature without a default, every row's
// label is read, and a row without one stops replay naming the field.
func TestReplayLabelWithFillAndUncertainty(t *testing.T) {
	rows := sensorRows(200, 3)
	var b strings.Builder
	b.WriteString("temp,temp_sd,pressure,pressure_sd,label\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%g,0.5,%g,0.25,%d\n", r.t, r.p, r.label)
	}
	path := writeFile(t, "u.csv", b.String())
	ic := ingest.Default()
	ic.Format, ic.Features = ingest.FormatCSV, []string{"temp", "pressure"}
	ic.Uncertainty = &ingest.Uncertainty{Suffix: "_sd"}
	ic.Missing, ic.Fill = ingest.MissingFill, map[string]float64{"temp": 0, "pressure": 0}
	var warn strings.Builder
	tab, err := readReplayInput(replayInput{path: path, label: "label", ingest: ic}, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if tab.rows() != len(rows) || len(tab.outliers) != len(rows) || tab.sds == nil || tab.sds[1][0] != 0.25 {
		t.Fatalf("%d rows, %d labels, sds %v", tab.rows(), len(tab.outliers), tab.sds != nil)
	}
	for i, r := range rows {
		if tab.outliers[i] != (r.label != 0) {
			t.Fatalf("row %d: label %v, want %d", i, tab.outliers[i], r.label)
		}
	}
	bad := writeFile(t, "v.csv", "temp,temp_sd,pressure,pressure_sd,label\n1,0.5,2,0.25,1\n1,0.5,2,0.25,\n")
	if _, err := readReplayInput(replayInput{path: bad, label: "label", ingest: ic}, &warn); err == nil ||
		!strings.Contains(err.Error(), "v.csv:3") || !strings.Contains(err.Error(), `"label"`) {
		t.Fatalf("a row without its label: %v", err)
	}
}

// TestReplayLabelIsNoOtherField: a --label-column that the decoder reads for something else (a
// feature, its uncertainty field, the key, the event time) is refused naming the clash. An
// uncertainty field was read as the label too once the label became a decoder option (the
// labelled config's check had refused it, naming a features[N] the user never wrote).
func TestReplayLabelIsNoOtherField(t *testing.T) {
	path := writeFile(t, "c.csv", "id,temp,temp_sd,pressure,p_err\na,1,0.5,2,0.25\n")
	ic := ingest.Default()
	ic.Format, ic.Features, ic.KeyField = ingest.FormatCSV, []string{"temp", "pressure"}, "id"
	ic.Uncertainty = &ingest.Uncertainty{Suffix: "_sd", Fields: map[string]string{"pressure": "p_err"}}
	for label, as := range map[string]string{
		"temp":    "a feature (ingest.features[0])",
		"temp_sd": `feature "temp"'s uncertainty (ingest.uncertainty.suffix)`,
		"p_err":   `feature "pressure"'s uncertainty (ingest.uncertainty.fields["pressure"])`,
		"id":      "the key (--key-column, ingest.key_field)",
	} {
		var warn strings.Builder
		_, err := readReplayInput(replayInput{path: path, label: label, ingest: ic}, &warn)
		if want := fmt.Sprintf("--label-column %q is also read as %s", label, as); err == nil || err.Error() != want {
			t.Errorf("label %s: %v, want %s", label, err, want)
		}
	}
}

// TestReplayHeaderColumnNamedIsNoUncertainty: without ingest.features, a "<f>_sd" column that a
// flag names (the label, the key, the timestamp) is that column, not f's uncertainty: f is then
// certain, as a feature without an "_sd" column is. The label was refused, naming an
// ingest.uncertainty.fields["x"] that no one wrote (no config at all), since labelClash; the key
// was read as x's uncertainty too.
func TestReplayHeaderColumnNamedIsNoUncertainty(t *testing.T) {
	path := writeFile(t, "h.csv", "x,x_sd,y\n1,1,2\n2,0,3\n3,0,4\n")
	for _, in := range []replayInput{{path: path, label: "x_sd", ingest: ingest.Default()}, {path: path, key: "x_sd", ingest: ingest.Default()}} {
		var warn strings.Builder
		tab, err := readReplayInput(in, &warn)
		if err != nil {
			t.Errorf("label %q, key %q: %v", in.label, in.key, err)
			continue
		}
		if !slices.Equal(tab.features, []string{"x", "y"}) || tab.sds != nil || tab.rows() != 3 {
			t.Errorf("label %q, key %q: features %v, uncertainty %v, %d rows; want x, y, none, 3", in.label, in.key, tab.features, tab.sds != nil, tab.rows())
		}
		if in.label != "" && !slices.Equal(tab.outliers, []bool{true, false, false}) {
			t.Errorf("label x_sd read as %v", tab.outliers)
		}
		if in.key != "" && string(tab.keys[0]) != "1" {
			t.Errorf("key x_sd read as %q", tab.keys[0])
		}
	}
}

// BenchmarkReadReplayInput reads a labelled CSV of 20,000 sensor rows (key, time, three
// features, the label) as replay does; ns/op is per file.
func BenchmarkReadReplayInput(b *testing.B) {
	path := writeSensors(b, "s.csv", sensorRows(20000, 1))
	ic := ingest.Default()
	ic.Format, ic.Features = ingest.FormatCSV, []string{"temp", "pressure", "humidity"}
	in := replayInput{path: path, label: "label", key: "id", timeCol: "epoch_ms", ingest: ic}
	for b.Loop() {
		if _, err := readReplayInput(in, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReplayShippedConfigOnSampleData: the README's config (configs/pipeline.yaml: JSON,
// uncertainty by suffix with a default 0) backtests the README's sample data
// (data/sensors.csv: no "_sd" columns) with its labels. The label's uncertainty was mapped to
// the first feature's suffixed column ("temp_sd"), which the file does not have: replay stopped
// with `ingest.uncertainty.fields["label"]: "temp_sd" is neither a csv_header name ...`
// although every feature's uncertainty is the default there. The same file with "_sd" columns
// still reads them.
func TestReplayShippedConfigOnSampleData(t *testing.T) {
	root := filepath.Join("..", "..")
	vpath := filepath.Join(t.TempDir(), "v.csv")
	out, errs, code := outlierd(t, "replay", "--input", filepath.Join(root, "data", "sensors.csv"), "--config",
		filepath.Join(root, "configs", "pipeline.yaml"), "--label-column", "label", "--device", "cpu", "--verdicts-out", vpath, "--json")
	if code != 0 {
		t.Fatalf("replay of the sample data with the shipped config: exit %d: %s", code, errs)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res["rows"].(float64) != 6000 || res["recall"] == nil {
		t.Errorf("rows %v, recall %v: the labels were not read", res["rows"], res["recall"])
	}
	rows := sensorRows(50, 5)
	var b strings.Builder
	b.WriteString("temp,temp_sd,pressure,label\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%g,0.5,%g,%d\n", r.t, r.p, r.label)
	}
	ic := ingest.Default()
	ic.Format, ic.Features = ingest.FormatCSV, []string{"temp", "pressure"}
	zero := 0.0
	ic.Uncertainty = &ingest.Uncertainty{Suffix: "_sd", Default: &zero}
	var warn strings.Builder
	tab, err := readReplayInput(replayInput{path: writeFile(t, "sd.csv", b.String()), label: "label", ingest: ic}, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if tab.sds == nil || tab.sds[0][0] != 0.5 || tab.sds[1][0] != 0 || len(tab.outliers) != len(rows) {
		t.Errorf("temp_sd read %v, pressure's default %v, %d labels", tab.sds != nil && tab.sds[0][0] == 0.5, tab.sds != nil && tab.sds[1][0] == 0, len(tab.outliers))
	}
}

// TestReplayLabelUncertaintyAddsNoFailure: the label's uncertainty, which nothing reads, never
// stops a line nor names the label in a config error. Where the first feature's uncertainty is
// the default (a CSV without its "_sd" column, here only pressure has one), the label's came
// from the column label+suffix ("label_sd") when the file had one, so its text stopped replay
// at line 2; without a config, a "label_sd" column did the same. A config refused for the
// features' own uncertainty is refused naming the features alone (it also said: column
// "label_sd" (for feature "label") is not in csv_header).
func TestReplayLabelUncertaintyAddsNoFailure(t *testing.T) {
	body := "temp,pressure,pressure_sd,label,label_sd\n1,2,0.25,0,n/a\n3,4,0.5,1,-1\n"
	half := 0.5
	ic := ingest.Default()
	ic.Format, ic.Features = ingest.FormatCSV, []string{"temp", "pressure"}
	for _, hdr := range [][]string{nil, {"temp", "pressure", "pressure_sd", "label", "label_sd"}} {
		ic.CSVHeader = hdr
		ic.Uncertainty = &ingest.Uncertainty{Suffix: "_sd", Default: &half}
		tab, err := readReplayInput(replayInput{path: writeFile(t, "s.csv", body), label: "label", ingest: ic}, io.Discard)
		if err != nil {
			t.Fatalf("csv_header %v: %v", hdr, err)
		}
		if !slices.Equal(tab.sds[0], []float32{0.5, 0.5}) || !slices.Equal(tab.sds[1], []float32{0.25, 0.5}) || !slices.Equal(tab.outliers, []bool{false, true}) {
			t.Errorf("csv_header %v: sds %v, labels %v", hdr, tab.sds, tab.outliers)
		}
	}
	tab, err := readReplayInput(replayInput{path: writeFile(t, "n.csv", "temp,label,label_sd\n1,0,n/a\n2,1,-1\n"), label: "label", ingest: ingest.Default()}, io.Discard)
	if err != nil || !slices.Equal(tab.features, []string{"temp"}) || !slices.Equal(tab.outliers, []bool{false, true}) {
		t.Errorf("without a config: %v", err)
	} else if tab.sds != nil {
		t.Errorf("without a config: uncertainty %v from the label's column", tab.sds)
	}
	ic.CSVHeader, ic.Uncertainty = nil, &ingest.Uncertainty{Suffix: "_sd"}
	_, err = readReplayInput(replayInput{path: writeFile(t, "s.csv", body), label: "label", ingest: ic}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `"temp_sd"`) || strings.Contains(err.Error(), `"label`) {
		t.Errorf("no default, no temp_sd: %v", err)
	}
}

// TestReplayConfigFieldNotInHeader: a field the config names (ingest.features, key_field,
// event_time_field) that a CSV file's header lacks is refused naming the config's key and the
// header, at the key's line and column in the config; it said `ingest.features[3]: "vibration"
// is neither a csv_header name nor a 0-based column index`, csv_header being a key the user never
// wrote (replay takes it from the file).
func TestReplayConfigFieldNotInHeader(t *testing.T) {
	path := writeFile(t, "s.csv", "ts,temp,pressure,label\n1,70,101,0\n2,71,101.5,0\n3,70.5,101.2,0\n")
	for _, c := range []struct{ ingest, want string }{
		{"features: [temp, pressure, vibration]", `c.yaml:3:30: ingest.features[2]: "vibration" is not a column of ` + path + `'s header [ts temp pressure label]`},
		{"features: [temp]\n  key_field: sensor", `c.yaml:4:3: ingest.key_field: "sensor" is not a column of ` + path + `'s header [ts temp pressure label]`},
		{"features: [temp]\n  event_time_field: time", `c.yaml:4:3: ingest.event_time_field: "time" is not a column of ` + path + `'s header [ts temp pressure label]`},
		// (an uncertainty column the header lacks was "neither a csv_header name nor a 0-based
		// column index", naming a key the user never wrote)
		{"features: [temp]\n  uncertainty:\n    fields: {temp: temp_sd}", `c.yaml:5:14: ingest.uncertainty.fields["temp"]: "temp_sd" is not a column of ` + path + `'s header [ts temp pressure label]`},
		{"features: [temp]\n  uncertainty:\n    suffix: _sd", `c.yaml:5:5: ingest.uncertainty.suffix: "temp_sd" (feature "temp"'s, without uncertainty.default) is not a column of ` + path + `'s header [ts temp pressure label]`},
	} {
		cfg := writeFile(t, "c.yaml", "ingest:\n  format: csv\n  "+c.ingest+"\n")
		_, errs, code := outlierd(t, "replay", "--input", path, "--config", cfg, "--label-column", "label", "--device", "cpu")
		if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(errs, "csv_header") {
			t.Errorf("%s: exit %d, stderr %q: want exit 1 and %q, not csv_header", c.ingest, code, errs, c.want)
		}
	}
	// A 0-based index is a column too, and a config's own csv_header is judged as the pipeline
	// judges it.
	cfg := writeFile(t, "c.yaml", "ingest:\n  format: csv\n  features: [\"1\", pressure]\n")
	if _, errs, code := outlierd(t, "replay", "--input", path, "--config", cfg, "--label-column", "label", "--device", "cpu"); code != 0 {
		t.Errorf("features [\"1\", pressure]: exit %d: %s", code, errs)
	}
	cfg = writeFile(t, "c.yaml", "ingest:\n  format: csv\n  csv_header: [ts, temp, pressure, label]\n  features: [temp, vibration]\n")
	if _, errs, code := outlierd(t, "replay", "--input", path, "--config", cfg, "--label-column", "label", "--device", "cpu"); code != 1 || !strings.Contains(errs, "csv_header") {
		t.Errorf("csv_header written: exit %d, stderr %q: want the ingest check's message", code, errs)
	}
}

// TestReplayHeaderNamesTwiceOrNone: a CSV file whose header repeats a name or leaves one empty
// is refused at its header line naming the column. It said "replay: the ingest section does not
// fit f.csv: ingest: invalid config: ingest.csv_header[2]: "temp" appears twice": a key the user
// never wrote, the header of the file being what replay makes it.
func TestReplayHeaderNamesTwiceOrNone(t *testing.T) {
	cfg := writeFile(t, "c.yaml", "ingest:\n  features: [temp]\n")
	for _, c := range []struct{ header, want string }{
		{"ts,temp,temp,label", `f.csv:1: header: column 3 is named "temp" as column 2 is`},
		{"ts,temp,,label", `f.csv:1: header: column 3 has no name`},
	} {
		path := writeFile(t, "f.csv", c.header+"\n1,70,71,0\n2,71,70,0\n")
		for _, args := range [][]string{nil, {"--config", cfg}} {
			_, errs, code := outlierd(t, append([]string{"replay", "--input", path, "--label-column", "label", "--device", "cpu"}, args...)...)
			if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(errs, "csv_header") {
				t.Errorf("%s %v: exit %d, stderr %q: want exit 1 and %q, not csv_header", c.header, args, code, errs, c.want)
			}
		}
	}
}

// TestReplayCSVErrorNamesColumn: a CSV row's bad field is named at its file:line:column, as
// every other command's input error is (README: "the file, line and column of the first
// problem"); replay gave file:line only. The column is the field's first byte, 1-based, quotes
// included.
func TestReplayCSVErrorNamesColumn(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"a,b,label\n1,2,0\n3,NaN,0\n", `f.csv:3:3: field "b": NaN/Inf not allowed`},
		{"a,b,label\n1,2,0\n\"1.5\",\"\",0\n", `f.csv:3:7: field "b": missing`},
	} {
		path := writeFile(t, "f.csv", c.body)
		_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--device", "cpu")
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and %q", c.body, code, errs, c.want)
		}
	}
}

// TestReplayJSONArraySaysLines: a .json file holding one JSON array (a common export) is
// refused saying replay reads JSON lines; it said only "invalid JSON at byte 0: expected a
// JSON object".
func TestReplayJSONArraySaysLines(t *testing.T) {
	cfg := writeFile(t, "c.yaml", "ingest:\n  features: [temp]\n")
	for _, body := range []string{`[{"temp": 1.0}, {"temp": 2.0}]` + "\n", "[\n  {\"temp\": 1.0},\n  {\"temp\": 2.0}\n]\n"} {
		_, errs, code := outlierd(t, "replay", "--input", writeFile(t, "a.json", body), "--config", cfg, "--device", "cpu")
		if want := "a.json:1: a JSON array: replay reads JSON lines, one object a line"; code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and %q", body, code, errs, want)
		}
	}
}

// TestReplayEventTimeZone: replay reads a time without an offset in the config's
// ingest.event_time_zone as the pipeline does: a plant's local wall clock (Europe/Berlin, a
// winter and a summer row) is the instant an hour or two earlier in UTC; time_of_day in
// derive.timezone of the same zone is the wall clock as written (as both at UTC read it), and
// in UTC an hour or two earlier. The zone applies with --timestamp-column too. A bad one stops
// replay naming the key (as any ingest key: replay checks the section against the file) and
// lint at its file:line:column.
func TestReplayEventTimeZone(t *testing.T) {
	path := writeFile(t, "plant.csv", "ts,temp\n2026-01-15 08:00:00,70\n2026-07-15 08:00:00,71\n2026-07-15 08:00:00+02:00,72\n")
	conf := func(eventZone, deriveZone, timeField string) replayInput {
		cfgPath := writeFile(t, "c.yaml", fmt.Sprintf("ingest:\n  features: [temp]\n%s  event_time_zone: %s\n  derive:\n    timezone: %s\n    features: [{kind: time_of_day}]\n",
			timeField, eventZone, deriveZone))
		cfg := replayConfig(pipeline.Default())
		if err := config.Load(cfgPath, &cfg); err != nil {
			t.Fatal(err)
		}
		return replayInput{path: path, ingest: cfg.Ingest, configPath: cfgPath}
	}
	read := func(in replayInput, timeCol string) *replayTable {
		in.timeCol = timeCol
		tab, err := readReplayInput(in, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	tod := func(h int) [2]float32 {
		s, c := math.Sincos(2 * math.Pi * float64(h) / 24)
		return [2]float32{float32(s), float32(c)}
	}
	at := func(tab *replayTable, row int) [2]float32 { return [2]float32{tab.means[1][row], tab.means[2][row]} }
	utc := read(conf("UTC", "UTC", "  event_time_field: ts\n"), "")
	plant := read(conf("Europe/Berlin", "Europe/Berlin", "  event_time_field: ts\n"), "")
	plantUTC := read(conf("Europe/Berlin", "UTC", ""), "ts") // the field by the flag
	for row, c := range []struct {
		utc, plant   time.Time
		plantUTCHour int
	}{
		{time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC), time.Date(2026, 1, 15, 7, 0, 0, 0, time.UTC), 7},
		{time.Date(2026, 7, 15, 8, 0, 0, 0, time.UTC), time.Date(2026, 7, 15, 6, 0, 0, 0, time.UTC), 6},
		{time.Date(2026, 7, 15, 6, 0, 0, 0, time.UTC), time.Date(2026, 7, 15, 6, 0, 0, 0, time.UTC), 6}, // an offset: the same instant
	} {
		if !utc.times[row].Equal(c.utc) || !plant.times[row].Equal(c.plant) || !plantUTC.times[row].Equal(c.plant) {
			t.Errorf("row %d: times %v, %v, %v; want %v, %v, %v", row, utc.times[row], plant.times[row], plantUTC.times[row], c.utc, c.plant, c.plant)
		}
		if w := tod(c.utc.Hour()); at(utc, row) != w || at(plant, row) != tod(8) {
			t.Errorf("row %d: time_of_day %v (UTC), %v (Berlin); want %v, %v", row, at(utc, row), at(plant, row), w, tod(8))
		}
		if at(plantUTC, row) != tod(c.plantUTCHour) {
			t.Errorf("row %d: time_of_day in UTC of Berlin's wall clock %v, want %v", row, at(plantUTC, row), tod(c.plantUTCHour))
		}
	}
	bad := writeFile(t, "bad.yaml", "ingest:\n  topic: t\n  features: [temp]\n  event_time_zone: Europe/Berlinn\n")
	const msg = `ingest.event_time_zone: "Europe/Berlinn" is not an IANA time zone (e.g. UTC, Europe/Berlin)`
	if _, errs, code := outlierd(t, "replay", "--device", "cpu", "--input", path, "--config", bad, "--timestamp-column", "ts"); code == 0 || !strings.Contains(errs, msg) {
		t.Errorf("replay: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := outlierd(t, "lint", "--config", bad); code == 0 || !strings.Contains(errs, bad+":4:3: "+msg) {
		t.Errorf("lint: exit %d, stderr %q", code, errs)
	}
}

// TestReplayBooleanLabel: a label written as a JSON boolean (or true/false in a CSV or logfmt
// file, as exports write it) reads as 1/0; before, every such row stopped replay with `not a
// number`. A boolean feature is still refused, and so is a label string that is neither.
func TestReplayBooleanLabel(t *testing.T) {
	rows := sensorRows(200, 4)
	var js, lf, cs strings.Builder
	cs.WriteString("temp,pressure,anomaly\n")
	for i, r := range rows {
		label := fmt.Sprint(r.label != 0)
		if i%5 == 0 { // numbers and booleans mixed in one file
			label = fmt.Sprint(r.label)
		}
		fmt.Fprintf(&js, `{"temp":%g,"pressure":%g,"anomaly":%s}`+"\n", r.t, r.p, label)
		fmt.Fprintf(&lf, "temp=%g pressure=%g anomaly=%s\n", r.t, r.p, label)
		if i%2 == 1 {
			label = strings.ToUpper(label[:1]) + label[1:] // pandas writes True/False
		}
		fmt.Fprintf(&cs, "%g,%g,%s\n", r.t, r.p, label)
	}
	ic := ingest.Default()
	ic.Features = []string{"temp", "pressure"}
	for _, c := range []struct{ name, text string }{{"b.jsonl", js.String()}, {"b.logfmt", lf.String()}, {"b.csv", cs.String()}} {
		var warn strings.Builder
		tab, err := readReplayInput(replayInput{path: writeFile(t, c.name, c.text), label: "anomaly", ingest: ic}, &warn)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if tab.rows() != len(rows) || len(tab.outliers) != len(rows) {
			t.Fatalf("%s: %d rows, %d labels", c.name, tab.rows(), len(tab.outliers))
		}
		for i, r := range rows {
			if tab.outliers[i] != (r.label != 0) || tab.means[0][i] != float32(r.t) || tab.means[1][i] != float32(r.p) {
				t.Fatalf("%s: row %d: label %v temp %v, want %d %v", c.name, i, tab.outliers[i], tab.means[0][i], r.label, r.t)
			}
		}
	}
	for _, c := range []struct{ name, text, want string }{
		{"f.jsonl", `{"temp":true,"pressure":1,"anomaly":false}` + "\n", `b:1: field "temp": not a number: true`},
		{"f2.jsonl", `{"temp":1,"pressure":true,"anomaly":true}` + "\n", `b:1: field "pressure": not a number: true`},
		{"s.jsonl", `{"temp":1,"pressure":2,"anomaly":"true"}` + "\n", `b:1: field "anomaly": not a number: "true"`},
		{"y.csv", "temp,pressure,anomaly\n1,2,yes\n", `b:2:5: field "anomaly": not a number: "yes"`},
	} {
		var warn strings.Builder
		path := writeFile(t, c.name, c.text)
		_, err := readReplayInput(replayInput{path: path, label: "anomaly", ingest: ic}, &warn)
		if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), filepath.Base(path), "b"), c.want) {
			t.Fatalf("%s: %v, want %s", c.name, err, c.want)
		}
	}
}

// TestReplayNotLogfmt: a CSV (or JSON lines) file read as logfmt (--format logfmt, or a .log
// extension) stops at its first line saying it is not logfmt and which --format fits, where
// before it said only that the first feature was missing.
func TestReplayNotLogfmt(t *testing.T) {
	path := writeSensors(t, "s.csv", sensorRows(20, 5))
	js := writeSensors(t, "s.jsonl", sensorRows(20, 5))
	ic := ingest.Default()
	ic.Features = []string{"temp", "pressure"}
	for _, c := range []struct{ path, want string }{
		{path, path + `:1: the line does not look like logfmt (no key=value pair): --format csv if the file is CSV (field "temp": missing)`},
		{js, js + `:1: the line does not look like logfmt (no key=value pair): --format json if the file is JSON lines (`},
	} {
		var warn strings.Builder
		_, err := readReplayInput(replayInput{path: c.path, format: "logfmt", ingest: ic}, &warn)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Fatalf("%v, want %s", err, c.want)
		}
	}
	// A logfmt line that lacks a feature still says only that.
	lf := writeFile(t, "m.logfmt", "temp=1 pressure=2\ntemp=3\n")
	_, err := readReplayInput(replayInput{path: lf, ingest: ic}, io.Discard)
	if err == nil || err.Error() != lf+`:2: field "pressure": missing` {
		t.Fatalf("%v", err)
	}
}

// TestEventZoneWithoutField: ingest.event_time_zone without ingest.event_time_field applies to
// no record (live the time is the Kafka message's, an instant): lint warns at the key's
// line:column and still passes, as replay warns; replay given --timestamp-column (the field)
// does not, nor does lint with the field set, or the reference config (its UTC is the default).
func TestEventZoneWithoutField(t *testing.T) {
	const sink = "sink:\n  topic: out\n  dead_letter_topic: dlq\n"
	alone := writeFile(t, "alone.yaml", "ingest:\n  topic: t\n  features: [temp]\n  event_time_zone: Europe/Berlin\n"+sink)
	with := writeFile(t, "with.yaml", "ingest:\n  topic: t\n  features: [temp]\n  event_time_field: ts\n  event_time_zone: Europe/Berlin\n"+sink)
	out, errs, code := outlierd(t, "lint", "--config", alone)
	if want := alone + `:4:3: ingest.event_time_zone: warning: "Europe/Berlin" applies to no record: without ingest.event_time_field`; code != 0 || !strings.Contains(out, "ok") || !strings.HasPrefix(errs, want) {
		t.Errorf("lint: exit %d, stdout %q, stderr %q; want %s", code, out, errs, want)
	}
	for _, p := range []string{with, "../../configs/pipeline.yaml"} {
		if _, errs, code := outlierd(t, "lint", "--config", p); code != 0 || errs != "" {
			t.Errorf("lint %s: exit %d, stderr %q", p, code, errs)
		}
	}
	path := writeFile(t, "plant.csv", "ts,temp\n2026-01-15 08:00:00,70\n2026-07-15 08:00:00,71\n2026-07-15 09:00:00,72\n")
	if _, errs, code := outlierd(t, "replay", "--device", "cpu", "--input", path, "--config", alone); code != 0 ||
		!strings.Contains(errs, "replay: "+alone+`:4:3: ingest.event_time_zone: warning: "Europe/Berlin" applies to no record: without ingest.event_time_field or --timestamp-column`) {
		t.Errorf("replay: exit %d, stderr %q", code, errs)
	}
	for _, args := range [][]string{{"--config", alone, "--timestamp-column", "ts"}, {"--config", with}} {
		if _, errs, code := outlierd(t, append([]string{"replay", "--device", "cpu", "--input", path}, args...)...); code != 0 || strings.Contains(errs, "event_time_zone") {
			t.Errorf("replay %v: exit %d, stderr %q", args, code, errs)
		}
	}
}
