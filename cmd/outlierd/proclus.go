package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/proclus"
)

// proclusOutput is the JSON contract of `outlierd proclus --json` (issue 11): k, l, cost,
// iterations, elapsed_ms, outliers (a count) and clusters; device, rows and features say what ran
// on what, and with a label column precision/recall rate the outlier flags against it. Issue 24
// added the restarts: restarts (how many), restart (the one returned, 0-based), seed (its seed),
// full_cost (its criterion) and restart_costs (every restart's criterion, in restart order); cost
// and iterations are the returned restart's.
type proclusOutput struct {
	Device       string           `json:"device"`
	Rows         int              `json:"rows"`
	K            int              `json:"k"`
	L            int              `json:"l"`
	Cost         float64          `json:"cost"`
	Iterations   int              `json:"iterations"`
	Restarts     int              `json:"restarts"`
	Restart      int              `json:"restart"`
	Seed         uint64           `json:"seed"`
	FullCost     float64          `json:"full_cost"`
	RestartCosts []float64        `json:"restart_costs"`
	ElapsedMS    float64          `json:"elapsed_ms"`
	Outliers     int              `json:"outliers"`
	Clusters     []proclusCluster `json:"clusters"`
	Features     []string         `json:"features"`
	Precision    *figure          `json:"precision,omitempty"` // with labels: null when nothing is flagged
	Recall       *figure          `json:"recall,omitempty"`    // with labels: null when no row is labelled an outlier
}

type proclusCluster struct {
	MedoidRow int   `json:"medoid_row"`
	Size      int   `json:"size"`
	Dims      []int `json:"dims"`
}

func runProclus(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	def := proclus.Default()
	fs := newFlagSet("proclus", stdout, stderr)
	input := fs.String("input", "", "CSV file with a header row and numeric columns (required)")
	label := fs.String("label-column", "", "column holding ground-truth labels (non-zero = outlier); not a feature; a figure the labels leave undefined is null in --json")
	k := fs.Int("k", def.K, "clusters (medoids), 1 <= k <= rows (left out, at most rows)")
	l := fs.Int("l", def.L, "average dimensions per cluster (k*l in all, at least 2 per cluster), 1 <= l <= dims (left out, at most dims)")
	a := fs.Int("a", def.A, "candidates come from a random sample of a*k rows")
	b := fs.Int("b", def.B, "b*k candidate medoids picked farthest-first from the sample, 1 <= b <= a")
	minDev := fs.Float64("min-dev", def.MinDev, "a medoid is bad when its cluster has fewer than rows/k*min-dev rows")
	itrPat := fs.Int("itr-pat", def.ItrPat, "stop after this many rounds without a lower cost")
	seed := fs.Uint64("seed", def.Seed, "seed of the sample, the first medoids and the replacements; restart r > 0 uses SplitMix64's r-th output from it")
	restarts := fs.Int("restarts", def.Restarts, "runs from derived seeds; the one of lowest cost (every row in its nearest cluster) is kept")
	device := fs.String("device", "auto", "auto | cpu | cuda (same result on each)")
	assignOut := fs.String("assignments-out", "", "write row,cluster for every input row to this CSV file (-1 = PROCLUS outlier)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *input == "" {
		return usageError{fmt.Errorf("--input is required")}
	}
	if err := checkOutput(*input, *assignOut, "--assignments-out"); err != nil {
		return err
	}
	log := newLogger(stderr)
	dev, tab, err := openInput(*device, *input, *label, log, opt, "--")
	if err != nil {
		return err
	}
	defer dev.Close()
	set := flagsSet(fs)
	followDown(stderr, "proclus", set, "k", k, tab.Rows(), "the file has "+plural(tab.Rows(), "row", "rows"))
	followDown(stderr, "proclus", set, "l", l, len(tab.Cols), "the file has "+plural(len(tab.Cols), "feature column", "feature columns"))
	p := proclus.Params{K: *k, L: *l, A: *a, B: *b, MinDev: *minDev, ItrPat: *itrPat, Seed: *seed, Restarts: *restarts}
	if err := p.Validate(tab.Rows(), len(tab.Cols)); err != nil {
		return usageError{fmt.Errorf("%s: %s", *input, strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	start := time.Now()
	res, err := dev.Proclus(tab.Cols, p)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	out := proclusOutput{
		Device: dev.Name(), Rows: tab.Rows(), K: p.K, L: p.L, Cost: res.Cost, Iterations: res.Iterations,
		Restarts: p.Restarts, Restart: res.Restart, Seed: res.Seed, FullCost: res.FullCost, RestartCosts: res.RestartCosts,
		ElapsedMS: ms(elapsed), Outliers: res.Outliers, Features: tab.Features,
	}
	for i, m := range res.Medoids {
		out.Clusters = append(out.Clusters, proclusCluster{MedoidRow: m, Size: res.Sizes[i], Dims: res.Dims[i]})
	}
	if tab.Label != nil {
		truth := tab.Outliers()
		tp, pos := 0, 0
		for i, t := range truth {
			if t {
				pos++
				if res.Assignment[i] < 0 {
					tp++
				}
			}
		}
		out.Precision, out.Recall = fig(math.NaN()), fig(math.NaN()) // null: not defined
		if res.Outliers > 0 {
			out.Precision = fig(float64(tp) / float64(res.Outliers))
		}
		if pos > 0 {
			out.Recall = fig(float64(tp) / float64(pos))
		}
	}
	if *assignOut != "" {
		if err := writeAssignments(*assignOut, res.Assignment); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "PROCLUS on %s: %s x %s, k=%d l=%d: cost %.6g, %s, %s, %.1f ms\n",
		out.Device, plural(out.Rows, "row", "rows"), plural(len(tab.Features), "dim", "dims"), p.K, p.L, out.Cost,
		plural(out.Iterations, "iteration", "iterations"), plural(out.Outliers, "outlier", "outliers"), out.ElapsedMS)
	if p.Restarts > 1 {
		lo, hi := slices.Min(out.RestartCosts), slices.Max(out.RestartCosts)
		fmt.Fprintf(stdout, "kept restart %d of 0-%d (seed %d): cost with every row clustered %.6g (all restarts %.6g-%.6g)\n",
			out.Restart, p.Restarts-1, out.Seed, out.FullCost, lo, hi)
	}
	for i, c := range out.Clusters {
		names := make([]string, len(c.Dims))
		for t, j := range c.Dims {
			names[t] = tab.Features[j]
		}
		fmt.Fprintf(stdout, "  cluster %d: medoid row %d, %s, subspace {%s}\n", i, c.MedoidRow, plural(c.Size, "row", "rows"), strings.Join(names, ", "))
	}
	if out.Precision != nil || out.Recall != nil {
		fmt.Fprintf(stdout, "labels %q: outlier precision %s, recall %s\n", *label, fmtOpt(out.Precision), fmtOpt(out.Recall))
	}
	return nil
}

// writeAssignments writes the --assignments-out CSV: row,cluster for every input row in order,
// -1 for a PROCLUS outlier.
func writeAssignments(path string, assign []int32) error {
	return writeRowCSV(path, "--assignments-out", "row,cluster", len(assign), func(line []byte, i int) []byte {
		return strconv.AppendInt(line, int64(assign[i]), 10)
	})
}
