package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/ingest"
)

// labelledCSV writes rows of 3 Gaussian features with a label column; every 50th row is
// an outlier placed 6 sd out in one feature.
func labelledCSV(t *testing.T, rows int) (string, []bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	var b strings.Builder
	b.WriteString("a,b,c,label\n")
	labels := make([]bool, rows)
	for i := range rows {
		v := [3]float64{rng.NormFloat64(), rng.NormFloat64() * 10, rng.NormFloat64() + 5}
		l := 0
		if i%50 == 25 {
			v[i%3] += 6 * []float64{1, 10, 1}[i%3]
			l, labels[i] = 1, true
		}
		fmt.Fprintf(&b, "%g,%g,%g,%d\n", v[0], v[1], v[2], l)
	}
	return writeFile(t, "labelled.csv", b.String()), labels
}

// TestReplayContract checks replay's documented outputs: one verdict line per input row, in
// order, with the header row,score,outlier,reason,recent; the JSON's fields; and figures that agree
// with the verdicts file and the labels.
func TestReplayContract(t *testing.T) {
	path, labels := labelledCSV(t, 3000)
	vpath := filepath.Join(t.TempDir(), "verdicts.csv")
	out, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--window", "1000",
		"--min-records", "500", "--refresh-records", "700", "--device", "cpu", "--verdicts-out", vpath, "--json")
	res := contractJSON(t, "replay", out, errs, code, "rows", "flagged", "models_built", "elapsed_ms", "precision", "recall", "f1",
		"roc_auc", "average_precision", "detectors")
	// 500 records hold for the first model, then a rebuild every 700: builds at 500, 1200,
	// 1900, 2600 (batches of 1000 start them at the first batch boundary past each).
	if res["rows"].(float64) != 3000 || res["models_built"].(float64) < 2 {
		t.Errorf("rows %v, models built %v", res["rows"], res["models_built"])
	}
	f, err := os.Open(vpath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("verdicts file is not RFC 4180 CSV: %v", err)
	}
	if strings.Join(recs[0], ",") != "row,score,outlier,reason,recent" || len(recs) != 3001 {
		t.Fatalf("header %v, %d lines", recs[0], len(recs))
	}
	flags := make([]bool, 3000)
	scores := make([]float64, 3000)
	for i, r := range recs[1:] {
		if r[0] != strconv.Itoa(i) {
			t.Fatalf("line %d has row %q", i+1, r[0])
		}
		if r[2] != "true" && r[2] != "false" {
			t.Fatalf("row %d: outlier %q", i, r[2])
		}
		flags[i] = r[2] == "true"
		if scores[i], err = strconv.ParseFloat(r[1], 64); err != nil {
			t.Fatalf("row %d: score %q: %v", i, r[1], err)
		}
		if _, err := strconv.ParseFloat(r[4], 64); err != nil {
			t.Fatalf("row %d: recent %q: %v", i, r[4], err)
		}
		if flags[i] && !strings.Contains(r[3], "threshold") {
			t.Errorf("row %d flagged (default flag_by rate) with reason %q", i, r[3])
		}
		// A row not flagged never carries an outlier's reason (the density verdict fired on
		// rows that flag_by: rate did not flag, and the reason read as an outlier's).
		if !flags[i] && r[3] != "" && !strings.HasPrefix(r[3], "not flagged") {
			t.Errorf("row %d: outlier false, reason %q", i, r[3])
		}
	}
	c := quality.Count(flags, labels)
	if int(res["flagged"].(float64)) != c.TP+c.FP || math.Abs(res["f1"].(float64)-c.F1()) > 1e-12 {
		t.Errorf("JSON flagged %v f1 %v, the verdicts file gives %d flagged, F1 %v", res["flagged"], res["f1"], c.TP+c.FP, c.F1())
	}
	if auc := quality.ROCAUC(scores, labels); math.Abs(res["roc_auc"].(float64)-auc) > 1e-12 || auc < 0.95 {
		// 6-sd outliers in one of 3 independent features: any score that ranks gets them near the top.
		t.Errorf("JSON roc_auc %v, verdicts file %v (want >= 0.95)", res["roc_auc"], auc)
	}
	det := res["detectors"].(map[string]any)
	for _, name := range []string{"recent", "density", "distance", "eta_probability", "solving_set"} {
		if _, ok := det[name].(map[string]any)["average_precision"]; !ok {
			t.Errorf("detectors.%s lacks average_precision: %v", name, det[name])
		}
	}
}

// TestReplayBatchCase: a window of at least the file's rows is the batch case: one model of the
// whole file scores every row, whatever the batch boundaries.
func TestReplayBatchCase(t *testing.T) {
	path, _ := labelledCSV(t, 1200)
	out, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--window", "5000", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Rows        int `json:"rows"`
		Unscored    int `json:"unscored"`
		ModelsBuilt int `json:"models_built"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1200 || res.Unscored != 0 || res.ModelsBuilt != 1 {
		t.Fatalf("rows %d, unscored %d, models built %d: want 1200, 0, 1\n%s", res.Rows, res.Unscored, res.ModelsBuilt, out)
	}
	// The text summary says the same in English ("1 models built" before).
	if out, _, _ := outlierd(t, "replay", "--input", path, "--window", "5000"); !strings.Contains(out, " 1 model built,") {
		t.Errorf("text summary: want \"1 model built\": %s", out)
	}
	// A pipeline config with only a detect section is enough; under flag_by: rate (the quota)
	// its alarm rate sets the flags: one model of 1200 rows, a rate of 0.05 flags about 60 (the
	// calibration's quantile).
	cfg := writeFile(t, "detect.yaml", "detect:\n  flag_by: rate\n  alarm_rate: 0.05\n")
	out, errs, code = outlierd(t, "replay", "--input", path, "--window", "5000", "--config", cfg, "--json")
	if code != 0 {
		t.Fatalf("--config: exit %d: %s", code, errs)
	}
	var r2 struct {
		Flagged int `json:"flagged"`
	}
	if err := json.Unmarshal([]byte(out), &r2); err != nil {
		t.Fatal(err)
	}
	// The threshold is the 95th percentile of the calibration records' scores (all 1200 rows
	// here), so between 59 and 61 rows lie strictly above it unless scores tie there.
	if r2.Flagged < 55 || r2.Flagged > 65 {
		t.Errorf("alarm rate 0.05 of 1200 rows flagged %d, want about 60", r2.Flagged)
	}
}

// TestReplayErrors: bad input is refused with a clear message.
func TestReplayErrors(t *testing.T) {
	path, _ := labelledCSV(t, 100)
	cfg := writeFile(t, "c.yaml", "detect:\n  alarm_rate: 2\n")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"replay"}, 2, "--input is required"},
		{[]string{"replay", "--input", path, "--label-column", "nope"}, 1, "nope"},
		{[]string{"replay", "--input", path, "--config", cfg}, 1, "alarm_rate"},
		{[]string{"replay", "--input", path, "--device", "tpu"}, 2, "--device"},
		// A column flag naming no column says which flag and the header (it read "replay: the
		// ingest section does not fit ...: ingest.key_field: ...", a key the user never wrote).
		{[]string{"replay", "--input", path, "--key-column", "sensor"}, 1, `--key-column "sensor" is not a column of the header [a b c label]`},
		// JSON lines read by the file's extension, no --format and no config given: the message
		// named neither (it read "--format json needs ingest.features in --config").
		{[]string{"replay", "--input", writeFile(t, "x.jsonl", `{"v": 1}`+"\n")}, 2, `x.jsonl: JSON lines (by the extension .jsonl) need the features named: a --config with ingest.features (a JSON line has no column list), e.g. ingest: {features: [temp, pressure]}`},
		{[]string{"replay", "--input", path, "--timestamp-column", "ts"}, 1, `--timestamp-column "ts" is not a column of the header [a b c label]`},
		// A file that cannot be written names the flag, as density's --scores-out does (it read
		// "open /nonexistent/v.csv: no such file or directory").
		{[]string{"replay", "--input", path, "--verdicts-out", "/nonexistent/v.csv"}, 1, "--verdicts-out: open /nonexistent/v.csv"},
	} {
		_, errs, code := outlierd(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errs, c.code, c.msg)
		}
	}
}

// TestReplayKeyColumn: --key-column gives a model per key (detect.key_by: key): a fleet of 20
// sensors with baselines far apart, one +10 sd spike of a sensor's own noise that lies inside
// the fleet's range, flagged once the sensor is warm; the JSON counts the keys, the rows each
// key's model scored, and the key column is not a feature.
func TestReplayKeyColumn(t *testing.T) {
	var b strings.Builder
	b.WriteString("sensor,value,label\n")
	r := rand.New(rand.NewPCG(4, 21))
	spikeAt := 20*150 + 7 // sensor 7, its 151st reading: warm (keys.min_records 40)
	for i := range 20 * 200 {
		s := i % 20
		v, lab := 50*float64(s)+r.NormFloat64(), 0
		if i == spikeAt {
			v, lab = v+10, 1
		}
		fmt.Fprintf(&b, "s%02d,%.4f,%d\n", s, v, lab)
	}
	path := writeFile(t, "fleet.csv", b.String())
	out, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--key-column", "sensor", "--window", "2000", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Features int     `json:"features"`
		Flagged  int     `json:"flagged"`
		Recall   float64 `json:"recall"`
		Keys     struct {
			Count       int `json:"count"`
			Live        int `json:"live"`
			ScoredByKey int `json:"scored_by_key"`
			PerKey      map[string]struct {
				Rows, Flagged, ByKey int
			} `json:"per_key"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Features != 1 || res.Keys.Count != 20 || res.Keys.Live != 20 || res.Keys.ScoredByKey != 20*(200-30) || res.Keys.PerKey["s07"].Rows != 200 { // (keys.min_records 30)
		t.Fatalf("features %d, keys %+v: want 1 feature, 20 keys live, 3400 rows by key", res.Features, res.Keys)
	}
	if res.Recall != 1 || res.Keys.PerKey["s07"].Flagged < 1 {
		t.Errorf("the +10 sd spike of s07 not flagged: recall %v, flagged %d\n%s", res.Recall, res.Flagged, out)
	}
}

// TestReplayKeyColumnOverConfig: --key-column gives detect.key_by: key (the help says so) even
// over a config that writes key_by: none, where live the key names the series alone; replay
// now says so on stderr, with the flag that keeps the config's. Silent, a replay meant to
// reproduce the pipeline ran models per key.
func TestReplayKeyColumnOverConfig(t *testing.T) {
	path := writeFile(t, "fleet.csv", "sensor,value\n"+strings.Repeat("s1,1.5\ns2,20.5\ns1,1.7\ns2,20.1\n", 100))
	none := writeFile(t, "none.yaml", "detect:\n  key_by: none\n")
	want := `--key-column "sensor" gives detect.key_by: key, not the config's key_by: none`
	_, errs, code := outlierd(t, "replay", "--input", path, "--key-column", "sensor", "--config", none, "--window", "200")
	if code != 0 || !strings.Contains(errs, want) {
		t.Errorf("over key_by: none: exit %d, stderr %q: want %q", code, errs, want)
	}
	for _, args := range [][]string{{"--config", none, "--key-by", "none"}, {}} { // the config's kept; no config
		_, errs, code := outlierd(t, append([]string{"replay", "--input", path, "--key-column", "sensor", "--window", "200"}, args...)...)
		if code != 0 || strings.Contains(errs, "gives detect.key_by") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestReplayKeyColumnRefusedNamesTheFlag: where the key_by: key that --key-column gives cannot
// run with the config's detect section (flag_by: rate), the refusal names the flag and --key-by
// none. It said "set flag_by: significance, or key_by: none" alone: a config that then wrote
// key_by: none was refused the same way, --key-column overriding it.
func TestReplayKeyColumnRefusedNamesTheFlag(t *testing.T) {
	path := writeFile(t, "fleet.csv", "sensor,value\n"+strings.Repeat("s1,1.5\ns2,20.5\ns1,1.7\ns2,20.1\n", 100))
	for _, body := range []string{"detect:\n  flag_by: rate\n", "detect:\n  flag_by: rate\n  key_by: none\n"} {
		cfg := writeFile(t, "rate.yaml", body)
		_, errs, code := outlierd(t, "replay", "--input", path, "--key-column", "sensor", "--config", cfg, "--window", "200")
		if code != 2 || !strings.Contains(errs, `--key-column "sensor" gives detect.key_by: key`) || !strings.Contains(errs, "--key-by none") {
			t.Errorf("%q: exit %d, stderr %q: want exit 2 naming --key-column and --key-by none", body, code, errs)
		}
		if _, errs, code := outlierd(t, "replay", "--input", path, "--key-column", "sensor", "--config", cfg, "--window", "200", "--key-by", "none"); code != 0 {
			t.Errorf("%q with --key-by none: exit %d, stderr %q", body, code, errs)
		}
	}
}

// TestReplayKeyedDetectorFigures: under detect.key_by the global model's own tests (the
// eta-probability, the solving set, the hypercube) do not run on a record its key's model
// scored (their fields read 0: eta-probability 0 ranked every such record first), so their
// figures are measured over the rows the global model scored and say how many; the ranking
// scores every model writes (density, distance, recent) cover every row.
func TestReplayKeyedDetectorFigures(t *testing.T) {
	var scores []batch.Score
	var labels []bool
	for i := range 100 { // the global model's rows: a perfect eta-probability and weight
		out := i%10 == 0
		s := batch.Score{Scored: true, Warming: true, EtaProbability: 0.9, Weight: 1, DensityScore: 1, DistanceScore: 1, Score: 1}
		if out {
			s.EtaProbability, s.Weight, s.DensityScore, s.DistanceScore, s.Score = 0.1, 5, 5, 5, 5
		}
		scores, labels = append(scores, s), append(labels, out)
	}
	for i := range 300 { // its keys' models' rows: the global fields cleared
		out := i%30 == 0
		s := batch.Score{Scored: true, ByKey: true, DensityScore: 1, DistanceScore: 1, Score: 1}
		if out {
			s.DensityScore, s.DistanceScore, s.Score = 5, 5, 5
		}
		scores, labels = append(scores, s), append(labels, out)
	}
	var res replayResult
	replayQuality(&res, scores, labels)
	for _, d := range []string{"eta_probability", "solving_set"} {
		q, ok := res.Detectors[d]
		if !ok || q.Rows != 100 || q.ROCAUC == nil || *q.ROCAUC != 1 {
			t.Errorf("%s: %+v (ROC AUC %v): want the 100 rows the global model scored, ROC AUC 1", d, q, fmtFigure(q.ROCAUC))
		}
	}
	for _, d := range []string{"density", "distance"} {
		if q := res.Detectors[d]; q.Rows != 400 || q.ROCAUC == nil || *q.ROCAUC != 1 {
			t.Errorf("%s: %+v: want every row, ROC AUC 1", d, q)
		}
	}
	if _, ok := res.Detectors["hypercube"]; ok {
		t.Errorf("hypercube reported though it ran nowhere")
	}
}

// TestReplayKeyByWithoutKey: detect.key_by: key with no key column (no --key-column, no
// ingest.key_field) gave every row the empty key, one model for the whole file, silently; it
// says so now, naming where a key comes from.
func TestReplayKeyByWithoutKey(t *testing.T) {
	path, _ := labelledCSV(t, 400)
	cfg := writeFile(t, "keyed.yaml", "detect:\n  key_by: key\n")
	for _, args := range [][]string{{"--key-by", "key"}, {"--config", cfg}} {
		_, errs, code := outlierd(t, append([]string{"replay", "--input", path, "--label-column", "label", "--window", "200"}, args...)...)
		want := "detect.key_by: key, but the rows have no key"
		if code != 0 || !strings.Contains(errs, want) {
			t.Errorf("%v: exit %d, stderr %q: want exit 0 and %q", args, code, errs, want)
		}
	}
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--window", "200")
	if code != 0 || strings.Contains(errs, "no key") {
		t.Errorf("without key_by: exit %d, stderr %q", code, errs)
	}
}

// TestReplaySuppressedCounted: the rows the alarm cap held back (significant, not flagged) are
// counted, in --json's "suppressed" and the text line, as many as the verdicts' reasons say so;
// a replay whose recall the cap cut read as if the model had missed them.
func TestReplaySuppressedCounted(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var b strings.Builder
	b.WriteString("a,b\n")
	for i := range 3000 {
		v := [2]float64{rng.NormFloat64(), rng.NormFloat64()}
		if i >= 1000 && i%20 == 0 { // 5% isolated spikes after a clean start: over the 2% cap
			v[0] += 40
		}
		fmt.Fprintf(&b, "%g,%g\n", v[0], v[1])
	}
	path := writeFile(t, "spikes.csv", b.String())
	vpath := filepath.Join(t.TempDir(), "verdicts.csv")
	out, errs, code := outlierd(t, "replay", "--input", path, "--window", "1000", "--min-records", "1000", "--verdicts-out", vpath, "--json")
	res := contractJSON(t, "replay", out, errs, code, "flagged", "suppressed")
	data, err := os.ReadFile(vpath)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Count(string(data), ",false,\"not flagged, the alarm cap is spent")
	if n, _ := res["suppressed"].(float64); int(n) != said || n == 0 {
		t.Errorf("JSON suppressed %v, the verdicts say %d (want them equal and above 0)", n, said)
	}
	out, _, _ = outlierd(t, "replay", "--input", path, "--window", "1000", "--min-records", "1000")
	if want := fmt.Sprintf("%d held back by the alarm cap (detect.alarm_rate)", said); !strings.Contains(out, want) {
		t.Errorf("text %q lacks %q", out, want)
	}
}

// TestReplayLabelsOfOneKind: a label column that calls every row an outlier (a feature named by
// mistake: any non-zero number is an outlier) or none (a healthy history) is said on stderr with
// the figures it leaves undefined; before, "ROC AUC n/a" (or a recall of 0 for no outlier) came
// without a word of why.
func TestReplayLabelsOfOneKind(t *testing.T) {
	path, _ := labelledCSV(t, 400)
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "b", "--window", "200")
	if want := `--label-column "b" labels every row an outlier (400 of 400`; code != 0 || !strings.Contains(errs, want) {
		t.Errorf("a feature as the label: exit %d, stderr %q: want %q", code, errs, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	healthy := writeFile(t, "healthy.csv", strings.ReplaceAll(string(data), ",1\n", ",0\n"))
	_, errs, code = outlierd(t, "replay", "--input", healthy, "--label-column", "label", "--window", "200")
	if want := `--label-column "label" labels no row an outlier`; code != 0 || !strings.Contains(errs, want) {
		t.Errorf("no outlier labelled: exit %d, stderr %q: want %q", code, errs, want)
	}
	_, errs, _ = outlierd(t, "replay", "--input", path, "--label-column", "label", "--window", "200")
	if strings.Contains(errs, "labels every row") || strings.Contains(errs, "labels no row") {
		t.Errorf("labels of both kinds: stderr %q", errs)
	}
}

// TestReplayTextColumnAsFeature: without ingest.features every column but the label's is a
// feature, so a fleet's key column not named by --key-column stopped replay with only `field
// "sensor": not a number`; the message now says why the column was read as a number and how to
// name it.
func TestReplayTextColumnAsFeature(t *testing.T) {
	path := writeFile(t, "fleet.csv", "sensor,value,label\ns1,1.5,0\ns2,20.5,0\n")
	cfg := writeFile(t, "keyed.yaml", "detect:\n  key_by: key\n")
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--config", cfg)
	want := `fleet.csv:2:1: field "sensor": not a number: "s1" (without ingest.features every column but the key, timestamp and label columns is a feature: --key-column sensor if it is the key)`
	if code != 1 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q: want exit 1 and %q", code, errs, want)
	}
}

// TestReplayEmptyColumnAsFeature: gen --kind-column's anomaly_kind (empty on a normal row) is
// a feature to a replay without ingest.features, and replay stopped at the first normal row with
// only `field "anomaly_kind": missing`; the message now says why the column was read and how to
// name the features.
func TestReplayEmptyColumnAsFeature(t *testing.T) {
	out, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "500", "--ts", "--stuck", "1", "--stuck-length", "20", "--kind-column")
	if code != 0 {
		t.Fatal(errs)
	}
	path := writeFile(t, "kinds.csv", out)
	_, errs, code = outlierd(t, "replay", "--input", path, "--label-column", "label", "--timestamp-column", "ts")
	want := `kinds.csv:2:44: field "anomaly_kind": missing (without ingest.features every column but the key, timestamp and label columns is a feature: a --config with ingest.features names them, e.g. ingest: {features: [temp, pressure, humidity]})`
	if code != 1 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q: want exit 1 and %q", code, errs, want)
	}
	cfg := writeFile(t, "f.yaml", "ingest: {features: [temp, pressure, humidity]}\n")
	if _, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--timestamp-column", "ts", "--config", cfg); code != 0 {
		t.Errorf("with the features named: exit %d, stderr %q", code, errs)
	}
}

// TestReplayMissingTimeNoFeatureHint: a row whose timestamp column is empty
// stopped replay with the hint meant for a feature column, "every column but the key,
// timestamp and label columns is a feature: ... e.g. ingest: {features: [temp, pressure,
// humidity]}": advice to name as features the very columns that already were, for a column that
// is not one. The error names the column and says it is missing, no more.
func TestReplayMissingTimeNoFeatureHint(t *testing.T) {
	var b strings.Builder
	b.WriteString("ts,sensor,temp,pressure,label\n")
	for i := range 40 {
		ts, key := strconv.Itoa(1767225600000+60000*i), "s"+strconv.Itoa(i%2)
		if i == 30 {
			ts = ""
		}
		fmt.Fprintf(&b, "%s,%s,%d,%d,0\n", ts, key, 70+i%3, 100+i%5)
	}
	path := writeFile(t, "gap.csv", b.String())
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label", "--timestamp-column", "ts", "--key-column", "sensor", "--min-records", "20")
	want := `gap.csv:32:1: field "ts": missing`
	if code != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "is a feature") {
		t.Errorf("exit %d, stderr %q: want exit 1 and %q, without the features' hint", code, errs, want)
	}
}

// TestReplayKeyColumnHintByReason: the hint of TestReplayTextColumnAsFeature is given by the
// decoder's Reason (ingest.ReasonNotNumber), not by the message's wording (it tested the prefix
// "not a number": a reworded message would have lost it): a reworded not-a-number gets it, a
// problem of another reason worded "not a number" does not, nor the label's column, nor a
// config that names the features.
func TestReplayKeyColumnHintByReason(t *testing.T) {
	in := replayInput{label: "label"}
	reworded := fmt.Errorf("wrapped: %w", &ingest.FieldError{Field: "sensor", Reason: ingest.ReasonNotNumber, Problem: "holds text, not a reading"})
	if h := keyColumnHint(in, nil, reworded); !strings.Contains(h, "--key-column sensor if it is the key") {
		t.Errorf("a reworded not-a-number: hint %q, want --key-column sensor", h)
	}
	for _, c := range []struct {
		name string
		in   replayInput
		err  error
	}{
		{"another reason so worded", in, &ingest.FieldError{Field: "sensor", Reason: ingest.ReasonOutOfRange, Problem: "not a number: too large"}},
		{"the label's column", in, &ingest.FieldError{Field: "label", Reason: ingest.ReasonNotNumber, Problem: "not a number"}},
		{"features named", replayInput{label: "label", ingest: ingest.Config{Features: []string{"sensor"}}}, reworded},
		{"not a field's", in, fmt.Errorf("not a number")},
	} {
		if h := keyColumnHint(c.in, nil, c.err); h != "" {
			t.Errorf("%s: hint %q, want none", c.name, h)
		}
	}
}

// TestReplayKeysInText: without --json, a replay under key_by says what its keys did (it
// printed the JSON's keys part nowhere: a user saw no sign that models per key ran).
func TestReplayKeysInText(t *testing.T) {
	var b strings.Builder
	b.WriteString("sensor,value\n")
	r := rand.New(rand.NewPCG(4, 22))
	for i := range 10 * 100 {
		fmt.Fprintf(&b, "s%d,%.4f\n", i%10, 50*float64(i%10)+r.NormFloat64())
	}
	path := writeFile(t, "fleet.csv", b.String())
	out, errs, code := outlierd(t, "replay", "--input", path, "--key-column", "sensor", "--window", "500")
	want := "keys: 10 (10 with a model of their own, 0 warming, 0 evicted); 700 rows scored by their key's model, 300 by the global model" // (keys.min_records 30 of each key's 100)
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, stdout %q, stderr %q: want %q", code, out, errs, want)
	}
}

// TestReplayRefusesWhatTheStartRefuses: replay checks the detect section against the file's
// features as lint and the start do (detect.ValidateFeatures): a keys.max_bytes below one key
// replayed with every key evicted before its model, and reported only as 0 keys live.
func TestReplayRefusesWhatTheStartRefuses(t *testing.T) {
	var b strings.Builder
	b.WriteString("sensor,value\n")
	for i := range 300 {
		fmt.Fprintf(&b, "s%d,%d\n", i%3, i%7)
	}
	path := writeFile(t, "fleet.csv", b.String())
	cfg := writeFile(t, "tiny.yaml", "detect:\n  keys:\n    max_bytes: 100\n")
	_, errs, code := outlierd(t, "replay", "--input", path, "--key-column", "sensor", "--config", cfg)
	if want := "detect.keys.max_bytes: 100 cannot hold one key"; code != 1 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q: want exit 1 and %q", code, errs, want)
	}
}

// TestReplayBatchCaseSaid: a file shorter than the config's window is the batch case (one model
// of the whole file scores every row, none before the file's end: 20,000 generated sensor rows
// at the default W = 50,000 built 1 model), which a user replaying "as the pipeline does" did
// not ask for by any flag; stderr says so and how to replay it as a stream. Not when
// --window or --min-records chose it.
func TestReplayBatchCaseSaid(t *testing.T) {
	path, _ := labelledCSV(t, 400)
	want := "the batch case: detect.window 50000 holds every one of the file's 400 rows, so one model of the whole file scores them all (--window below 400 replays them as a stream)"
	_, errs, code := outlierd(t, "replay", "--input", path, "--label-column", "label")
	if code != 0 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q: want %q", code, errs, want)
	}
	for _, args := range [][]string{{"--window", "1000"}, {"--window", "100"}, {"--min-records", "100"}} {
		_, errs, code := outlierd(t, append([]string{"replay", "--input", path, "--label-column", "label"}, args...)...)
		if code != 0 || strings.Contains(errs, "batch case") {
			t.Errorf("%v: exit %d, stderr %q: want no note", args, code, errs)
		}
	}
}

// TestReplayShortFile: a file shorter than the default parameters still replays as the batch
// case (proclus.k followed min_records down like clusters, k and n; it stopped replay with
// "detect.proclus.k: must be in [1, min_records=3], got 10", a key the user never set), and a
// file too short for any model says so with the count and the flag that decides, where it said
// "replay: 0 of 1 rows came out of the detect stage".
func TestReplayShortFile(t *testing.T) {
	three := writeFile(t, "three.csv", "a,b\n1,2\n2,3\n3,5\n")
	out, errs, code := outlierd(t, "replay", "--input", three, "--device", "cpu", "--json")
	if code != 0 || !strings.Contains(out, `"rows": 3`) {
		t.Errorf("a 3-row file: exit %d, %s %s", code, out, errs)
	}
	one := writeFile(t, "one.csv", "a,b\n1,2\n")
	_, errs, code = outlierd(t, "replay", "--input", one, "--device", "cpu")
	if code == 0 || !strings.Contains(errs, "1 row") || !strings.Contains(errs, "at least 2") {
		t.Errorf("a 1-row file: exit %d, %q: want an error saying a model needs at least 2 rows", code, errs)
	}
	thirty, _ := labelledCSV(t, 30)
	_, errs, code = outlierd(t, "replay", "--input", thirty, "--label-column", "label", "--min-records", "50", "--device", "cpu")
	if code == 0 || !strings.Contains(errs, "30 rows") || !strings.Contains(errs, "min_records") || strings.Contains(errs, "came out of") {
		t.Errorf("30 rows, --min-records 50: exit %d, %q: want an error naming the rows and min_records", code, errs)
	}
}

// TestReplayShortFileUnderPassAndZeroFlags: under before_model: pass a file too short for a
// model replays as before, its rows unscored (a 1-row file was refused: "a model needs at least
// 2 rows", though pass asks for no model); --window, --min-records and --refresh-records 0
// are the config's, as their help says (an explicit 0 was taken as 0 and refused, with four
// more errors on keys never set: "detect.proclus.k: must be in [1, min_records=0], got 0").
func TestReplayShortFileUnderPassAndZeroFlags(t *testing.T) {
	pass := writeFile(t, "pass.yaml", "detect:\n  before_model: pass\n")
	one := writeFile(t, "one.csv", "a,b\n1,2\n")
	out, errs, code := outlierd(t, "replay", "--input", one, "--config", pass, "--device", "cpu", "--json")
	if code != 0 || !strings.Contains(out, `"unscored": 1`) {
		t.Errorf("a 1-row file under before_model: pass: exit %d, %s %s", code, out, errs)
	}
	thirty, _ := labelledCSV(t, 30)
	for _, flag := range []string{"--window", "--min-records", "--refresh-records"} {
		out, errs, code := outlierd(t, "replay", "--input", thirty, "--label-column", "label", flag, "0", "--device", "cpu", "--json")
		if code != 0 || !strings.Contains(out, `"unscored": 0`) {
			t.Errorf("%s 0: exit %d, %s %s", flag, code, out, errs)
		}
	}
}

// TestReplayConfigErrorsNameLineColumn: an ingest key of replay's --config that the ingest
// stage refuses once the file's columns are known (a feature the file lacks, a fill value for
// no feature) is named at its line and column in the config, as lint and run name every config
// problem; replay gave the key alone ("ingest: invalid config: ingest.fill[\"humidty\"]: ...").
func TestReplayConfigErrorsNameLineColumn(t *testing.T) {
	path := writeFile(t, "d.csv", "temp,humidity,label\n1,2,0\n3,4,0\n")
	for _, c := range []struct{ yaml, want string }{
		{"ingest:\n  features: [temp, humidity]\n  missing: fill\n  fill: {humidty: 40}\n", `f.yaml:4:10: ingest.fill["humidty"]: "humidty" is not a feature`},
		{"detect:\n  window: 100\ningest:\n  features: [temp, nope]\n", `f.yaml:4:20: ingest.features[1]: "nope" is not a column of `},
		// The detect section, checked once the file is read: it gave the file name alone.
		{"detect:\n  window: 100\n  alarm_rate: 2\n", `f.yaml:3:3: detect.alarm_rate: must be in (0, 0.5], got 2`},
		{"detect:\n  density:\n    mode: rollup\n", `f.yaml:3:5: detect.density.mode: rollup`},
		// The config's device (it read "--device must be one of auto|cpu|cuda", a flag not given).
		{"detect:\n  window: 100\ndevice: gpu\n", `f.yaml:3:1: device: must be auto, cpu or cuda, got "gpu"`},
	} {
		input := path
		if strings.Contains(c.yaml, "rollup") { // over 21 features, more than rollup takes
			var b strings.Builder
			for i := range 21 {
				fmt.Fprintf(&b, "f%d,", i)
			}
			b.WriteString("label\n")
			for r := range 30 {
				for i := range 21 {
					fmt.Fprintf(&b, "%d,", (r*7+i)%11)
				}
				b.WriteString("0\n")
			}
			input = writeFile(t, "wide.csv", b.String())
		}
		cfg := filepath.Join(t.TempDir(), "f.yaml")
		if err := os.WriteFile(cfg, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errs, code := outlierd(t, "replay", "--input", input, "--config", cfg, "--label-column", "label", "--device", "cpu")
		if code != 1 || !strings.Contains(errs, filepath.Dir(cfg)+"/"+c.want) {
			t.Errorf("config %q: exit %d, %q; want %q", c.yaml, code, errs, c.want)
		}
	}
}

// TestReplayKeyByCheckedFirst: --key-by foo was checked after the file had been read (0.6 s of
// a 1M-row file), and reported as the config key, "detect.key_by: must be none or key", though
// the command line set it; like --pace, it is now refused first, as the flag.
func TestReplayKeyByCheckedFirst(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.csv") // (read first, its error would come first)
	_, errs, code := outlierd(t, "replay", "--input", missing, "--key-by", "foo")
	if want := `--key-by "foo": want none or key`; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q: want exit 2 and %q", code, errs, want)
	}
}

// TestReplayRaggedRowSaysTheHeader: a CSV row with more or fewer fields than the file's header
// stopped replay with the pipeline decoder's words, "invalid CSV at byte 0: 3 columns, csv_header
// has 2": a config key the user never wrote (the header was the file's line 1) and a byte offset
// of no use. Without ingest.csv_header it now says what topn and the other batch commands say.
func TestReplayRaggedRowSaysTheHeader(t *testing.T) {
	path := writeFile(t, "ragged.csv", "a,b\n1,2\n3,4,5\n")
	_, errs, code := outlierd(t, "replay", "--input", path)
	if want := "ragged.csv:3: ragged row: 3 fields, the header (line 1) has 2"; code != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "csv_header") {
		t.Errorf("exit %d, stderr %q: want exit 1 and %q", code, errs, want)
	}
}

// TestReplayTwoRowsNoImpossibleAdvice: a 2-row file's batch-case note ended "(--window below 2
// replays them as a stream)", but a window holds at least 2 records (--window 1 is refused):
// advice no run can follow. A file of 2 rows gets the note without it.
func TestReplayTwoRowsNoImpossibleAdvice(t *testing.T) {
	path := writeFile(t, "two.csv", "a,b\n1,2\n2,3\n")
	_, errs, code := outlierd(t, "replay", "--input", path)
	if code != 0 || !strings.Contains(errs, "the batch case") || strings.Contains(errs, "--window below 2") {
		t.Errorf("exit %d, stderr %q: want the batch case's note without --window below 2", code, errs)
	}
}
