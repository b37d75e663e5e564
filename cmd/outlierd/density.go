package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/quality"
)

// densityOutput is the JSON contract of `outlierd density --json`.
type densityOutput struct {
	Mode        string         `json:"mode"`
	Granularity string         `json:"granularity"`
	Method      string         `json:"method"`
	Device      string         `json:"device"`
	Rows        int            `json:"rows"`
	Dims        int            `json:"dims"`
	Clusters    int            `json:"clusters"`
	Flagged     int            `json:"flagged"`
	ElapsedMS   float64        `json:"elapsed_ms"`
	Timings     densityTimings `json:"timings"`
	Uncertainty string         `json:"uncertainty"`
	labelQuality
}

type densityTimings struct {
	MicroclusterMS float64 `json:"microcluster_ms"`
	DetectMS       float64 `json:"detect_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runDensity(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("density", stdout, stderr)
	input := fs.String("input", "", "CSV file with a header row and numeric columns (required)")
	label := fs.String("label-column", "", "column holding ground-truth labels (non-zero = outlier); not a feature; a figure the labels leave undefined is null in --json")
	suffix := fs.String("uncertainty-suffix", "_sd", "a column <feature><suffix> holds the feature's uncertainty (a standard deviation)")
	mult := fs.Float64("uncertainty-multiplier", 2.0, "without uncertainty columns: derive psi = std_j * U(0,1) * multiplier")
	mode := fs.String("mode", "independent", "independent | rollup | restricted | averaging")
	eta := fs.Float64("eta", 0.5, "density threshold (data normalised to [0,1])")
	delta := fs.Float64("delta", 0.5, "outlier when the eta-probability is below delta in some subspace")
	samples := fs.Int("samples", 800, "Monte Carlo samples per subspace")
	clusters := fs.Int("clusters", 200, "q micro-clusters (left out, at most rows)")
	iters := fs.Int("iterations", 4, "micro-clustering passes")
	gran := fs.String("granularity", "cluster", "cluster (the paper: micro-clusters are tested, members inherit) | record (each record with its own uncertainty)")
	method := fs.String("method", "auto", "auto (exact 1-D integration where the mode allows it, else sampling) | sampling (the paper's Monte Carlo)")
	device := fs.String("device", "auto", "auto | cpu | cuda")
	seed := fs.Uint64("seed", 1, "seed of clustering, derived uncertainty and sampling")
	scoresOut := fs.String("scores-out", "", "write row,flag,eta_probability,subspace for every input row to this CSV file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := flagsSet(fs)
	if *input == "" {
		return usageError{fmt.Errorf("--input is required")}
	}
	if err := checkOutput(*input, *scoresOut, "--scores-out"); err != nil {
		return err
	}
	if set["uncertainty-suffix"] && set["uncertainty-multiplier"] {
		return usageError{fmt.Errorf("give --uncertainty-suffix or --uncertainty-multiplier, not both")}
	}
	m, err := density.ParseMode(*mode)
	if err != nil {
		return usageError{err}
	}
	if err := oneOf("granularity", *gran, "cluster", "record"); err != nil {
		return err
	}
	if err := oneOf("method", *method, "auto", "sampling"); err != nil {
		return err
	}
	var errs []string
	if !(*eta > 0 && *eta <= 1) {
		errs = append(errs, fmt.Sprintf("--eta must be in (0, 1], got %g", *eta))
	}
	if !(*delta > 0 && *delta <= 1) {
		errs = append(errs, fmt.Sprintf("--delta must be in (0, 1], got %g", *delta))
	}
	if *samples < 1 || *samples > density.MaxSamples {
		errs = append(errs, fmt.Sprintf("--samples must be in [1, %d], got %d", density.MaxSamples, *samples))
	}
	if *iters < 1 || *iters > microcluster.MaxIterations {
		errs = append(errs, fmt.Sprintf("--iterations must be in [1, %d], got %d", microcluster.MaxIterations, *iters))
	}
	if !(*mult >= 0) || math.IsInf(*mult, 0) {
		errs = append(errs, fmt.Sprintf("--uncertainty-multiplier must be >= 0, got %g", *mult))
	}
	if len(errs) > 0 {
		return usageError{fmt.Errorf("%s", strings.Join(errs, "; "))}
	}
	log := newLogger(stderr)
	dev, tab, err := openInput(*device, *input, *label, log, opt, "--")
	if err != nil {
		return err
	}
	defer dev.Close()
	features, means, sds, err := tab.SplitUncertainty(*suffix)
	if err != nil {
		return err
	}
	rows := tab.Rows()
	followDown(stderr, "density", set, "clusters", clusters, rows, "the file has "+plural(rows, "row", "rows"))
	if *clusters < 1 || *clusters > rows {
		return usageError{fmt.Errorf("--clusters must be in [1, rows=%d], got %d", rows, *clusters)}
	}
	if m == density.Rollup && len(features) > density.MaxRollupDims {
		return usageError{fmt.Errorf("--mode rollup tests all 2^r-1 subspaces: refused for r=%d > %d (2^%d-1 = %.3g subspaces per object); use independent, restricted or averaging",
			len(features), density.MaxRollupDims, len(features), math.Ldexp(1, len(features))-1)}
	}
	start := time.Now()
	scaling, err := density.FitScaling(means)
	if err != nil {
		return err
	}
	nm, ns, err := scaling.Apply(means, fillMissingSD(sds, rows))
	if err != nil {
		return err
	}
	uncertainty := "columns " + "<feature>" + *suffix
	if sds == nil || set["uncertainty-multiplier"] {
		// The paper's rule for data without uncertainty, on the normalised values.
		if ns, err = density.DeriveUncertainty(nm, *mult, *seed); err != nil {
			return err
		}
		uncertainty = "derived: std * U(0,1) * " + strconv.FormatFloat(*mult, 'g', -1, 64)
	}
	mc, assign, err := dev.Cluster(nm, ns, *clusters, *iters, *seed)
	if err != nil {
		return err
	}
	h, err := density.Bandwidths(mc)
	if err != nil {
		return err
	}
	model, err := density.NewModel(mc, h)
	if err != nil {
		return err
	}
	tMC := time.Since(start)
	p := density.Params{Eta: *eta, Delta: *delta, Samples: *samples, Mode: m, Seed: *seed, Exact: *method == "auto"}
	if err := p.Validate(); err != nil {
		return usageError{err}
	}
	verdicts := make([]density.Verdict, rows)
	if *gran == "cluster" {
		cv, err := dev.DetectClusters(model, mc, p)
		if err != nil {
			return err
		}
		for i, c := range assign {
			verdicts[i] = cv[c]
		}
	} else {
		if err := dev.DetectRecords(model, mc, nm, ns, p, verdicts); err != nil {
			return err
		}
	}
	tAll := time.Since(start)
	out := densityOutput{Mode: *mode, Granularity: *gran, Method: *method, Device: dev.Name(), Rows: rows, Dims: len(features),
		Clusters: mc.Q(), ElapsedMS: ms(tAll), Timings: densityTimings{MicroclusterMS: ms(tMC), DetectMS: ms(tAll - tMC)}, Uncertainty: uncertainty}
	flags := make([]bool, rows)
	scores := make([]float64, rows)
	for i, v := range verdicts {
		flags[i] = v.Outlier
		scores[i] = 1 - v.EtaProbability
		if v.Outlier {
			out.Flagged++
		}
	}
	if tab.Label != nil {
		out.setCounts(quality.Count(flags, tab.Outliers()))
		out.ROCAUC = fig(quality.ROCAUC(scores, tab.Outliers()))
	}
	if *scoresOut != "" {
		if err := writeScores(*scoresOut, verdicts, features); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "density sampling (%s, %s granularity, %s) on %s: %s x %s, q=%d, uncertainty %s\n",
		out.Mode, out.Granularity, out.Method, out.Device, plural(rows, "row", "rows"), plural(len(features), "dim", "dims"), out.Clusters, uncertainty)
	fmt.Fprintf(stdout, "flagged %d (%.2f%%)   micro-clustering %.1f ms   detection %.1f ms\n", out.Flagged, 100*float64(out.Flagged)/float64(rows), out.Timings.MicroclusterMS, out.Timings.DetectMS)
	if out.Precision != nil {
		fmt.Fprintf(stdout, "precision %s   recall %s   F1 %s   ROC AUC %s\n", fmtOpt(out.Precision), fmtOpt(out.Recall), fmtOpt(out.F1), fmtOpt(out.ROCAUC))
	}
	return nil
}

// fillMissingSD gives features without an uncertainty column an uncertainty of 0.
func fillMissingSD(sds [][]float32, rows int) [][]float32 {
	if sds == nil {
		return nil
	}
	out := make([][]float32, len(sds))
	for j, s := range sds {
		if s == nil {
			s = make([]float32, rows)
		}
		out[j] = s
	}
	return out
}

// writeScores writes the --scores-out CSV: row,flag,eta_probability,subspace (feature names joined by +).
func writeScores(path string, verdicts []density.Verdict, features []string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--scores-out: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "row,flag,eta_probability,subspace")
	var line []byte
	for i, v := range verdicts {
		line = strconv.AppendInt(line[:0], int64(i), 10)
		if v.Outlier {
			line = append(line, ",1,"...)
		} else {
			line = append(line, ",0,"...)
		}
		line = strconv.AppendFloat(line, v.EtaProbability, 'g', -1, 64)
		line = append(line, ',')
		for t, j := range v.Subspace {
			if t > 0 {
				line = append(line, '+')
			}
			line = append(line, features[j]...)
		}
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("--scores-out: %w", err)
	}
	return f.Close()
}
