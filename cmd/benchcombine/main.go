// Command combine measures the detect stage's combine rules (any, all, density, distance) and
// its thresholds (eta = delta, n) the way the pipeline applies them: every labelled set is
// shuffled with a fixed seed (so the outliers are spread over the stream), cut into batches
// of Arrow records and fed through detect.Stage; the verdicts the stage emits are compared
// with the labels. The demo's sensor stream (synth.NewSensorStream) is measured the same way.
// It prints Markdown tables for docs/BENCHMARKS.md.
//
//	go run ./docs/bench/combine > /tmp/combine.md
//	go run ./docs/bench/combine -sets shuttle,thyroid -etas 0.5,0.1 -nfrac 0.001,0.01
//
// Determinism: after every batch the program waits for a model build the batch started
// (Stage.Close waits for the running build and installs it), so every batch is scored by the
// same model on every run; in the pipeline the build overlaps the next batches instead.
//
// Cost: the density verdicts depend only on eta/delta and the distance verdicts only on n
// (the model's micro-clusters and solving set are built from the same seeded window either
// way), so each set is run once per eta with the first n and once per further n with the
// first eta, and the rules are combined from those per-record verdicts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/datasets/csvfile"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/stages/detect"
)

// dataset is one labelled stream: raw feature columns, optional uncertainty, labels.
type dataset struct {
	name     string
	features []string
	cols     [][]float32 // column-major, already in stream order
	sds      [][]float32 // nil: certain data
	outlier  []bool
	note     string
}

func (d *dataset) rows() int { return len(d.outlier) }

// windowSpec is how the stage's window is set for a run.
type windowSpec struct {
	name                            string
	window, minRecords, refreshRecs int
}

// verdicts are one run's per-record outputs, in stream order.
type verdicts struct {
	density, distance []bool
	eta               []float64 // lowest eta-probability (for the density ROC AUC)
	weight            []float64 // w_k(q,S) (for the distance ROC AUC)
	elapsed           time.Duration
	models            int
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "combine:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("combine", flag.ContinueOnError)
	dataDir := fs.String("data", "/work/shared/data", "directory of the labelled CSV sets")
	setsFlag := fs.String("sets", "shuttle,satimage-2,thyroid,mammography,pendigits,cardio,wdbc,poker-rare,sensors", "sets (file stems; poker-rare = poker with class >= 5 as outliers; sensors = the demo stream)")
	etasFlag := fs.String("etas", "0.5,0.2,0.1,0.05,0.02,0.01", "eta = delta values")
	nFlag := fs.String("nfrac", "0.001,0.005,0.01,0.02", "n as a fraction of the window")
	uncert := fs.String("uncertainty", "none,derived", "uncertainty of the labelled sets: none (sd 0) and/or derived (std_j * U(0,1) * 2)")
	windows := fs.String("windows", "whole,stream", "whole: W = the set, one model; stream: W = 5000, min_records 2000, refresh 2500 (sets of > 10000 rows)")
	batchSize := fs.Int("batch", 1000, "records per batch")
	sensorRows := fs.Int("sensor-rows", 60000, "records of the demo stream")
	seed := fs.Uint64("seed", 1, "shuffle, stage and stream seed")
	rawOut := fs.String("raw", "", "append one JSON line per (set, window, uncertainty, eta, n, rule) to this file (a figure the labels leave undefined: null)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	etas, err := floats(*etasFlag)
	if err != nil {
		return fmt.Errorf("-etas: %w", err)
	}
	nfracs, err := floats(*nFlag)
	if err != nil {
		return fmt.Errorf("-nfrac: %w", err)
	}
	var raw *json.Encoder
	if *rawOut != "" {
		f, err := os.OpenFile(*rawOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		raw = json.NewEncoder(f)
	}
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "Machine: %s, %d CPUs, GOMAXPROCS %d; load average at start %s; %s\n\n", host, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		strings.Join(strings.Fields(string(load))[:3], " "), time.Now().UTC().Format("2006-01-02T15:04Z"))

	fmt.Fprintln(w, "| set | window | uncertainty | eta=delta | n | rule | precision | recall | F1 | flagged | time (first run) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, name := range strings.Split(*setsFlag, ",") {
		for _, u := range strings.Split(*uncert, ",") {
			if name == "sensors" && u != "none" {
				continue // the stream carries its own uncertainty
			}
			d, err := load1(name, *dataDir, u, *seed, *sensorRows)
			if err != nil {
				return err
			}
			for _, wn := range strings.Split(*windows, ",") {
				ws, ok := windowFor(wn, d)
				if !ok {
					continue
				}
				if err := measure(w, raw, d, u, ws, etas, nfracs, *batchSize, *seed); err != nil {
					return fmt.Errorf("%s/%s/%s: %w", name, u, wn, err)
				}
			}
		}
	}
	return nil
}

// windowFor returns the window of a run, or false when the set is too small for it.
func windowFor(name string, d *dataset) (windowSpec, bool) {
	switch name {
	case "whole":
		if d.name == "sensors" {
			return windowSpec{}, false // a stream has no whole; the demo's window is used instead
		}
		return windowSpec{name: "whole", window: d.rows(), minRecords: d.rows(), refreshRecs: d.rows()}, true
	case "stream":
		if d.name == "sensors" {
			// configs/demo.yaml's window.
			return windowSpec{name: "stream W=20000", window: 20000, minRecords: 5000, refreshRecs: 10000}, true
		}
		if d.rows() <= 10000 {
			return windowSpec{}, false
		}
		return windowSpec{name: "stream W=5000", window: 5000, minRecords: 2000, refreshRecs: 2500}, true
	}
	return windowSpec{}, false
}

// measure runs one set under one window for every eta and n and prints the rules' quality.
func measure(w io.Writer, raw *json.Encoder, d *dataset, u string, ws windowSpec, etas, nfracs []float64, batchSize int, seed uint64) error {
	ns := make([]int, len(nfracs))
	for i, f := range nfracs {
		ns[i] = max(1, int(math.Round(f*float64(ws.window))))
	}
	byEta := make([]*verdicts, len(etas))
	byN := make([]*verdicts, len(ns))
	for i, eta := range etas {
		v, err := runStage(d, ws, eta, ns[0], batchSize, seed)
		if err != nil {
			return err
		}
		byEta[i] = v
		if i == 0 {
			byN[0] = v
		}
	}
	for i := 1; i < len(ns); i++ {
		v, err := runStage(d, ws, etas[0], ns[i], batchSize, seed)
		if err != nil {
			return err
		}
		byN[i] = v
	}
	rules := []detect.Combine{detect.CombineAny, detect.CombineAll, detect.CombineDensity, detect.CombineDistance}
	flag := make([]bool, d.rows())
	for i, eta := range etas {
		for t, n := range ns {
			for _, rule := range rules {
				// density alone does not depend on n, distance alone not on eta: one row each.
				if (rule == detect.CombineDensity && t > 0) || (rule == detect.CombineDistance && i > 0) {
					continue
				}
				flagged := 0
				for r := range flag {
					flag[r] = combine(rule, byEta[i].density[r], byN[t].distance[r])
					if flag[r] {
						flagged++
					}
				}
				c := quality.Count(flag, d.outlier)
				etaS, nS := strconv.FormatFloat(eta, 'g', -1, 64), strconv.Itoa(n)
				if rule == detect.CombineDistance {
					etaS = "—"
				}
				if rule == detect.CombineDensity {
					nS = "—"
				}
				p, r, f1 := figures(c)
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", d.name, ws.name, u, etaS, nS, rule,
					cell(p), cell(r), cell(f1), flagged, byEta[0].elapsed.Round(time.Millisecond))
				if raw != nil {
					if err := raw.Encode(map[string]any{"set": d.name, "rows": d.rows(), "window": ws.name, "W": ws.window, "uncertainty": u,
						"eta": eta, "delta": eta, "n": n, "nfrac": nfracs[t], "rule": rule, "tp": c.TP, "fp": c.FP, "fn": c.FN, "tn": c.TN,
						"precision": nanNil(p), "recall": nanNil(r), "f1": nanNil(f1), "flagged": flagged,
						"density_auc":  nanNil(quality.ROCAUC(negate(byEta[i].eta), d.outlier)),
						"distance_auc": nanNil(quality.ROCAUC(byN[t].weight, d.outlier)), "models": byEta[i].models,
						"elapsed_ms": byEta[i].elapsed.Milliseconds()}); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func combine(rule detect.Combine, dens, dist bool) bool {
	switch rule {
	case detect.CombineAll:
		return dens && dist
	case detect.CombineDensity:
		return dens
	case detect.CombineDistance:
		return dist
	}
	return dens || dist
}

func negate(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = -v
	}
	return out
}

// figures are the precision, recall and F1 of the flags' confusion c, NaN where c leaves them
// undefined, as every outlierd command's --json has them (null there; cmd/outlierd
// labelquality.go): recall with no row labelled an outlier, precision with no row flagged, F1
// (2TP/(2TP+FP+FN)) with neither. They read 0 here, which an average over sets took for a miss.
func figures(c quality.Confusion) (precision, recall, f1 float64) {
	precision, recall, f1 = math.NaN(), math.NaN(), math.NaN()
	if c.TP+c.FP > 0 {
		precision = c.Precision()
	}
	if c.TP+c.FN > 0 {
		recall = c.Recall()
	}
	if c.TP+c.FP+c.FN > 0 {
		f1 = c.F1() // (0 when one side is empty: TP is 0 then)
	}
	return precision, recall, f1
}

// cell is a figure in the Markdown table at 3 decimals, "n/a" where it is not defined.
func cell(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// nanNil is v for a raw line: null where it is not defined (NaN or ±Inf: JSON has no number
// for them; json.Encoder fails on them).
func nanNil(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// runStage feeds d through a detect.Stage in batches and returns its per-record verdicts.
func runStage(d *dataset, ws windowSpec, eta float64, n, batchSize int, seed uint64) (*verdicts, error) {
	cfg := detect.Default()
	cfg.Window, cfg.MinRecords, cfg.RefreshRecords = ws.window, ws.minRecords, ws.refreshRecs
	cfg.RefreshInterval = time.Hour // rebuilds by record count only: reproducible
	cfg.Density.Eta, cfg.Density.Delta = eta, eta
	cfg.Density.Clusters = min(cfg.Density.Clusters, cfg.MinRecords)
	cfg.Distance.N = min(n, cfg.MinRecords)
	cfg.Distance.K = min(cfg.Distance.K, cfg.MinRecords-1)
	cfg.Seed = seed
	if d.name == "sensors" {
		cfg.Distance.K = 20 // configs/demo.yaml
	}
	rows := d.rows()
	v := &verdicts{density: make([]bool, rows), distance: make([]bool, rows), eta: make([]float64, rows), weight: make([]float64, rows)}
	countModels := func(_ *detect.Model, fresh bool) {
		if fresh {
			v.models++
		}
	}
	st, err := detect.NewStage(cfg, d.features, d.sds != nil, detect.Deps{Log: zerolog.Nop(), OnModel: countModels})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	mem := memory.NewGoAllocator()
	start := time.Now()
	emitted := 0
	take := func(out []*batch.Batch) error {
		for _, b := range out {
			for i, s := range b.Scores {
				if !s.Scored {
					return fmt.Errorf("record %d left unscored", emitted+i)
				}
				r := emitted + i
				v.density[r], v.distance[r], v.eta[r], v.weight[r] = s.DensityOutlier, s.DistanceOutlier, s.EtaProbability, s.Weight
			}
			emitted += b.Len()
			b.Release()
		}
		return nil
	}
	for lo := 0; lo < rows; lo += batchSize {
		hi := min(lo+batchSize, rows)
		b, err := makeBatch(mem, d, lo, hi)
		if err != nil {
			return nil, err
		}
		out, err := st.Process(context.Background(), b)
		if err != nil {
			return nil, err
		}
		if err := take(out); err != nil {
			return nil, err
		}
		st.Close() // install a build this batch started before the next batch (see the package doc)
	}
	out, err := st.Flush()
	if err != nil {
		return nil, err
	}
	if err := take(out); err != nil {
		return nil, err
	}
	if emitted != rows {
		return nil, fmt.Errorf("%d of %d records came out", emitted, rows)
	}
	v.elapsed = time.Since(start)
	return v, nil
}

// makeBatch builds the batch the ingest stage would (batch.Schema): the feature and
// uncertainty columns, partition 0 and offset = row (the row's identity), no key, time = row ms.
func makeBatch(mem memory.Allocator, d *dataset, lo, hi int) (*batch.Batch, error) {
	rb := array.NewRecordBuilder(mem, batch.Schema(d.features, d.sds != nil))
	defer rb.Release()
	col := 0
	for j := range d.features {
		rb.Field(col).(*array.Float32Builder).AppendValues(d.cols[j][lo:hi], nil)
		col++
	}
	if d.sds != nil {
		for j := range d.features {
			rb.Field(col).(*array.Float32Builder).AppendValues(d.sds[j][lo:hi], nil)
			col++
		}
	}
	for i := lo; i < hi; i++ {
		rb.Field(col).(*array.Int32Builder).Append(0)
		rb.Field(col + 1).(*array.Int64Builder).Append(int64(i))
		rb.Field(col + 2).(*array.BinaryBuilder).AppendNull()
		rb.Field(col + 3).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
	}
	return batch.New(d.name, d.features, rb.NewRecord(), nil)
}

// load1 loads a set in stream order (shuffled with seed), with the asked uncertainty.
func load1(name, dir, u string, seed uint64, sensorRows int) (*dataset, error) {
	if name == "sensors" {
		return sensors(sensorRows, seed)
	}
	path := filepath.Join(dir, name+".csv")
	labelCol := "label"
	note := ""
	if name == "poker-rare" {
		path, labelCol = filepath.Join(dir, "poker-hand-train.csv"), "class"
		note = "class >= 5 taken as outliers"
	}
	tab, err := csvfile.ReadFile(path, labelCol)
	if err != nil {
		return nil, err
	}
	rows := tab.Rows()
	outlier := make([]bool, rows)
	for i, l := range tab.Label {
		if name == "poker-rare" {
			outlier[i] = l >= 5
		} else {
			outlier[i] = l != 0
		}
	}
	var sds [][]float32
	switch u {
	case "none":
	case "derived":
		// The paper's rule, std_j * U(0,1) * 2, in raw units (the stage scales sds with the data).
		if sds, err = density.DeriveUncertainty(tab.Cols, 2.0, seed); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("-uncertainty: unknown %q (none | derived)", u)
	}
	perm := rand.New(rand.NewPCG(seed, 0x5eed)).Perm(rows)
	d := &dataset{name: name, features: tab.Features, outlier: make([]bool, rows), note: note}
	d.cols = permuteCols(tab.Cols, perm)
	if sds != nil {
		d.sds = permuteCols(sds, perm)
	}
	for i, p := range perm {
		d.outlier[i] = outlier[p]
	}
	return d, nil
}

func permuteCols(cols [][]float32, perm []int) [][]float32 {
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = make([]float32, len(perm))
		for i, p := range perm {
			out[j][i] = c[p]
		}
	}
	return out
}

// sensors decodes rows of the demo's stream (no malformed messages) with their ground truth.
func sensors(rows int, seed uint64) (*dataset, error) {
	s := synth.NewSensorStream(seed, 0.01, 0) // the demo's default anomaly rate
	f := synth.SensorFeatures
	d := &dataset{name: "sensors", features: f, outlier: make([]bool, rows), cols: make([][]float32, len(f)), sds: make([][]float32, len(f))}
	for j := range f {
		d.cols[j], d.sds[j] = make([]float32, rows), make([]float32, rows)
	}
	for i := range rows {
		_, val, anomaly, _ := s.Next()
		var m map[string]any
		if err := json.Unmarshal(val, &m); err != nil {
			return nil, fmt.Errorf("sensor message %d: %w", i, err)
		}
		for j, name := range f {
			x, ok1 := m[name].(float64)
			sd, ok2 := m[name+"_sd"].(float64)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("sensor message %d lacks %s or %s_sd", i, name, name)
			}
			d.cols[j][i], d.sds[j][i] = float32(x), float32(sd)
		}
		d.outlier[i] = anomaly
	}
	return d, nil
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no values")
	}
	return out, nil
}
