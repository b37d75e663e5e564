package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// topnOutput is the JSON contract of `outlierd topn --json` (other tools parse it).
type topnOutput struct {
	Algorithm            string           `json:"algorithm"`
	Device               string           `json:"device"`
	Rows                 int              `json:"rows"`
	Dims                 int              `json:"dims"`
	K                    int              `json:"k"`
	N                    int              `json:"n"`
	M                    int              `json:"m"`
	WStar                float64          `json:"w_star"`
	Outliers             []outlierJSON    `json:"outliers"`
	SolvingSetSize       int              `json:"solving_set_size"`
	Iterations           int              `json:"iterations"`
	DistanceComputations int64            `json:"distance_computations"`   // -1: not counted (GPU)
	ElapsedMS            float64          `json:"elapsed_ms"`              // the search and, with labels, the exact-weight pass
	SearchMS             float64          `json:"search_ms"`               // SolvingSet or BruteForce alone
	LabelPassMS          float64          `json:"label_pass_ms,omitempty"` // every row's exact weight, for ROC AUC
	PrecisionAtN         *figure          `json:"precision_at_n,omitempty"`
	labelQuality                          // roc_auc alone: the top n's precision is precision_at_n
	Features             []string         `json:"features"`
	Labelled             *labelledSummary `json:"labels,omitempty"`
}

type outlierJSON struct {
	Row    int     `json:"row"`
	Weight float64 `json:"weight"`
}

type labelledSummary struct {
	Column   string `json:"column"`
	Outliers int    `json:"outliers"`
}

func runTopN(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("topn", stdout, stderr)
	input := fs.String("input", "", "CSV file with a header row and numeric columns (required)")
	label := fs.String("label-column", "", "column holding ground-truth labels (non-zero = outlier); not a feature; a figure the labels leave undefined is null in --json")
	k := fs.Int("k", 50, "neighbours: a point's weight is the sum of the distances to its k nearest neighbours (left out, at most rows-1)")
	n := fs.Int("n", 10, "outliers wanted: the top-n weights (ties with the n-th included; left out, at most rows)")
	m := fs.Int("m", 100, "SolvingSet candidates per iteration")
	algo := fs.String("algorithm", "solvingset", "solvingset | bruteforce (the nested-loop oracle)")
	device := fs.String("device", "auto", "auto | cpu | cuda")
	seed := fs.Uint64("seed", 1, "seed of SolvingSet's first candidates")
	modelOut := fs.String("model-out", "", "write the prediction model (solving set, k, w*) to this file")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *input == "" {
		return usageError{fmt.Errorf("--input is required")}
	}
	if err := checkOutput(*input, *modelOut, "--model-out"); err != nil {
		return err
	}
	if err := oneOf("algorithm", *algo, "solvingset", "bruteforce"); err != nil {
		return err
	}
	log := newLogger(stderr)
	dev, tab, err := openInput(*device, *input, *label, log, opt, "--")
	if err != nil {
		return err
	}
	defer dev.Close()
	set, rows := flagsSet(fs), tab.Rows()
	followDown(stderr, "topn", set, "k", k, rows-1, "the file has "+plural(rows, "row", "rows")+" (a row is not its own neighbour)")
	followDown(stderr, "topn", set, "n", n, rows, "the file has "+plural(rows, "row", "rows"))
	p := solvingset.Params{K: *k, N: *n, M: *m, Seed: *seed}
	if err := p.Validate(rows); err != nil { // (every problem, on one line)
		return usageError{fmt.Errorf("%s: %s", *input, strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	if *algo == "bruteforce" && *modelOut != "" {
		return usageError{fmt.Errorf("--model-out needs --algorithm solvingset (the model is the solving set)")}
	}

	start := time.Now()
	var res solvingset.Result
	if *algo == "bruteforce" {
		res, err = dev.BruteForce(tab.Cols, p)
	} else {
		bar := newProgress(stderr, "SolvingSet")
		res, err = dev.SolvingSetProgress(tab.Cols, p, bar.update)
		bar.finish()
	}
	if err != nil {
		return err
	}
	search := time.Since(start)

	out := topnOutput{
		Algorithm: *algo, Device: dev.Name(), Rows: tab.Rows(), Dims: len(tab.Cols),
		K: *k, N: *n, M: *m, WStar: res.WStar,
		SolvingSetSize: len(res.SolvingSet), Iterations: res.Iterations,
		DistanceComputations: res.DistanceComputations,
		SearchMS:             ms(search),
		Features:             tab.Features,
	}
	if *algo == "bruteforce" {
		out.M = 0
	}
	flagged := make([]int, len(res.Outliers))
	for i, o := range res.Outliers {
		out.Outliers = append(out.Outliers, outlierJSON{Row: o.Row, Weight: o.Weight})
		flagged[i] = o.Row
	}
	if tab.Label != nil {
		labels := tab.Outliers()
		pn := quality.PrecisionAtN(flagged, labels)
		// ROC AUC ranks every row, so every row's exact weight is computed (O(N^2) distances;
		// on the GPU when there is one): often the longer part of the command, so the bar
		// stays up and the time counts.
		passStart := time.Now()
		stop := newProgress(stderr, "").spin(fmt.Sprintf("ROC AUC: exact weights of all %d rows", tab.Rows()))
		all, err := dev.Weights(tab.Cols, *k)
		stop()
		if err != nil {
			return err
		}
		out.LabelPassMS = ms(time.Since(passStart))
		auc := quality.ROCAUC(all, labels)
		out.PrecisionAtN, out.ROCAUC = fig(pn), fig(auc)
		cnt := 0
		for _, l := range labels {
			if l {
				cnt++
			}
		}
		out.Labelled = &labelledSummary{Column: *label, Outliers: cnt}
	}
	out.ElapsedMS = ms(time.Since(start))
	if *modelOut != "" {
		model := solvingset.NewModel(tab.Cols, tab.Features, res, *k)
		if err := model.SaveFile(*modelOut); err != nil {
			return fmt.Errorf("writing the model: %w", err)
		}
		log.Info().Str("file", *modelOut).Int("solving_set", len(res.SolvingSet)).Msg("model written")
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(out)
	}
	return printTopN(stdout, out)
}

func printTopN(w io.Writer, o topnOutput) error {
	name := map[string]string{"solvingset": "SolvingSet", "bruteforce": "BruteForce"}[o.Algorithm]
	fmt.Fprintf(w, "%s on %s: %s x %s, k=%d n=%d", name, o.Device, plural(o.Rows, "row", "rows"), plural(o.Dims, "dim", "dims"), o.K, o.N)
	if o.Algorithm == "solvingset" {
		fmt.Fprintf(w, " m=%d", o.M)
	}
	pairs := float64(o.Rows) * float64(o.Rows-1) / 2
	dist := "not counted on the GPU"
	if o.DistanceComputations >= 0 {
		dist = fmt.Sprintf("%d (%.3g%% of N(N-1)/2)", o.DistanceComputations, 100*float64(o.DistanceComputations)/pairs)
	}
	took := fmt.Sprintf("%.1f ms", o.ElapsedMS)
	if o.LabelPassMS > 0 {
		took = fmt.Sprintf("%.1f ms (search %.1f ms, exact weights for ROC AUC %.1f ms)", o.ElapsedMS, o.SearchMS, o.LabelPassMS)
	}
	fmt.Fprintf(w, "\nw* = %.6g   |S| = %d   iterations = %d   distances = %s   %s\n\n",
		o.WStar, o.SolvingSetSize, o.Iterations, dist, took)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\trow\tweight\t")
	for i, x := range o.Outliers {
		fmt.Fprintf(tw, "%d\t%d\t%.6g\t\n", i+1, x.Row, x.Weight)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.Labelled != nil {
		fmt.Fprintf(w, "\nlabels %q (%s): precision@n = %s   ROC AUC = %s\n", o.Labelled.Column, plural(o.Labelled.Outliers, "outlier", "outliers"), fmtOpt(o.PrecisionAtN), fmtOpt(o.ROCAUC))
	}
	return nil
}
