package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// replayConfig is the pipeline config file as replay reads it: every section is decoded
// strictly (a typo is still an error with its line), but only detect (and device) must be
// valid, and of ingest the keys that say how a record is read (replayinput.go), so a config
// without ingest or sink works. A distinct type, so that
// pipeline.Config's Validate is not called on the whole.
type replayConfig pipeline.Config

// replayResult is the --json object.
type replayResult struct {
	Input       string  `json:"input"`
	Rows        int     `json:"rows"`
	Features    int     `json:"features"`
	Batches     int     `json:"batches"` // batches fed to the detect stage (--pace)
	Flagged     int     `json:"flagged"`
	Suppressed  int     `json:"suppressed"` // significant, held back by the alarm cap (detect.alarm_rate)
	Unscored    int     `json:"unscored"`
	ModelsBuilt int     `json:"models_built"`
	ElapsedMS   float64 `json:"elapsed_ms"`
	Device      string  `json:"device"`
	labelQuality
	AveragePrecision *figure                    `json:"average_precision,omitempty"`
	Detectors        map[string]detectorQuality `json:"detectors,omitempty"`
	Keys             *replayKeys                `json:"keys,omitempty"`
}

// replayKeys is the models per key's part of the --json object (detect.key_by: key).
type replayKeys struct {
	Count          int    `json:"count"`           // distinct keys in the file
	Live           int    `json:"live"`            // keys with a model of their own at the end
	Warming        int    `json:"warming"`         // keys still scored by the global model at the end
	Evictions      uint64 `json:"evictions"`       // keys evicted (detect.keys.max_keys, max_bytes)
	ScoredByKey    int    `json:"scored_by_key"`   // rows scored by their key's model
	ScoredGlobally int    `json:"scored_globally"` // rows scored by the global model (their key warming)
	// PerKey has each key's rows, flags and rows scored by its own model (left out above
	// maxReplayPerKey keys: the totals above still count them).
	PerKey map[string]replayKey `json:"per_key,omitempty"`
}

type replayKey struct {
	Rows    int `json:"rows"`
	Flagged int `json:"flagged"`
	ByKey   int `json:"by_key"`
}

// maxReplayPerKey bounds the per-key map of the JSON.
const maxReplayPerKey = 10000

// keyCounts is the per-key part of replay's result.
func keyCounts(st *detect.Stage, keys [][]byte, scores []batch.Score) *replayKeys {
	ks := st.KeyStats()
	r := &replayKeys{Live: ks.Live, Warming: ks.Warming, Evictions: ks.Evictions}
	per := map[string]replayKey{}
	for i, s := range scores {
		k := per[string(keys[i])]
		k.Rows++
		if s.Outlier {
			k.Flagged++
		}
		if s.ByKey {
			k.ByKey++
			r.ScoredByKey++
		} else if s.Scored {
			r.ScoredGlobally++
		}
		per[string(keys[i])] = k
	}
	r.Count = len(per)
	if r.Count <= maxReplayPerKey {
		r.PerKey = per
	}
	return r
}

// detectorQuality is one detector's own score measured against the labels.
type detectorQuality struct {
	ROCAUC           *figure `json:"roc_auc"`
	AveragePrecision *figure `json:"average_precision"`
	// Rows the figures are measured over: every row, but for the global model's own tests
	// under detect.key_by the rows it scored (globalOnly).
	Rows int `json:"rows"`
}

func runReplay(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("replay", stdout, stderr)
	input := fs.String("input", "", "file of one record per line (required): CSV with a header line, JSON lines or logfmt; without ingest.features, CSV columns named <feature>_sd are that feature's uncertainty")
	format := fs.String("format", "", "csv|json|logfmt (empty: by the extension .csv, .json/.jsonl/.ndjson, .logfmt/.log; else the config's ingest.format when it names features; else csv)")
	labelCol := fs.String("label-column", "", "field holding the ground truth (a number, non-zero = outlier, or true/false): not a feature; adds precision, recall, F1, ROC AUC and AP to --json (null where the labels leave one undefined)")
	keyCol := fs.String("key-column", "", "field holding the record key (the series of ingest.derive, and a model per key: --key-by); default the config's ingest.key_field")
	keyBy := fs.String("key-by", "", "detect.key_by: none|key (empty: key when --key-column is given, else the config's); a key's first detect.keys.min_records rows are scored by the global model, which needs detect.min_records rows first")
	timeCol := fs.String("timestamp-column", "", "field holding the record time, RFC 3339, \"2006-01-02 15:04:05\" (without an offset a wall clock of the config's ingest.event_time_zone, default UTC) or epoch ms (s under the config's ingest.event_time_unit: s) (time_of_day, day_of_week); default the config's ingest.event_time_field; else the row index in ms")
	cfgPath := fs.String("config", "", "pipeline YAML: its detect section (and device) is used, and of ingest how records are read (features, uncertainty, key_field, event_time_field, event_time_zone, derive, format, csv_*); ingest and sink may be absent")
	window := fs.Int("window", 0, "detect.window W (0: the config's); >= the file's rows gives the batch case where the config does not write detect.min_records")
	minRecords := fs.Int("min-records", 0, "detect.min_records (0: the config's, capped at the window; where the config leaves it out and the window holds the file, the file's rows: the batch case)")
	refresh := fs.Int("refresh-records", 0, "detect.refresh_records (0: the config's)")
	dev := fs.String("device", "", "auto|cpu|cuda (empty: the config's device)")
	verdictsOut := fs.String("verdicts-out", "", "write row,score,outlier,reason,recent for every row to this CSV file (recent: detect.recent_scores; last, so that readers of the first four columns are unaffected)")
	pace := fs.String("pace", "batch", "batch: batches of ingest.batch_size rows (a backlog read at once); event-time: batches as a live pipeline forms them from rows arriving at their timestamps, closed at ingest.batch_size rows or when a row comes ingest.max_wait or more after the batch's first (a slow sensor's rows then go one or a few a batch, the model recalibrating between them as it does live); needs a timestamp column")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *input == "" {
		return usageError{fmt.Errorf("--input is required")}
	}
	if err := checkOutput(*input, *verdictsOut, "--verdicts-out"); err != nil {
		return err
	}
	for name, v := range map[string]int{"window": *window, "min-records": *minRecords, "refresh-records": *refresh} {
		if v < 0 {
			return usageError{fmt.Errorf("--%s must be >= 0, got %d", name, v)}
		}
	}
	if *keyBy != "" && *keyBy != string(detect.KeyByNone) && *keyBy != string(detect.KeyByKey) {
		return usageError{fmt.Errorf("--key-by %q: want none or key", *keyBy)}
	}
	if *pace != "batch" && *pace != "event-time" {
		return usageError{fmt.Errorf("--pace %q: want batch or event-time", *pace)}
	}
	cfg := replayConfig(pipeline.Default())
	written := func(string) bool { return false } // the keys the config file sets
	if *cfgPath != "" {
		var err error
		if written, err = config.LoadWritten(*cfgPath, &cfg); err != nil {
			return err
		}
		if d := cfg.Device; d != pipeline.DeviceAuto && d != pipeline.DeviceCPU && d != pipeline.DeviceCUDA {
			return config.Locate(*cfgPath, config.Fieldf("device", "must be auto, cpu or cuda, got %q", d))
		}
	}
	if *dev != "" {
		cfg.Device = pipeline.DeviceChoice(*dev)
	}
	log := newLogger(stderr).Level(zerolog.WarnLevel)
	device, err := openDevice(string(cfg.Device), log, opt, "")
	if err != nil {
		return err
	}
	defer device.Close()
	in := replayInput{path: *input, format: *format, label: *labelCol, key: *keyCol, timeCol: *timeCol,
		ingest: cfg.Ingest, configPath: *cfgPath}
	var maxWait time.Duration // 0: batches of batch_size rows
	if *pace == "event-time" {
		if *timeCol == "" && cfg.Ingest.EventTimeField == "" {
			flag := "--timestamp-column"
			if c := timeColumn(in); c != "" {
				flag = fmt.Sprintf("--timestamp-column %s (the column %q looks like a time)", c, c)
			}
			return usageError{fmt.Errorf("--pace event-time needs the rows' times: %s, or the config's ingest.event_time_field", flag)}
		}
		maxWait = max(cfg.Ingest.MaxWait, 1) // (a batch of one instant at least)
	}
	if w := eventZoneWarning(*cfgPath, cfg.Ingest, *timeCol, "or --timestamp-column a row's time is its index"); w != "" {
		fmt.Fprintln(stderr, "replay: "+w)
	}
	tab, err := readReplayInput(in, stderr)
	if err != nil {
		return err
	}
	features, sds, rows := tab.features, tab.sds, tab.rows()
	if len(features) == 0 {
		return fmt.Errorf("%s: no feature column", *input)
	}
	if w := labelsOfOneKind(*labelCol, tab.outliers); w != "" {
		fmt.Fprintf(stderr, "replay: %s: %s\n", *input, w)
	}
	if (cfg.Ingest.EventTimeField != "" || *timeCol != "") && cfg.Ingest.EventTimeUnit != ingest.EventTimeSeconds {
		if w := epochSecondsWarning(tab.times, tab.textTime); w != "" {
			fmt.Fprintf(stderr, "replay: %s: %s\n", *input, w)
		}
	}

	dc := cfg.Detect
	if err := dc.Validate(); err != nil {
		return config.Locate(*cfgPath, err) // each key at its line and column, as lint gives it
	}
	// --window, --min-records, --refresh-records 0 (their default): the config's, as the help says.
	sz := replaySizes{window: *window, minRecords: *minRecords, written: written, rows: rows, input: *input}
	if err := sz.apply(&dc, stderr); err != nil {
		return err
	}
	if *refresh > 0 {
		dc.RefreshRecords = *refresh
	}
	byColumn := false // key_by: key came from --key-column alone
	switch {
	case *keyBy != "":
		dc.KeyBy = detect.KeyBy(*keyBy)
	case *keyCol != "":
		byColumn = dc.KeyBy != detect.KeyByKey
		if written("detect.key_by") && dc.KeyBy == detect.KeyByNone { // (live, the key would name the series alone)
			fmt.Fprintf(stderr, "replay: --key-column %q gives detect.key_by: key, not the config's key_by: none (--key-by none keeps it)\n", *keyCol)
		}
		dc.KeyBy = detect.KeyByKey // a model per key of the named column
	}
	if dc.KeyBy == detect.KeyByKey && !slices.ContainsFunc(tab.keys, func(k []byte) bool { return k != nil }) {
		// Live, such records are keyed by the Kafka message key; a file has none.
		fmt.Fprintf(stderr, "replay: %s: detect.key_by: key, but the rows have no key (name its column: --key-column, or the config's ingest.key_field): every row is of one key, one model for the file\n", *input)
	}
	dc.RefreshInterval = time.Duration(math.MaxInt64) // rebuilds by record count only (see the help)
	dc.StateDir = ""                                  // a replay neither reads nor writes snapshots
	if err := dc.Validate(); err != nil {
		if byColumn { // the config's key_by does not help: the flag overrides it
			err = fmt.Errorf("%w (--key-column %q gives detect.key_by: key; --key-by none keeps one model for the stream, the column naming the series)", err, *keyCol)
		}
		return usageError{err} // the file's values were valid: the flags made them so
	}
	if err := dc.ValidateFeatures(len(features)); err != nil { // as lint and the start check it
		if *cfgPath != "" {
			err = config.Locate(*cfgPath, err)
		}
		return err
	}

	models := 0
	countModels := func(_ *detect.Model, fresh bool) {
		if fresh {
			models++
		}
	}
	deps := detect.Deps{Log: log, OnModel: countModels, Cycles: pipeline.Cycles(cfg.Ingest)}
	if device.IsGPU() { // on the CPU the stage runs the CPU code itself, as in the pipeline
		deps.Accelerator = device
	}
	st, err := detect.NewStage(dc, features, sds != nil, deps)
	if err != nil {
		return err
	}

	start := time.Now()
	scores, batches, err := replayRows(st, tab, cfg.Ingest.BatchSize, maxWait)
	st.Close()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	res := replayResult{Input: *input, Rows: rows, Features: len(features), Batches: batches, ModelsBuilt: models,
		ElapsedMS: float64(elapsed.Microseconds()) / 1000, Device: device.Name()}
	for _, s := range scores {
		if s.Outlier {
			res.Flagged++
		}
		if s.Suppressed {
			res.Suppressed++
		}
		if !s.Scored {
			res.Unscored++
		}
	}
	if *labelCol != "" {
		replayQuality(&res, scores, tab.outliers)
	}
	if dc.KeyBy == detect.KeyByKey {
		res.Keys = keyCounts(st, tab.keys, scores)
	}
	if *verdictsOut != "" {
		if err := writeVerdicts(*verdictsOut, scores); err != nil {
			return fmt.Errorf("--verdicts-out: %w", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	held := ""
	if res.Suppressed > 0 {
		held = fmt.Sprintf(", %d held back by the alarm cap (detect.alarm_rate)", res.Suppressed)
	}
	fmt.Fprintf(stdout, "%s: %s, %d flagged%s, %d unscored, %s built, %.0f ms (%s)\n",
		*input, plural(res.Rows, "row", "rows"), res.Flagged, held, res.Unscored, plural(res.ModelsBuilt, "model", "models"), res.ElapsedMS, res.Device)
	if res.F1 != nil {
		fmt.Fprintf(stdout, "precision %s recall %s F1 %s ROC AUC %s AP %s\n", fmtFigure(res.Precision), fmtFigure(res.Recall), fmtFigure(res.F1),
			fmtFigure(res.ROCAUC), fmtFigure(res.AveragePrecision))
	}
	if k := res.Keys; k != nil {
		fmt.Fprintf(stdout, "keys: %d (%d with a model of their own, %d warming, %d evicted); %s scored by their key's model, %d by the global model\n",
			k.Count, k.Live, k.Warming, k.Evictions, plural(k.ScoredByKey, "row", "rows"), k.ScoredGlobally)
	}
	return nil
}

func (t *replayTable) rows() int { return len(t.times) }

// appendWarming records the next row's warming columns (Decoded.Warming: a derived mean or std
// whose series' window is still filling, not read as evidence), before the row's time
// is appended; a column that was never warming stays nil.
func (t *replayTable) appendWarming(w []bool) {
	if w == nil {
		return
	}
	if t.warming == nil {
		t.warming = make([][]bool, len(t.features))
	}
	for j, on := range w {
		if on && t.warming[j] == nil {
			t.warming[j] = make([]bool, t.rows())
		}
		if t.warming[j] != nil {
			t.warming[j] = append(t.warming[j], on)
		}
	}
}

// replayRows feeds the rows through st in batches built as the ingest stage builds them
// (paceBatches) and returns every row's score in file order and the number of batches.
func replayRows(st *detect.Stage, tab *replayTable, batchSize int, maxWait time.Duration) ([]batch.Score, int, error) {
	features, means, sds, rows := tab.features, tab.means, tab.sds, tab.rows()
	batchSize = max(batchSize, 1)
	ends := paceBatches(tab.times, batchSize, maxWait)
	bld := ingest.NewBuilder(memory.NewGoAllocator(), "replay", features, sds != nil, batchSize)
	defer bld.Release()
	scores := make([]batch.Score, 0, rows)
	take := func(out []*batch.Batch) {
		for _, b := range out {
			scores = append(scores, b.Scores...)
			b.Record.Release()
		}
	}
	d := ingest.Decoded{Values: make([]float32, len(features))}
	if sds != nil {
		d.SD = make([]float32, len(features))
	}
	lo := 0
	for _, hi := range ends {
		for i := lo; i < hi; i++ {
			d.Warming = d.Warming[:0]
			for j := range features {
				if tab.warming != nil {
					d.Warming = append(d.Warming, tab.warming[j] != nil && tab.warming[j][i])
				}
				d.Values[j] = means[j][i]
				if sds != nil {
					d.SD[j] = sds[j][i]
				}
			}
			// Partition 0, offset = row index: the row's identity; its key and time as read.
			if err := bld.Append(&d, 0, int64(i), tab.keys[i], tab.times[i], nil); err != nil {
				return nil, 0, err
			}
		}
		lo = hi
		out, err := st.Process(context.Background(), bld.Build())
		if err != nil {
			return nil, 0, err
		}
		take(out)
		st.Close() // a build this batch started serves from the next batch on: reproducible
	}
	out, err := st.Flush()
	if err != nil {
		return nil, 0, err
	}
	take(out)
	if len(scores) != rows {
		return nil, 0, fmt.Errorf("replay: %d of %d rows came out of the detect stage", len(scores), rows)
	}
	return scores, len(ends), nil
}

// paceBatches is where each batch ends (exclusive row indexes, the last len(times)): every
// size rows, or with maxWait > 0 as a live ingest closes them when the rows arrive at their
// times: at size rows, or at the first row that comes maxWait or more after the batch's first
// (a row whose time is earlier than the batch's first, out of order, joins it).
func paceBatches(times []time.Time, size int, maxWait time.Duration) []int {
	var ends []int
	first := 0
	for i := 1; i <= len(times); i++ {
		if i == len(times) || i-first == size || maxWait > 0 && times[i].Sub(times[first]) >= maxWait {
			ends = append(ends, i)
			first = i
		}
	}
	return ends
}

// labelsOfOneKind says what a label column of one kind leaves undefined ("" for both kinds, or
// no label): every row an outlier is most often a feature named by mistake (any non-zero number
// is an outlier), no row one a history without known anomalies.
func labelsOfOneKind(col string, outliers []bool) string {
	n := 0
	for _, o := range outliers {
		if o {
			n++
		}
	}
	switch {
	case len(outliers) == 0:
		return ""
	case n == len(outliers):
		return fmt.Sprintf("--label-column %q labels every row an outlier (%d of %d: non-zero or true is an outlier): ROC AUC is not defined, and precision and AP say nothing; is it the ground truth?", col, n, n)
	case n == 0:
		return fmt.Sprintf("--label-column %q labels no row an outlier: recall, ROC AUC and AP are not defined (null in --json), and every flag is counted false (precision 0)", col)
	}
	return ""
}

// replayQuality adds the label-based figures: the flags' precision, recall and F1, the
// combined score's ROC AUC and AP, and each detector's own score's (over the rows the global
// model scored for its own tests under key_by: globalOnly). Unscored rows (before a first
// model that never came) rank lowest.
func replayQuality(res *replayResult, scores []batch.Score, outlier []bool) {
	flags := make([]bool, len(scores))
	for i, s := range scores {
		flags[i] = s.Outlier
	}
	res.setCounts(quality.Count(flags, outlier))
	res.Detectors = map[string]detectorQuality{}
	for _, d := range detect.ScoreNames() {
		v := make([]float64, 0, len(scores))
		labels, only := outlier, globalOnly(d)
		if only {
			labels = make([]bool, 0, len(scores))
		}
		ran := false
		for i, s := range scores {
			if only {
				if s.ByKey { // not run on it: its fields read 0
					continue
				}
				labels = append(labels, outlier[i])
			}
			x := math.Inf(-1)
			if y := detect.DetectorScore(&s, d); s.Scored && !math.IsNaN(y) {
				x, ran = y, true
			}
			v = append(v, x)
		}
		if !ran { // a detector that is not enabled (the hypercube by default)
			continue
		}
		auc, ap := fig(quality.ROCAUC(v, labels)), fig(quality.AveragePrecision(v, labels))
		if d == detect.ScoreCombined {
			res.ROCAUC, res.AveragePrecision = auc, ap
			continue
		}
		res.Detectors[d] = detectorQuality{ROCAUC: auc, AveragePrecision: ap, Rows: len(v)}
	}
}

// globalOnly reports whether the score d is one of the global model's own tests, which a key's
// model does not run (detect.key_by: the eta-probability, the solving set's weight, the
// hypercube): its figures cover the rows the global model scored.
func globalOnly(d string) bool {
	return d == detect.ScoreEtaProbability || d == detect.ScoreSolvingSet || d == detect.ScoreHypercube
}

// writeVerdicts writes row,score,outlier,reason,recent (RFC 4180 by encoding/csv) for every
// row; an unscored row has empty scores and the reason "unscored", recent is empty when off.
func writeVerdicts(path string, scores []batch.Score) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := csv.NewWriter(f)
	if err := w.Write([]string{"row", "score", "outlier", "reason", "recent"}); err != nil {
		return err
	}
	for i, s := range scores {
		score, recent, reason := "", "", "unscored"
		if s.Scored {
			score = strconv.FormatFloat(detect.DetectorScore(&s, detect.ScoreCombined), 'g', -1, 64)
			if r := detect.DetectorScore(&s, detect.ScoreRecent); !math.IsNaN(r) {
				recent = strconv.FormatFloat(r, 'g', -1, 64)
			}
			reason = detect.Reason(&s)
		}
		if err := w.Write([]string{strconv.Itoa(i), score, strconv.FormatBool(s.Outlier), reason, recent}); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// Derive is the pipeline config's (window-bound detect defaults; sink brokers), so that a
// config file replay reads means what it means to outlierd run.
func (c *replayConfig) Derive(written func(path string) bool) { (*pipeline.Config)(c).Derive(written) }

// epochSecondsWarning says when every row's time looks like epoch seconds read as milliseconds:
// read as seconds, each lies in 2000-01-01 .. 2286-11-20 (946,684,800 to 9,999,999,999; as
// milliseconds, 1970-01-11 to 1970-04-26). The pipeline refuses such a record by its Kafka
// timestamp (a dead letter, bad_event_time); a file has none, so replay reads them as 1970 and
// says so. "" otherwise (also without rows), and where a row's time was written as text (text:
// replayTable.textTime), which says its unit: the pipeline's check is for epoch integers only.
func epochSecondsWarning(times []time.Time, text bool) string {
	if len(times) == 0 || text {
		return ""
	}
	for _, t := range times {
		if ms := t.UnixMilli(); ms < 946_684_800 || ms > 9_999_999_999 {
			return ""
		}
	}
	return fmt.Sprintf("every row's time is in 1970 (%s to %s) read as epoch milliseconds, as the timestamp column is read: epoch seconds? (write milliseconds or RFC 3339 times, or set ingest.event_time_unit: s; live, such a record is a dead letter)",
		times[0].UTC().Format(time.RFC3339Nano), times[len(times)-1].UTC().Format(time.RFC3339Nano))
}
