package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/datasets/csvfile"
)

// TestHypercubeContract: the JSON has the contract's fields, --scores-out has one row,score line
// per input row in order with the scores of hypercube.Detect, and the ROC AUC and average
// precision recomputed from that file equal the JSON's.
func TestHypercubeContract(t *testing.T) {
	// 5 features and their 5 uncertainty columns: 10 dimensions for the hypercube score.
	path := gen(t, "--kind", "three", "--rows", "4000", "--dims", "5", "--seed", "9")
	scores := filepath.Join(t.TempDir(), "scores.csv")
	out, errs, code := outlierd(t, "hypercube", "--input", path, "--label-column", "label", "--bins", "6",
		"--scores-out", scores, "--json", "--device", "cpu")
	js := contractJSON(t, "hypercube", out, errs, code, "rows", "dims", "bins", "cells", "elapsed_ms", "roc_auc", "average_precision")
	tab, err := csvfile.ReadFile(path, "label")
	if err != nil {
		t.Fatal(err)
	}
	want, err := hypercube.Detect(tab.Cols, hypercube.Params{Bins: 6})
	if err != nil {
		t.Fatal(err)
	}
	if js["rows"] != 4000.0 || js["dims"] != 10.0 || js["bins"] != 6.0 || js["cells"] != float64(want.Cells.Len()) {
		t.Fatalf("JSON rows/dims/bins/cells %v %v %v %v, want 4000 10 6 %d", js["rows"], js["dims"], js["bins"], js["cells"], want.Cells.Len())
	}
	f, err := os.Open(scores)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != "row,score" || len(recs) != 4001 {
		t.Fatalf("scores header %v, %d lines", recs[0], len(recs))
	}
	got := make([]float64, 4000)
	for i, r := range recs[1:] {
		if r[0] != strconv.Itoa(i) {
			t.Fatalf("line %d has row %s", i+2, r[0])
		}
		if got[i], err = strconv.ParseFloat(r[1], 64); err != nil {
			t.Fatal(err)
		}
		if got[i] != want.Scores[i] { // written with 'g' -1: the float64 round-trips exactly
			t.Fatalf("row %d: score %v, hypercube.Detect %v", i, got[i], want.Scores[i])
		}
	}
	labels := tab.Outliers()
	if auc := quality.ROCAUC(got, labels); auc != js["roc_auc"].(float64) {
		t.Fatalf("ROC AUC from scores-out %v, JSON %v", auc, js["roc_auc"])
	}
	if ap := quality.AveragePrecision(got, labels); ap != js["average_precision"].(float64) {
		t.Fatalf("average precision from scores-out %v, JSON %v", ap, js["average_precision"])
	}
	// Without a label column the quality fields are absent.
	out, errs, code = outlierd(t, "hypercube", "--input", path, "--json", "--device", "cpu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "roc_auc") || strings.Contains(out, "average_precision") {
		t.Fatalf("quality fields without labels: %s", out)
	}
}

func TestHypercubeBadInput(t *testing.T) {
	good := writeFile(t, "good.csv", "a,b\n1,2\n3,4\n5,6\n")
	bad := writeFile(t, "bad.csv", "a,b\n1,2\n3,x\n")
	var wide strings.Builder
	for j := range hypercube.MaxDims + 1 {
		if j > 0 {
			wide.WriteByte(',')
		}
		wide.WriteString("x" + strconv.Itoa(j))
	}
	wide.WriteString("\n" + strings.TrimSuffix(strings.Repeat("1,", hypercube.MaxDims+1), ",") + "\n")
	widePath := writeFile(t, "wide.csv", wide.String())
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"hypercube", "--input", good, "--bins", "1", "--device", "cpu"}, 2, "--bins must be in [2, 65536], got 1"},
		{[]string{"hypercube", "--input", good, "--bins", "70000", "--device", "cpu"}, 2, "--bins must be in [2, 65536], got 70000"},
		{[]string{"hypercube", "--input", bad, "--device", "cpu"}, 1, bad + `:3:3: column "b": not a number: "x"`},
		{[]string{"hypercube", "--device", "cpu"}, 2, "--input is required"},
		{[]string{"hypercube", "--input", good, "--device", "tpu"}, 2, "--device must be one of"},
		{[]string{"hypercube", "--input", good, "--label-column", "zzz", "--device", "cpu"}, 1, `label column "zzz" not in the header`},
		{[]string{"hypercube", "--input", widePath, "--device", "cpu"}, 1, "129 feature columns, the hypercube score supports at most 128 dimensions"},
	}
	for _, c := range cases {
		_, errs, code := outlierd(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errs)
			continue
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, c.want) {
			t.Errorf("%v: message %q does not contain %q", c.args, last, c.want)
		}
	}
}
