package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/algo/quality"
)

// hypercubeOutput is the JSON contract of `outlierd hypercube --json`.
type hypercubeOutput struct {
	Device           string  `json:"device"`
	Rows             int     `json:"rows"`
	Dims             int     `json:"dims"`
	Bins             int     `json:"bins"`
	Cells            int     `json:"cells"`
	WMax             int64   `json:"w_max"`
	ElapsedMS        float64 `json:"elapsed_ms"`
	labelQuality             // roc_auc alone: the hypercube flags nothing, so no precision or recall
	AveragePrecision *figure `json:"average_precision,omitempty"`
}

func runHypercube(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("hypercube", stdout, stderr)
	input := fs.String("input", "", "CSV file with a header row and numeric columns (required)")
	label := fs.String("label-column", "", "column holding ground-truth labels (non-zero = outlier); not a feature; a figure the labels leave undefined is null in --json")
	bins := fs.Int("bins", hypercube.DefaultBins, "b: bins per dimension of the grid over each dimension's [min, max] (2..65536)")
	device := fs.String("device", "auto", "auto | cpu | cuda")
	scoresOut := fs.String("scores-out", "", "write row,score (score = 1 - w/w_max, higher = more outlying) for every input row to this CSV file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *input == "" {
		return usageError{fmt.Errorf("--input is required")}
	}
	if err := checkOutput(*input, *scoresOut, "--scores-out"); err != nil {
		return err
	}
	if *bins < 2 || *bins > hypercube.MaxBins {
		return usageError{fmt.Errorf("--bins must be in [2, %d], got %d", hypercube.MaxBins, *bins)}
	}
	log := newLogger(stderr)
	dev, tab, err := openInput(*device, *input, *label, log, opt, "--")
	if err != nil {
		return err
	}
	defer dev.Close()
	if len(tab.Cols) > hypercube.MaxDims {
		return fmt.Errorf("%s: %d feature columns, the hypercube score supports at most %d dimensions", *input, len(tab.Cols), hypercube.MaxDims)
	}
	start := time.Now()
	res, err := dev.Hypercube(tab.Cols, *bins)
	if err != nil {
		return fmt.Errorf("%s: %w", *input, err)
	}
	elapsed := time.Since(start)
	out := hypercubeOutput{Device: dev.Name(), Rows: tab.Rows(), Dims: len(tab.Cols), Bins: *bins,
		Cells: res.Cells.Len(), WMax: res.WMax, ElapsedMS: ms(elapsed)}
	if tab.Label != nil {
		labels := tab.Outliers()
		out.ROCAUC = fig(quality.ROCAUC(res.Scores, labels))
		out.AveragePrecision = fig(quality.AveragePrecision(res.Scores, labels))
	}
	if *scoresOut != "" {
		if err := writeHypercubeScores(*scoresOut, res.Scores); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "hypercube density (b=%d) on %s: %s x %s, %s, w_max %d, %.1f ms\n",
		out.Bins, out.Device, plural(out.Rows, "row", "rows"), plural(out.Dims, "dim", "dims"), plural(out.Cells, "occupied cell", "occupied cells"), out.WMax, out.ElapsedMS)
	if tab.Label != nil {
		fmt.Fprintf(stdout, "labels %q: ROC AUC %s   average precision %s\n", *label, fmtOpt(out.ROCAUC), fmtOpt(out.AveragePrecision))
	}
	return nil
}

// writeHypercubeScores writes the --scores-out CSV: row,score, one line per input row in order.
func writeHypercubeScores(path string, scores []float64) error {
	return writeRowCSV(path, "--scores-out", "row,score", len(scores), func(line []byte, i int) []byte {
		return strconv.AppendFloat(line, scores[i], 'g', -1, 64)
	})
}
