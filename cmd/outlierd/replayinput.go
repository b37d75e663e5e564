package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/datasets/csvfile"
	"github.com/outlierd/outlierd/stages/ingest"
)

// Replay reads its input as the pipeline reads a topic (issue 20 item 6): each line is one
// message, decoded by the ingest stage's own decoder for the format (stages/ingest: json.go,
// csv.go, logfmt.go) with the config's ingest section (features, uncertainty, key_field,
// event_time_field, event_time_zone, csv_delimiter), and the derived features of ingest.derive computed by the
// same Deriver, in file order (one partition, the row index as its offset). What differs from
// a topic, and why:
//   - The label (--label-column) may be true or false as well as a number (ingest.Label).
//   - CSV files carry a header line: without ingest.csv_header the first line names the
//     columns (csv_header); with it, a first line equal to it is skipped (a file written with a
//     header) and any other is data (a dump of the topic's messages).
//   - Without ingest.features (no config, or one with only a detect section) a CSV file's
//     columns are the features, as replay always read tabular sets: every column but the label,
//     key and timestamp columns, "<f>_sd" columns being f's uncertainty; stderr says which.
//     JSON lines and logfmt need ingest.features (a line has no column list).
//   - A record the pipeline would send to the dead-letter topic stops replay with its
//     file:line and the decoder's reason: a backtest should not score a subset silently.
//   - Empty lines are skipped. Without a timestamp field a row's time is its index in ms since
//     the epoch (time_of_day and day_of_week then refuse to run).

// replayTable is the input as the detect stage will see it, column-major, in file order.
type replayTable struct {
	features []string    // ingest.Config.Columns(): the features, then the derived ones
	means    [][]float32 // per feature column
	sds      [][]float32 // nil without uncertainty
	warming  [][]bool    // per feature column, per row: Decoded.Warming (appendWarming); nil where never
	keys     [][]byte    // per row; nil: no key
	times    []time.Time // per row
	outliers []bool      // the label's verdicts; nil without a label column
	// textTime: a row's time was a text that says its unit (RFC 3339, "2006-01-02 15:04:05"),
	// not an epoch integer: Decoded.EventTimeText, as the pipeline's epoch-seconds check reads it.
	textTime bool
}

// replayInput is what decides how the file is read.
type replayInput struct {
	path, format        string // format "": the extension's, else the config's
	label, key, timeCol string // flags ("": none, or the config's key_field / event_time_field)
	ingest              ingest.Config
	configPath          string // the config file ("": none, or a test's config in ingest)
}

// haveFeatures reports whether the config names ingest.features (else a CSV header names them).
func (in replayInput) haveFeatures() bool { return len(in.ingest.Features) > 0 }

// replayFormat is --format, else the file's extension (formatOf), else the config's
// ingest.format when it names the features, else CSV.
func (in *replayInput) replayFormat() (ingest.Format, error) {
	if in.format != "" {
		f := ingest.Format(in.format)
		if f != ingest.FormatCSV && f != ingest.FormatJSON && f != ingest.FormatLogfmt {
			return "", usageError{fmt.Errorf("--format %q: want csv, json or logfmt", in.format)}
		}
		return f, nil
	}
	if f := formatOf(in.path); f != "" {
		return f, nil
	}
	if in.haveFeatures() {
		return in.ingest.Format, nil
	}
	return ingest.FormatCSV, nil
}

// formatOf is a file's format by its extension, for produce and replay ("" when the extension
// does not say): .csv; .json, .jsonl, .ndjson; .logfmt, .log.
func formatOf(path string) ingest.Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return ingest.FormatCSV
	case ".json", ".jsonl", ".ndjson":
		return ingest.FormatJSON
	case ".logfmt", ".log":
		return ingest.FormatLogfmt
	}
	return ""
}

// readReplayInput reads the file through the pipeline's decoders; notes for the user (columns
// not read, features taken from the header) go to warn.
func readReplayInput(in replayInput, warn io.Writer) (*replayTable, error) {
	ic := in.ingest
	format, err := in.replayFormat()
	if err != nil {
		return nil, err
	}
	ic.Format = format
	if ic.Topic == "" { // the keys of a topic replay has none of
		ic.Topic = "replay"
	}
	if ic.GroupID == "" {
		ic.GroupID = "replay"
	}
	if in.key != "" {
		ic.KeyField = in.key
	}
	if in.timeCol != "" {
		ic.EventTimeField = in.timeCol
	}
	f, err := os.Open(in.path)
	if err != nil {
		var pe *os.PathError // (its reason alone: the path comes first)
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot open: %w", in.path, err)
	}
	defer f.Close()
	sc := lineScanner(f)
	line := 0
	var first []byte // a CSV header line, once read
	if format == ingest.FormatCSV {
		first, line = headerLine(sc)
		if first == nil {
			if err := sc.Err(); err != nil {
				return nil, fmt.Errorf("%s: %w", in.path, err)
			}
			return nil, fmt.Errorf("%s: empty file: expected a header line", in.path)
		}
		header, err := csvHeader(first, ic.CSVDelimiter)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: header: %w", in.path, line, err)
		}
		switch {
		case len(ic.CSVHeader) == 0:
			// The header becomes csv_header: its check would name that key, which the user
			// never wrote (with --config at the file's line 1).
			for i, h := range header {
				if h == "" {
					return nil, fmt.Errorf("%s:%d: header: column %d has no name", in.path, line, i+1)
				}
				if j := slices.Index(header, h); j != i {
					return nil, fmt.Errorf("%s:%d: header: column %d is named %q as column %d is", in.path, line, i+1, h, j+1)
				}
			}
			ic.CSVHeader, first = header, nil
		case slices.Equal(header, ic.CSVHeader):
			first = nil // a header line: not data
		}
		for _, c := range []struct{ flag, name string }{{"label-column", in.label}, {"key-column", in.key}, {"timestamp-column", in.timeCol}} {
			if c.name != "" && !slices.Contains(ic.CSVHeader, c.name) && (c.name == in.label || !isColumnIndex(c.name, len(ic.CSVHeader))) {
				return nil, fmt.Errorf("%s: --%s %q is not a column of the header %v", in.path, c.flag, c.name, ic.CSVHeader)
			}
		}
		if !in.haveFeatures() {
			headerFeatures(&ic, in.label, warn, in.path)
		} else {
			if len(in.ingest.CSVHeader) == 0 {
				if err := inHeader(in, ic.CSVHeader); err != nil {
					return nil, err
				}
			}
			unread(ic, in.label, warn, in.path)
		}
	} else if !in.haveFeatures() {
		what, how := "JSON lines", "--format "+in.format
		if format == ingest.FormatLogfmt {
			what = "logfmt lines"
		}
		if in.format == "" {
			how = "by the extension " + filepath.Ext(in.path)
			if formatOf(in.path) == "" {
				how = "the config's ingest.format"
			}
		}
		return nil, usageError{fmt.Errorf("%s: %s (%s) need the features named: a --config with ingest.features (a %s line has no column list), e.g. ingest: {features: [temp, pressure]}",
			in.path, what, how, strings.TrimSuffix(what, " lines"))}
	}
	if err := labelClash(ic, in.label); err != nil {
		return nil, err
	}
	checked, err := ic.Check()
	if err != nil {
		if in.configPath != "" {
			err = config.Locate(in.configPath, err) // each key at its line and column, as lint gives it
		} else {
			err = fmt.Errorf("ingest: invalid config: %w", err)
		}
		return nil, fmt.Errorf("%s: the ingest section does not fit %s: %w", configName(in), in.path, err)
	}
	// The label is read after the features, in the same pass (a line parsed once), and may be
	// true or false too, as exports write it.
	dec := checked.NewDecoder(ingest.Label(in.label))
	der := checked.NewDeriver()
	if ic.Derive != nil && ic.EventTimeField == "" {
		for i, d := range ic.Derive.Features {
			if d.Kind == ingest.DeriveTimeOfDay || d.Kind == ingest.DeriveDayOfWeek {
				return nil, usageError{fmt.Errorf("ingest.derive.features[%d] (%s) needs the records' time: set ingest.event_time_field or --timestamp-column", i, d.Kind)}
			}
		}
	}
	t := &replayTable{features: ic.Columns()}
	t.means = make([][]float32, len(t.features))
	if ic.Uncertainty != nil {
		t.sds = make([][]float32, len(t.features))
	}
	nf := len(ic.Features)
	full := ic.NewDecoded()
	if in.label != "" { // the label is decoded after the features, in the same pass
		full.Values = make([]float32, nf+1)
		if full.SD != nil {
			full.SD = make([]float32, nf+1)
		}
	}
	decode := func(text []byte) (ingest.Decoded, bool, error) {
		if err := dec.Decode(text, full); err != nil {
			return ingest.Decoded{}, false, err
		}
		d := *full // the features alone, for the Deriver and the table
		d.Values = full.Values[:nf]
		if d.SD != nil {
			d.SD = full.SD[:nf]
		}
		return d, in.label != "" && full.Values[nf] != 0, nil
	}
	epoch := time.Unix(0, 0).UTC()
	row := func(text []byte, at int) error {
		d, outlier, err := decode(text)
		if err != nil {
			if format == ingest.FormatJSON && bytes.HasPrefix(bytes.TrimSpace(text), []byte("[")) {
				return fmt.Errorf("%s:%d: a JSON array: replay reads JSON lines, one object a line (as a topic's messages): %w", in.path, at, err)
			}
			if format == ingest.FormatLogfmt && !bytes.Contains(text, []byte("=")) {
				// A CSV or JSON file read as logfmt (--format, or a .log extension): the
				// decoder's reason alone (a feature missing) hides that the format is wrong.
				what, flag := "CSV", "csv"
				if bytes.HasPrefix(bytes.TrimSpace(text), []byte("{")) {
					what, flag = "JSON lines", "json"
				}
				return fmt.Errorf("%s:%d: the line does not look like logfmt (no key=value pair): --format %s if the file is %s (%w)", in.path, at, flag, what, err)
			}
			if n := raggedFields(in, ic, text, err); n >= 0 {
				return fmt.Errorf("%s:%d: ragged row: %s, the header (line 1) has %d", in.path, at, plural(n, "field", "fields"), len(ic.CSVHeader))
			}
			return fmt.Errorf("%s:%d:%s %w%s", in.path, at, csvColumn(ic, text, err), err, keyColumnHint(in, ic.Features, err))
		}
		var key []byte
		if d.HasKey {
			key = append([]byte{}, d.Key...)
		}
		ts := epoch.Add(time.Duration(len(t.times)) * time.Millisecond)
		if d.HasEventTime {
			ts, t.textTime = time.UnixMilli(d.EventTime).UTC(), t.textTime || d.EventTimeText
		}
		out := &d
		if der != nil { // partition 0, offset = the row: file order is the partition's order
			out = der.Apply(&d, 0, int64(len(t.times)), key, ts)
		}
		t.appendWarming(out.Warming)
		for j := range t.features {
			t.means[j] = append(t.means[j], out.Values[j])
			if t.sds != nil {
				t.sds[j] = append(t.sds[j], out.SD[j])
			}
		}
		t.keys, t.times = append(t.keys, key), append(t.times, ts)
		if in.label != "" {
			t.outliers = append(t.outliers, outlier)
		}
		return nil
	}
	if first != nil {
		if err := row(first, line); err != nil {
			return nil, err
		}
	}
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := row(sc.Bytes(), line); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", in.path, line+1, err)
	}
	if t.rows() == 0 {
		return nil, fmt.Errorf("%s: no records", in.path)
	}
	return t, nil
}

// inHeader checks that the fields the config names (ingest.Config.Fields, but those the flags
// stand in for) are columns of the file's header, which replay makes csv_header: ingest's own
// check named csv_header, a key the user never wrote.
func inHeader(in replayInput, header []string) error {
	for _, f := range missingFrom(in.ingest, func(name string) bool {
		return name == "" || slices.Contains(header, name) || isColumnIndex(name, len(header)) // "": ingest's check says so
	}) {
		whose := ""
		switch {
		case f.Key == "ingest.key_field" && in.key != "", f.Key == "ingest.event_time_field" && in.timeCol != "":
			continue // the flag's column, checked as such
		case f.Key == "ingest.uncertainty.suffix" && !f.Required:
			continue // with a default the column may be absent
		case f.Key == "ingest.uncertainty.suffix":
			whose = fmt.Sprintf(" (feature %q's, without uncertainty.default)", f.Feature)
		}
		if in.configPath != "" { // the key at its line and column in the config, as lint gives it
			return config.Locate(in.configPath, config.Fieldf(f.Key, "%q%s is not a column of %s's header %v", f.Name, whose, in.path, header))
		}
		return fmt.Errorf("%s: %s %q%s (--config) is not a column of the header %v", in.path, f.Key, f.Name, whose, header)
	}
	return nil
}

// labelClash refuses a --label-column that the decoder reads for something else (a feature, an
// uncertainty field, the key, the event time): one field cannot be both.
func labelClash(ic ingest.Config, label string) error {
	if label == "" {
		return nil
	}
	for _, f := range ic.Fields() {
		if f.Name != label {
			continue
		}
		what := fmt.Sprintf("a feature (%s)", f.Key)
		switch {
		case f.Key == "ingest.key_field":
			what = "the key (--key-column, ingest.key_field)"
		case f.Key == "ingest.event_time_field":
			what = "the timestamp (--timestamp-column, ingest.event_time_field)"
		case strings.HasPrefix(f.Key, "ingest.uncertainty."):
			what = fmt.Sprintf("feature %q's uncertainty (%s)", f.Feature, f.Key)
		}
		return usageError{fmt.Errorf("--label-column %q is also read as %s", label, what)}
	}
	return nil
}

// missingFrom lists the fields the decoder reads (ingest.Config.Fields, in the order it reports
// them missing) that has does not find: the checks of a file's columns or keys before any
// record is decoded (replay's inHeader, produce's requiredLacking).
func missingFrom(ic ingest.Config, has func(name string) bool) []ingest.Field {
	var out []ingest.Field
	for _, f := range ic.Fields() {
		if !has(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// lineScanner reads a replay input's lines: a UTF-8 BOM skipped (a header's first column is
// "ts", not "\ufeffts"), lines up to 64 MiB.
func lineScanner(f io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(csvfile.SkipBOM(f))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	return sc
}

// headerLine is the first line of sc that is not blank (a CSV header), a copy, and how many lines
// were read to it; nil at the end of the input or on a read error (sc.Err says which).
func headerLine(sc *bufio.Scanner) (first []byte, lines int) {
	for sc.Scan() {
		lines++
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			return slices.Clone(sc.Bytes()), lines
		}
	}
	return nil, lines
}

// isColumnIndex reports whether name is a 0-based column index below n, as ingest.key_field and
// event_time_field may name a CSV column (a label is always named).
func isColumnIndex(name string, n int) bool {
	i, err := strconv.Atoi(name)
	return err == nil && i >= 0 && i < n
}

func configName(in replayInput) string {
	if in.configPath != "" {
		return "--config"
	}
	return "replay"
}

// csvHeader splits a header line into its trimmed names.
func csvHeader(line []byte, delim string) ([]string, error) {
	r := csv.NewReader(bytes.NewReader(line))
	r.Comma = []rune(delim)[0]
	names, err := r.Read()
	if err != nil {
		return nil, err
	}
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	return names, nil
}

// headerFeatures makes the header's columns the features (replay's reading of a tabular file
// without ingest.features): all but the label, key, timestamp and "_"-prefixed columns; a
// column "<f>_sd" of a feature f, unless it is the label, key or timestamp column, is f's
// uncertainty (a feature without one is certain; that of the label, key or timestamp column is
// read by nothing).
func headerFeatures(ic *ingest.Config, label string, warn io.Writer, path string) {
	sd := map[string]string{}
	for _, h := range ic.CSVHeader {
		if h == label || h == ic.KeyField || h == ic.EventTimeField {
			continue // a column a flag names is that column alone, not a feature's uncertainty too
		}
		if base, ok := strings.CutSuffix(h, batch.UncertaintySuffix); ok && slices.Contains(ic.CSVHeader, base) {
			sd[base] = h
		}
	}
	ic.Features, ic.Uncertainty = nil, nil
	var skipped []string
	for _, h := range ic.CSVHeader {
		switch {
		case h == label || h == ic.KeyField || h == ic.EventTimeField:
		case strings.HasPrefix(h, "_"): // (a repeated name is refused before: readReplayInput, ingest's check)
			skipped = append(skipped, h)
		case sd[strings.TrimSuffix(h, batch.UncertaintySuffix)] == h:
		default:
			ic.Features = append(ic.Features, h)
		}
	}
	for base := range sd { // the label's, key's or timestamp's "_sd" column is nobody's uncertainty
		if !slices.Contains(ic.Features, base) {
			delete(sd, base)
		}
	}
	if len(sd) > 0 {
		zero := 0.0
		ic.Uncertainty = &ingest.Uncertainty{Fields: sd, Default: &zero}
	}
	fmt.Fprintf(warn, "replay: %s: no ingest.features in the config: the features are the columns %s", path, strings.Join(ic.Features, ", "))
	if len(skipped) > 0 {
		fmt.Fprintf(warn, " (not %s: a name starting with \"_\")", strings.Join(skipped, ", "))
	}
	fmt.Fprintln(warn)
	for _, f := range ic.Features { // as warnLabelFeatures says it for the other batch commands
		if labelLike(f) {
			fmt.Fprintf(warn, "replay: %s: %s\n", path, labelFeatureWarning(f))
		}
	}
	for _, f := range ic.Features {
		if timeLike(f) {
			fmt.Fprintf(warn, "replay: %s: the feature %q looks like a time: pass --timestamp-column %s (or set ingest.features) if it is one\n", path, f, f)
		}
	}
}

// timeLike reports whether a column name reads as a time (ts, time, timestamp, date, epoch...,
// ..._ms): such a column as a feature makes every record's time an outlier axis.
func timeLike(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "ts", "t", "time", "timestamp", "date", "datetime":
		return true
	}
	return strings.HasPrefix(n, "epoch") || strings.HasSuffix(n, "_ms") || strings.HasSuffix(n, "_ts") ||
		strings.HasSuffix(n, "timestamp") || strings.HasSuffix(n, "_time")
}

// timeColumn is the first column of a CSV file's header (ingest.csv_header, else its first
// line) that looks like a time (timeLike), for the error of --pace event-time without one;
// "" for other formats, or when none does or the header cannot be read.
func timeColumn(in replayInput) string {
	format, err := in.replayFormat()
	if err != nil || format != ingest.FormatCSV {
		return ""
	}
	header := in.ingest.CSVHeader
	if len(header) == 0 {
		f, err := os.Open(in.path)
		if err != nil {
			return ""
		}
		defer f.Close()
		first, _ := headerLine(lineScanner(f)) // (as readReplayInput reads it: "ts", not "\ufeffts")
		if first == nil {
			return ""
		}
		if header, err = csvHeader(first, in.ingest.CSVDelimiter); err != nil {
			return ""
		}
	}
	for _, h := range header {
		if timeLike(h) {
			return h
		}
	}
	return ""
}

// unread notes the header's columns that nothing reads (not a feature, uncertainty, key,
// timestamp or label): with ingest.features they are left out, as the pipeline leaves them.
func unread(ic ingest.Config, label string, warn io.Writer, path string) {
	read := map[string]bool{label: true}
	for _, f := range ic.Fields() {
		read[f.Name] = true
	}
	var out []string
	for _, h := range ic.CSVHeader {
		if !read[h] {
			out = append(out, h)
		}
	}
	if len(out) > 0 {
		fmt.Fprintf(warn, "replay: %s: columns not read (not in ingest.features, key_field, event_time_field or --label-column): %s\n", path, strings.Join(out, ", "))
	}
}

// keyColumnHint is what a decode error adds where a column the header alone made a feature
// (no ingest.features, features the columns it made them) holds text, most often the fleet's key,
// or nothing, such as gen --kind-column's anomaly_kind on a normal row. It tests the error's
// Reason, not its wording. "" otherwise.
func keyColumnHint(in replayInput, features []string, err error) string {
	var fe *ingest.FieldError
	if in.haveFeatures() || !errors.As(err, &fe) || fe.Field == in.label {
		return ""
	}
	// The timestamp's and key's columns (the flags', else the config's) are not features: the
	// hint's advice is not theirs.
	for _, c := range []string{in.timeCol, in.key, in.ingest.EventTimeField, in.ingest.KeyField} {
		if c != "" && fe.Field == c {
			return ""
		}
	}
	const why = " (without ingest.features every column but the key, timestamp and label columns is a feature: "
	switch fe.Reason {
	case ingest.ReasonNotNumber:
		return fmt.Sprintf(why+"--key-column %s if it is the key)", fe.Field)
	case ingest.ReasonMissing:
		others := slices.DeleteFunc(slices.Clone(features), func(f string) bool { return f == fe.Field })
		if len(others) == 0 {
			return why + "a --config with ingest.features names them)"
		}
		return fmt.Sprintf(why+"a --config with ingest.features names them, e.g. ingest: {features: [%s]})", strings.Join(others, ", "))
	}
	return ""
}

// raggedFields is the field count of a CSV line whose decode error is a column count other than
// the file's header's (the config writes no csv_header: line 1 named the columns), -1 otherwise:
// the decoder's words ("3 columns, csv_header has 2", at byte 0) name a key the file's user never
// wrote.
func raggedFields(in replayInput, ic ingest.Config, line []byte, err error) int {
	var se *ingest.SyntaxError
	if ic.Format != ingest.FormatCSV || len(in.ingest.CSVHeader) > 0 || !errors.As(err, &se) {
		return -1
	}
	r := csv.NewReader(bytes.NewReader(line))
	r.Comma, r.FieldsPerRecord, r.LazyQuotes = []rune(ic.CSVDelimiter)[0], -1, true
	rec, rerr := r.Read()
	if rerr != nil || len(rec) == len(ic.CSVHeader) {
		return -1
	}
	return len(rec)
}

// csvColumn is the 1-based byte column, and a colon, of the CSV field a decode error is about
// (its first byte, a quote included), as the other commands name a bad cell; "" for another
// format, an error of no field, or a line encoding/csv does not split as the decoder did.
func csvColumn(ic ingest.Config, line []byte, err error) string {
	var fe *ingest.FieldError
	if ic.Format != ingest.FormatCSV || !errors.As(err, &fe) {
		return ""
	}
	i := slices.Index(ic.CSVHeader, fe.Field)
	if i < 0 {
		if n, aerr := strconv.Atoi(fe.Field); aerr == nil && n >= 0 {
			i = n // a 0-based column index, as features may name them without a header
		}
	}
	r := csv.NewReader(bytes.NewReader(line))
	r.Comma, r.FieldsPerRecord, r.LazyQuotes = []rune(ic.CSVDelimiter)[0], -1, true
	rec, rerr := r.Read()
	if i < 0 || rerr != nil || i >= len(rec) {
		return ""
	}
	_, col := r.FieldPos(i)
	return strconv.Itoa(col) + ":"
}
