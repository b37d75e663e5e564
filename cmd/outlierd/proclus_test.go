package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/proclus"
)

// plantedCSV writes a planted data set (proclus.GeneratePlanted) as CSV with a label column
// "outlier" (1 for the uniform outliers) and returns the path and the data.
func plantedCSV(t *testing.T, rows, dims, k, l int, seed uint64) (string, *proclus.Planted) {
	t.Helper()
	pl, err := proclus.GeneratePlanted(rows, dims, k, l, 2, 0.02, seed)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for j := range dims {
		fmt.Fprintf(&b, "f%d,", j)
	}
	b.WriteString("outlier\n")
	for i := range rows {
		for j := range dims {
			b.WriteString(strconv.FormatFloat(float64(pl.Cols[j][i]), 'g', -1, 32))
			b.WriteByte(',')
		}
		if pl.Label[i] < 0 {
			b.WriteString("1\n")
		} else {
			b.WriteString("0\n")
		}
	}
	return writeFile(t, "planted.csv", b.String()), pl
}

// TestProclusCLIContract: the JSON has the contract's fields, the planted clusters come back with
// their dimensions, --assignments-out has one row,cluster line per input row whose counts equal
// the JSON's sizes and outlier count, and the label column is not a feature.
func TestProclusCLIContract(t *testing.T) {
	path, pl := plantedCSV(t, 20000, 15, 5, 4, 3)
	assign := filepath.Join(t.TempDir(), "assign.csv")
	out, errs, code := outlierd(t, "proclus", "--input", path, "--label-column", "outlier", "--k", "5", "--l", "4",
		"--seed", "3", "--device", "cpu", "--assignments-out", assign, "--json")
	contractJSON(t, "proclus", out, errs, code, "k", "l", "cost", "iterations", "elapsed_ms", "outliers", "clusters",
		"restarts", "restart", "seed", "full_cost", "restart_costs")
	var res struct {
		K, L         int
		Cost         float64
		Iterations   int
		Restarts     int
		Restart      int
		Seed         uint64
		FullCost     float64   `json:"full_cost"`
		RestartCosts []float64 `json:"restart_costs"`
		Outliers     int
		Features     []string
		Precision    *float64
		Clusters     []struct {
			MedoidRow int   `json:"medoid_row"`
			Size      int   `json:"size"`
			Dims      []int `json:"dims"`
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.K != 5 || res.L != 4 || len(res.Clusters) != 5 || res.Iterations < 1 || !(res.Cost > 0) {
		t.Fatalf("JSON %s", out)
	}
	// The default restarts, the kept one the first of lowest cost, its seed derived from --seed.
	if res.Restarts != proclus.DefaultRestarts || len(res.RestartCosts) != res.Restarts ||
		res.RestartCosts[res.Restart] != res.FullCost || slices.Index(res.RestartCosts, slices.Min(res.RestartCosts)) != res.Restart ||
		res.Seed != proclus.RestartSeed(3, res.Restart) {
		t.Errorf("restarts %d, kept %d (seed %d, cost %v), costs %v", res.Restarts, res.Restart, res.Seed, res.FullCost, res.RestartCosts)
	}
	if len(res.Features) != 15 || slices.Contains(res.Features, "outlier") {
		t.Errorf("features %v: the label column must not be one", res.Features)
	}
	// The package test TestPlantedClustersRecovered shows seed 3 recovers every planted cluster;
	// through the CLI (CSV round trip of float32 values is exact) the subspaces must match too.
	for _, c := range res.Clusters {
		if !slices.ContainsFunc(pl.Dims, func(d []int) bool { return slices.Equal(d, c.Dims) }) {
			t.Errorf("cluster at medoid row %d: dims %v not a planted subspace %v", c.MedoidRow, c.Dims, pl.Dims)
		}
	}
	if res.Precision == nil || *res.Precision != 1 {
		t.Errorf("outlier precision %v: every flagged row is a planted outlier in this set", res.Precision)
	}
	f, err := os.Open(assign)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 20001 || !slices.Equal(recs[0], []string{"row", "cluster"}) {
		t.Fatalf("%d lines, header %v", len(recs), recs[0])
	}
	sizes, outliers := make([]int, 5), 0
	for i, r := range recs[1:] {
		if r[0] != strconv.Itoa(i) {
			t.Fatalf("line %d: row %s", i+2, r[0])
		}
		c, err := strconv.Atoi(r[1])
		if err != nil || c < -1 || c >= 5 {
			t.Fatalf("line %d: cluster %q", i+2, r[1])
		}
		if c < 0 {
			outliers++
		} else {
			sizes[c]++
		}
	}
	if outliers != res.Outliers {
		t.Errorf("assignments have %d outliers, JSON %d", outliers, res.Outliers)
	}
	for i, c := range res.Clusters {
		if sizes[i] != c.Size {
			t.Errorf("cluster %d: %d rows in the file, size %d in the JSON", i, sizes[i], c.Size)
		}
	}
	// The table output names the subspace features.
	txt, errs, code := outlierd(t, "proclus", "--input", path, "--label-column", "outlier", "--k", "5", "--l", "4", "--seed", "3", "--device", "cpu")
	if code != 0 || !strings.Contains(txt, "subspace {f") || !strings.Contains(txt, "outlier precision") || !strings.Contains(txt, "kept restart ") {
		t.Errorf("table output (exit %d, %s):\n%s", code, errs, txt)
	}
}

// TestProclusCLIBadInput: each bad input gives one clear line (file:line:column for the CSV, the
// parameter and its range otherwise) and the right exit status.
func TestProclusCLIBadInput(t *testing.T) {
	good := writeFile(t, "good.csv", "a,b,c\n1,2,3\n3,4,5\n5,6,7\n8,8,8\n")
	bad := writeFile(t, "bad.csv", "a,b\n1,2\n3,x\n")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"proclus", "--input", bad}, 1, bad + `:3:3: column "b": not a number: "x"`},
		{[]string{"proclus", "--input", good, "--k", "0", "--l", "2"}, 2, "k must be in [1, 4] (the row count), got 0"},
		{[]string{"proclus", "--input", good, "--k", "5", "--l", "2"}, 2, "k must be in [1, 4] (the row count), got 5"},
		{[]string{"proclus", "--input", good, "--k", "2", "--l", "4"}, 2, "l must be in [1, 3] (the dimension count), got 4"},
		{[]string{"proclus", "--input", good, "--k", "2", "--l", "2", "--b", "0"}, 2, "b must be in [1, a=100], got 0"},
		{[]string{"proclus", "--input", good, "--k", "2", "--l", "2", "--itr-pat", "0"}, 2, "itr-pat must be >= 1"},
		{[]string{"proclus", "--input", good, "--k", "2", "--l", "2", "--min-dev", "-1"}, 2, "min-dev must be finite and >= 0"},
		{[]string{"proclus", "--input", good, "--k", "2", "--l", "2", "--restarts", "0"}, 2, "restarts must be in [1, 1000], got 0"},
		{[]string{"proclus", "--input", good, "--device", "tpu"}, 2, "--device must be one of"},
		{[]string{"proclus"}, 2, "--input is required"},
		{[]string{"proclus", "--input", good, "--label-column", "zzz"}, 1, `label column "zzz" not in the header`},
	}
	for _, c := range cases {
		_, errs, code := outlierd(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errs)
			continue
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		last := lines[len(lines)-1]
		if !strings.Contains(last, c.want) {
			t.Errorf("%v: message %q does not contain %q", c.args, last, c.want)
		}
	}
	// A valid tiny run works and clusters all 4 rows or flags them.
	out, errs, code := outlierd(t, "proclus", "--input", good, "--k", "2", "--l", "2", "--device", "cpu", "--json")
	if code != 0 {
		t.Fatalf("tiny run: exit %d: %s", code, errs)
	}
	var res struct {
		Outliers int
		Clusters []struct{ Size int }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	total := res.Outliers
	for _, c := range res.Clusters {
		total += c.Size
	}
	if total != 4 {
		t.Errorf("sizes + outliers = %d, want 4: %s", total, out)
	}
}
