package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/csvfile"
)

// predictOutput is the JSON contract of `outlierd predict --json`.
type predictOutput struct {
	Rows    int             `json:"rows"`
	WStar   float64         `json:"w_star"`
	Flagged int             `json:"flagged"`
	Results []predictResult `json:"results"`
	Device  string          `json:"device"`
	// Precision, recall and ROC AUC with --label-column; F1 stays nil, as predict never had it.
	labelQuality
}

type predictResult struct {
	Row     int     `json:"row"`
	Weight  float64 `json:"weight"`
	Outlier bool    `json:"outlier"`
}

func runPredict(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("predict", stdout, stderr)
	modelPath := fs.String("model", "", "model file written by outlierd topn --model-out (required)")
	input := fs.String("input", "", "CSV file with the model's feature columns (required)")
	label := fs.String("label-column", "", "column holding ground-truth labels (non-zero = outlier); not a feature; a figure the labels leave undefined is null in --json")
	device := fs.String("device", "auto", "auto | cpu | cuda")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *modelPath == "" || *input == "" {
		return usageError{fmt.Errorf("--model and --input are required")}
	}
	log := newLogger(stderr)
	dev, err := openDevice(*device, log, opt, "--")
	if err != nil {
		return err
	}
	defer dev.Close()
	model, err := solvingset.LoadFile(*modelPath)
	if err != nil {
		return fmt.Errorf("--model %w", err) // (the error begins with the file's path)
	}
	tab, err := csvfile.ReadFile(*input, *label)
	if err != nil {
		return err
	}
	warnLabelFeatures(log, tab)
	if err := sameFeatures(model.Features, tab.Features, *modelPath, *input); err != nil {
		return err
	}
	weights := make([]float64, tab.Rows())
	if err := dev.Predict(model, tab.Cols, weights); err != nil {
		return err
	}
	out := predictOutput{Rows: tab.Rows(), WStar: model.WStar, Device: dev.Name(), Results: make([]predictResult, tab.Rows())}
	flags := make([]bool, tab.Rows())
	for i, w := range weights {
		flags[i] = model.IsOutlier(w)
		out.Results[i] = predictResult{Row: i, Weight: w, Outlier: flags[i]}
		if flags[i] {
			out.Flagged++
		}
	}
	if tab.Label != nil {
		labels := tab.Outliers()
		c := quality.Count(flags, labels)
		out.setCounts(c)
		out.F1 = nil // (predict's JSON has never had it)
		out.ROCAUC = fig(quality.ROCAUC(weights, labels))
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "%d rows scored against |S| = %d (k=%d, w* = %.6g) on %s: %d flagged\n\n", out.Rows, len(model.Points[0]), model.K, model.WStar, dev.Name(), out.Flagged)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tweight\t")
	for _, r := range out.Results {
		if r.Outlier {
			fmt.Fprintf(tw, "%d\t%.6g\t\n", r.Row, r.Weight)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.Precision != nil {
		fmt.Fprintf(stdout, "\nprecision = %s   recall = %s   ROC AUC = %s\n", fmtOpt(out.Precision), fmtOpt(out.Recall), fmtOpt(out.ROCAUC))
	}
	return nil
}

// sameFeatures refuses an input whose feature columns differ from the model's.
func sameFeatures(model, input []string, modelPath, inputPath string) error {
	if strings.Join(model, "\x00") == strings.Join(input, "\x00") {
		return nil
	}
	return fmt.Errorf("%s: features %s differ from the model's (%s: %s); the input needs exactly the model's feature columns, in order (name the label with --label-column)",
		inputPath, strings.Join(input, ","), modelPath, strings.Join(model, ","))
}
