package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestUndefinedFiguresAreNull: benchcombine's raw lines (-raw, read by docs/bench/choose.py)
// wrote 0 for a figure its labels leave undefined, where every outlierd command's --json writes
// null (labelquality.go): recall with no row labelled an outlier, precision with no row flagged,
// F1 with neither. On a set that labels no outlier each raw line must carry recall null,
// precision and F1 null exactly where the rule flagged nothing (a number, 0, where it flagged
// some: all false positives), the AUCs null (one kind of label); the Markdown table says n/a.
func TestUndefinedFiguresAreNull(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows = 400
	d := &dataset{name: "normal", features: []string{"a", "b"}, cols: make([][]float32, 2), outlier: make([]bool, rows)}
	for j := range d.cols {
		d.cols[j] = make([]float32, rows)
		for i := range d.cols[j] {
			d.cols[j][i] = float32(rng.NormFloat64())
		}
	}
	ws, _ := windowFor("whole", d)
	var table, raw bytes.Buffer
	// eta 0.5 and n 1% flag some records under "any"; eta 1e-9 flags none by density.
	if err := measure(&table, json.NewEncoder(&raw), d, "none", ws, []float64{0.5, 1e-9}, []float64{0.01}, 100, 1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(raw.String()), "\n")
	var flaggedSome, flaggedNone bool
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("raw line %q: %v", l, err)
		}
		for _, k := range []string{"precision", "recall", "f1", "density_auc", "distance_auc"} {
			if _, ok := r[k]; !ok {
				t.Errorf("raw line lacks %q: %s", k, l)
			}
		}
		flagged := r["flagged"].(float64)
		flaggedSome, flaggedNone = flaggedSome || flagged > 0, flaggedNone || flagged == 0
		if r["recall"] != nil {
			t.Errorf("no outlier labelled: recall %v, want null: %s", r["recall"], l)
		}
		if (r["precision"] == nil) != (flagged == 0) || (r["f1"] == nil) != (flagged == 0) {
			t.Errorf("%v flagged, none labelled: precision %v, F1 %v; want null with no flag, 0 with some: %s", flagged, r["precision"], r["f1"], l)
		}
		if r["density_auc"] != nil || r["distance_auc"] != nil {
			t.Errorf("one kind of label: AUCs %v, %v, want null: %s", r["density_auc"], r["distance_auc"], l)
		}
	}
	if !flaggedSome || !flaggedNone {
		t.Fatalf("the runs flagged some records in a line: %v, none in a line: %v; the test wants both:\n%s", flaggedSome, flaggedNone, raw.String())
	}
	for _, l := range strings.Split(table.String(), "\n") {
		if strings.HasPrefix(l, "| normal ") && !strings.Contains(l, "| n/a |") {
			t.Errorf("table line without n/a for the undefined recall: %s", l)
		}
	}
}
