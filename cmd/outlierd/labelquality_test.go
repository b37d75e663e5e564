package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/quality"
)

// topKeys returns the top-level keys of the JSON object js, in order.
func topKeys(t *testing.T, js []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(keys, ",")
}

// TestLabelQualityKeyOrder: the embedded labelQuality puts its figures where each command's JSON
// always had them (the order of keys is part of the output people diff), F1 left out of
// predict's, and none of them without labels.
func TestLabelQualityKeyOrder(t *testing.T) {
	one := figure(1)
	q := labelQuality{Precision: &one, Recall: &one, F1: &one, ROCAUC: &one}
	noF1 := q
	noF1.F1 = nil
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"density", densityOutput{labelQuality: q},
			"mode,granularity,method,device,rows,dims,clusters,flagged,elapsed_ms,timings,uncertainty,precision,recall,f1,roc_auc"},
		{"density without labels", densityOutput{},
			"mode,granularity,method,device,rows,dims,clusters,flagged,elapsed_ms,timings,uncertainty"},
		{"predict", predictOutput{labelQuality: noF1}, "rows,w_star,flagged,results,device,precision,recall,roc_auc"},
		{"replay", replayResult{labelQuality: q, AveragePrecision: &one, Detectors: map[string]detectorQuality{"d": {}}, Keys: &replayKeys{}},
			"input,rows,features,batches,flagged,suppressed,unscored,models_built,elapsed_ms,device,precision,recall,f1,roc_auc,average_precision,detectors,keys"},
		{"replay without labels", replayResult{},
			"input,rows,features,batches,flagged,suppressed,unscored,models_built,elapsed_ms,device"},
	} {
		js, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := topKeys(t, js); got != c.want {
			t.Errorf("%s: keys %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestUndefinedFiguresAreNull: a figure the labels leave undefined is null in --json, the key
// there: recall with no row labelled an outlier read "recall": 0 while replay's stderr said
// recall was undefined (and ROC AUC, left out, could not be told from "no labels"). Every
// command that measures against --label-column writes it so.
func TestUndefinedFiguresAreNull(t *testing.T) {
	for _, c := range []struct {
		c                 quality.Confusion
		precision, recall string
		f1                string
	}{
		{quality.Confusion{TN: 5}, "null", "null", "null"},
		{quality.Confusion{FN: 3, TN: 5}, "null", "0", "0"}, // nothing flagged
		{quality.Confusion{FP: 2, TN: 5}, "0", "null", "0"}, // no outlier
		{quality.Confusion{TP: 1, FP: 1, FN: 2}, "0.5", "0.3333333333333333", "0.4"},
	} {
		var q labelQuality
		q.setCounts(c.c)
		js, _ := json.Marshal(q)
		want := `{"precision":` + c.precision + `,"recall":` + c.recall + `,"f1":` + c.f1 + `}`
		if string(js) != want {
			t.Errorf("%+v: %s, want %s", c.c, js, want)
		}
	}

	// A file with a label column that labels no row an outlier.
	data, err := os.ReadFile(gen(t, "--kind", "machines", "--rows", "600", "--seed", "2"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = lines[i][:strings.LastIndexByte(lines[i], ',')] + ",0"
	}
	path := writeFile(t, "none.csv", strings.Join(lines, "\n")+"\n")
	model := filepath.Join(t.TempDir(), "model.bin")
	for _, c := range []struct {
		args []string
		null []string
	}{
		{[]string{"replay", "--window", "600"}, []string{"recall", "roc_auc", "average_precision"}},
		{[]string{"density"}, []string{"recall", "roc_auc"}},
		{[]string{"topn", "--k", "5", "--n", "5", "--model-out", model}, []string{"roc_auc"}},
		{[]string{"predict", "--model", model}, []string{"recall", "roc_auc"}},
		{[]string{"hypercube"}, []string{"roc_auc", "average_precision"}},
		{[]string{"proclus", "--k", "3", "--l", "2"}, []string{"recall"}},
	} {
		args := append(append([]string{}, c.args...), "--input", path, "--label-column", "label", "--device", "cpu", "--json")
		out, errs, code := outlierd(t, args...)
		var res map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("%v: exit %d\n%s%s", c.args, code, out, errs)
		}
		for _, k := range c.null {
			if v, ok := res[k]; !ok || v != nil {
				t.Errorf("%s: %q is %v (there: %v), want null", c.args[0], k, v, ok)
			}
		}
		// precision: 0 when rows were flagged (each flag a false one), else null.
		if p, ok := res["precision"]; ok && p != nil && p != 0.0 {
			t.Errorf("%s: precision %v with no outlier labelled", c.args[0], p)
		}
	}
}
