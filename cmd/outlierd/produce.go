package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/datasets/csvfile"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/ingest"
)

// produceOutput is the JSON contract of `outlierd produce --json`.
type produceOutput struct {
	Input         string  `json:"input"`
	Format        string  `json:"format"`         // the file's
	MessageFormat string  `json:"message_format"` // ingest.format: what went to the topic
	Topic         string  `json:"topic"`
	Records       int     `json:"records"`
	ElapsedMS     float64 `json:"elapsed_ms"`
	RecordsPerS   float64 `json:"records_per_s"`
}

// produceBatch is how many messages one write hands the producer (each write waits for the
// broker's acknowledgement, acks=all).
const produceBatch = 500

func runProduce(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("produce", stdout, stderr)
	path := fs.String("config", "", "pipeline YAML file (required): ingest.brokers, ingest.topic, ingest.format, the CSV settings and security")
	input := fs.String("input", "", "file of records (required): CSV with a header row, JSON lines (one object per line) or logfmt lines")
	format := fs.String("format", "", "the file's format: csv | json | logfmt (default: from its extension, .csv, .json/.jsonl/.ndjson, .logfmt/.log)")
	keyCol := fs.String("key-column", "", "column (CSV header name, JSON field or dotted path as ingest.key_field reads it, logfmt key) whose value is the message key (default: no key)")
	rate := fs.String("rate", "", "records per second, N or N/s (default: as fast as the broker acknowledges)")
	delim := fs.String("delimiter", "", "CSV file: its field separator (default: ingest.csv_delimiter, itself \",\")")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" || *input == "" {
		return usageError{fmt.Errorf("--config and --input are required")}
	}
	perSec, err := parseRate(*rate)
	if err != nil {
		return usageError{fmt.Errorf("--rate: %w", err)}
	}
	fileFormat := *format
	if fileFormat == "" {
		if fileFormat = string(formatOf(*input)); fileFormat == "" {
			return usageError{fmt.Errorf("%s: cannot tell the format from the extension; give --format csv|json|logfmt", *input)}
		}
	}
	if err := oneOf("format", fileFormat, "csv", "json", "logfmt"); err != nil {
		return err
	}
	cfg, err := pipeline.LoadConfig(*path)
	if err != nil {
		return err
	}
	in := cfg.Ingest
	if *delim == "" {
		*delim = in.CSVDelimiter
	}
	if len([]rune(*delim)) != 1 {
		return usageError{fmt.Errorf("--delimiter must be one character, got %q", *delim)}
	}
	if fileFormat != "csv" && fileFormat != string(in.Format) {
		return fmt.Errorf("%s: a %s file goes to a %s topic as it is, but ingest.format is %s (a CSV file converts to any format)",
			*input, fileFormat, fileFormat, in.Format)
	}
	var total int64 // the bar's total: counted only when there is a bar to show it
	if isTerminal(stderr) {
		if total, err = countRecords(*input, fileFormat); err != nil {
			return err
		}
	}
	f, err := os.Open(*input)
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := newRecordReader(f, *input, fileFormat, in, []rune(*delim)[0], *keyCol)
	if err != nil {
		return err
	}
	switch { // sent anyway: a test of the dead letters may mean it
	case len(recs.lacks) > 0 && fileFormat == "csv":
		fmt.Fprintf(stderr, "outlierd produce: warning: %s has no column %s (ingest.features without an ingest.fill value, their uncertainty fields without a default, key_field, event_time_field): the pipeline will send every record to the dead-letter topic %s (field %s: missing)\n",
			*input, quoteAll(recs.lacks), cfg.Sink.DeadLetterTopic, strconv.Quote(recs.lacks[0]))
	case len(recs.lacks) > 0:
		none := fmt.Sprintf("none of the first %d records of %s has", recs.looked, *input)
		if recs.looked == 1 {
			none = fmt.Sprintf("the one record of %s lacks", *input)
		}
		fmt.Fprintf(stderr, "outlierd produce: warning: %s the field %s (ingest.features without an ingest.fill value, their uncertainty fields without a default, key_field, event_time_field): the pipeline will send each record without it to the dead-letter topic %s (field %s: missing)\n",
			none, quoteAll(recs.lacks), cfg.Sink.DeadLetterTopic, strconv.Quote(recs.lacks[0]))
		if len(recs.flat) > 0 {
			fmt.Fprintf(stderr, "outlierd produce: the records have %s as one key: a dotted path reaches into nested objects ({\"a\": {\"b\": 1}} for a.b)\n", quoteAll(recs.flat))
		}
	}

	sig := catchStop(plainLog(stderr, "produce"), "", fmt.Sprintf("the records being written to topic %s may or may not have gone (no summary of what was sent)", in.Topic))
	defer sig.release()
	ctx := sig.ctx
	topic := pipeline.InputTopic(cfg)
	if _, err := topic.PartitionIDs(ctx, newLogger(stderr).Level(zerolog.WarnLevel)); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while checking topic %s: no record of %s was sent", in.Topic, *input)
		}
		return err
	}
	tr, err := topic.Transport()
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections() // after w.Close (deferred below, so run first)
	w := &kafka.Writer{Addr: kafka.TCP(in.Brokers...), Topic: in.Topic, RequiredAcks: kafka.RequireAll,
		BatchSize: produceBatch, BatchTimeout: 5 * time.Millisecond, Balancer: &kafka.RoundRobin{}, Transport: tr}
	if *keyCol != "" {
		w.Balancer = &kafka.Hash{} // one key's records stay in order on one partition
	}
	defer w.Close()

	bar := newCountProgress(stderr, total, "producing to "+in.Topic)
	defer bar.finish()
	start := time.Now()
	sent := 0
	chunk := produceBatch
	if perSec > 0 {
		chunk = max(1, min(produceBatch, int(perSec/20))) // about 20 writes a second
	}
	msgs := make([]kafka.Message, 0, chunk)
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		if perSec > 0 { // pace: record n (from 0) leaves no earlier than n/rate after the start; nothing is waited after the last
			if d := time.Until(start.Add(time.Duration(float64(sent) / perSec * float64(time.Second)))); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			if ctx.Err() != nil { // SIGINT or SIGTERM: not the broker's failure (the chunk being written may have gone too)
				return fmt.Errorf("interrupted: %s went to topic %s, the rest of %s was not sent", plural(sent, "record", "records"), in.Topic, *input)
			}
			return fmt.Errorf("writing to topic %q on %s after %s: %w", in.Topic, strings.Join(in.Brokers, ","), plural(sent, "record", "records"), err)
		}
		sent += len(msgs)
		bar.add(len(msgs))
		msgs = msgs[:0]
		return nil
	}
	for {
		key, value, err := recs.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Every record before the bad one goes, none after it: the chunk being filled is
			// sent too (dropped, it went unsaid while earlier chunks had gone).
			if ferr := flush(); ferr != nil {
				return errors.Join(err, ferr)
			}
			if sent == 0 {
				return fmt.Errorf("%w (no record went to topic %s)", err, in.Topic)
			}
			return fmt.Errorf("%w (the %s before it went to topic %s, none after it)", err, plural(sent, "record", "records"), in.Topic)
		}
		msgs = append(msgs, kafka.Message{Key: key, Value: value})
		if len(msgs) == chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	bar.finish() // before the summary line (a second finish does nothing)
	elapsed := time.Since(start)
	out := produceOutput{Input: *input, Format: fileFormat, MessageFormat: string(in.Format), Topic: in.Topic, Records: sent,
		ElapsedMS: float64(elapsed.Microseconds()) / 1000, RecordsPerS: float64(sent) / max(elapsed.Seconds(), 1e-9)}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	_, err = fmt.Fprintf(stdout, "%s: %s to topic %s on %s (%s -> %s) in %.1f s, %.0f records/s\n",
		*input, plural(sent, "record", "records"), in.Topic, strings.Join(in.Brokers, ","), fileFormat, in.Format, elapsed.Seconds(), out.RecordsPerS)
	return err
}

// maxRate bounds --rate: far above what one producer sends.
const maxRate = 1e9

// parseRate reads --rate: "500", "500/s" or "" (no limit, 0).
func parseRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%q is not a number of records per second (e.g. 500 or 500/s)", s)
	case !(v > 0):
		return 0, fmt.Errorf("%q is not a positive number of records per second (e.g. 500 or 500/s)", s)
	case v > maxRate:
		return 0, fmt.Errorf("%q: the rate must be at most %g records per second", s, maxRate)
	}
	return v, nil
}

// countRecords counts the records of the file (its non-empty lines, less a CSV header) for the
// progress bar; a CSV field with a newline inside quotes makes it an upper bound.
func countRecords(path, format string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var n int64
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if format == "csv" && n > 0 {
		n-- // the header
	}
	return n, sc.Err()
}

// recordReader yields a file's records as messages in the topic's format.
type recordReader struct {
	next func() (key, value []byte, err error)
	// lacks lists the fields every record needs (requiredLacking) that a CSV file's header has not,
	// or that none of the first looked records of JSON or logfmt lines has.
	lacks  []string
	looked int
	// flat lists the lacking fields the JSON records have as one key with a dot in it.
	flat []string
}

// flatKeyMark prefixes, in recordFields' set, a JSON key with a dot in it (the path of its name
// reaches nothing).
const flatKeyMark = "\x00flat:"

// lookAhead is how many JSON or logfmt records are looked at for the fields they lack: a file
// has no header, but a generator's or an export's records are alike.
const lookAhead = 100

// requiredLacking lists the fields every record needs (ingest.Config.Fields, Required: the
// features without a fill value, their uncertainty fields without uncertainty.default,
// key_field, event_time_field), in the order the decoder reports them missing, that has does
// not find among a CSV header sent as JSON objects or logfmt lines, or among the keys of the
// first JSON or logfmt records: each record would be a dead letter. (A topic of CSV lines is
// checked against ingest.csv_header instead.)
func requiredLacking(in ingest.Config, has func(name string) bool) []string {
	if in.Format != ingest.FormatJSON && in.Format != ingest.FormatLogfmt {
		return nil
	}
	var lacks []string
	for _, f := range missingFrom(in, has) {
		if f.Required {
			lacks = append(lacks, f.Name)
		}
	}
	return lacks
}

// countedColumns writes a header as "2 columns ["ts" "temp"]".
func countedColumns(cols []string) string {
	unit := "columns"
	if len(cols) == 1 {
		unit = "column"
	}
	return fmt.Sprintf("%d %s %q", len(cols), unit, cols)
}

// quoteAll writes names as a comma-separated list of quoted strings.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func newRecordReader(r io.Reader, name, format string, in ingest.Config, delim rune, keyCol string) (*recordReader, error) {
	r = csvfile.SkipBOM(r) // (of a JSON-lines or logfmt file too: it would spoil the first line)
	if format == "csv" {
		return newCSVRecords(r, name, in, delim, keyCol)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	read := func() ([]byte, []byte, error) {
		for sc.Scan() {
			line++
			text := bytes.TrimSpace(sc.Bytes())
			if len(text) == 0 {
				continue
			}
			value := bytes.Clone(text)
			var key []byte
			switch format {
			case "json":
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(value, &obj); err != nil {
					return nil, nil, fmt.Errorf("%s:%d: not a JSON object on one line: %v", name, line, err)
				}
				if keyCol != "" {
					var err error
					if key, err = jsonKey(obj, keyCol); err != nil {
						return nil, nil, fmt.Errorf("%s:%d: %w", name, line, err)
					}
				}
			case "logfmt":
				if keyCol != "" {
					v, ok := logfmtValue(value, keyCol)
					if !ok {
						return nil, nil, fmt.Errorf("%s:%d: no key %q (--key-column)", name, line, keyCol)
					}
					key = []byte(v)
				}
			}
			return key, value, nil
		}
		if err := sc.Err(); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
		}
		return nil, nil, io.EOF
	}
	// The first records are read here, and sent from here: the file is read once, and a
	// malformed line among them still stops the sending after the records before it.
	type record struct {
		key, value []byte
		err        error
	}
	var ahead []record
	has := map[string]bool{}
	for len(ahead) < lookAhead {
		k, v, err := read()
		ahead = append(ahead, record{k, v, err})
		if err != nil {
			break
		}
		recordFields(has, format, v)
	}
	rr := &recordReader{}
	if rr.looked = len(ahead); ahead[len(ahead)-1].err != nil {
		rr.looked--
	}
	if rr.looked > 0 {
		rr.lacks = requiredLacking(in, func(name string) bool { return has[name] })
		for _, l := range rr.lacks {
			if has[flatKeyMark+l] {
				rr.flat = append(rr.flat, l)
			}
		}
	}
	rr.next = func() ([]byte, []byte, error) {
		if len(ahead) == 0 {
			return read()
		}
		r := ahead[0]
		if r.err == nil {
			ahead = ahead[1:]
		}
		return r.key, r.value, r.err
	}
	return rr, nil
}

// recordFields adds the fields of a JSON line (an object's keys, and those of the objects in
// it as dotted paths, as ingest.features names them) or a logfmt line to has.
func recordFields(has map[string]bool, format string, line []byte) {
	if format == "logfmt" {
		logfmtPairs(line, func(k, _ string, _ bool) bool { has[k] = true; return true })
		return
	}
	var add func(prefix string, raw []byte)
	add = func(prefix string, raw []byte) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return // not an object: a leaf
		}
		for k, v := range obj {
			if strings.Contains(k, ".") {
				// A key with a dot: no dotted path reaches it (a path's dots go into nested
				// objects), so it is not the field of its name; marked for the warning's hint.
				has[flatKeyMark+prefix+k] = true
				continue
			}
			has[prefix+k] = true
			add(prefix+k+".", v)
		}
	}
	add("", line)
}

// newCSVRecords reads a CSV file with a header row and writes each row in the topic's format.
func newCSVRecords(r io.Reader, name string, in ingest.Config, delim rune, keyCol string) (*recordReader, error) {
	cr := csv.NewReader(r)
	cr.Comma = delim
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file (a CSV file starts with its header row)", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	header = append([]string(nil), header...)
	keyIdx := -1
	if keyCol != "" {
		for i, h := range header {
			if h == keyCol {
				keyIdx = i
			}
		}
		if keyIdx < 0 {
			return nil, fmt.Errorf("%s:1: no column %q (--key-column) in the header %s", name, keyCol, strings.Join(header, ","))
		}
	}
	if in.Format == ingest.FormatCSV && len(in.CSVHeader) > 0 && strings.Join(in.CSVHeader, "\x00") != strings.Join(header, "\x00") {
		// Quoted and counted: a header read with another delimiter is one column that joined
		// with commas would look like ingest.csv_header.
		return nil, fmt.Errorf("%s:1: the header, %s read with delimiter %q, differs from ingest.csv_header, %s (the messages carry no header: the columns must be the same, in order)",
			name, countedColumns(header), delim, countedColumns(in.CSVHeader))
	}
	lacks := requiredLacking(in, func(name string) bool { return slices.Contains(header, name) })
	var buf bytes.Buffer
	// Per file, not per row: the JSON object's plan, and one CSV writer into buf.
	var obj *csvObject
	if in.Format == ingest.FormatJSON {
		if obj, err = newCSVObject(name, header, in); err != nil {
			return nil, err
		}
	}
	cw := csv.NewWriter(&buf)
	cw.Comma = rune(in.CSVDelimiter[0])
	return &recordReader{next: func() ([]byte, []byte, error) {
		row, err := cr.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil, io.EOF
			}
			return nil, nil, fmt.Errorf("%s: %w", name, err) // csv.ParseError names line and column
		}
		buf.Reset()
		switch in.Format {
		case ingest.FormatJSON:
			buf.WriteByte('{')
			obj.write(&buf, row) // an empty field is a missing value: left out
			buf.WriteByte('}')
		case ingest.FormatLogfmt:
			for i, v := range row {
				if i > 0 {
					buf.WriteByte(' ')
				}
				buf.WriteString(header[i])
				buf.WriteByte('=')
				buf.WriteString(logfmtQuote(v))
			}
		default: // csv: the row itself, with the topic's delimiter
			if err := cw.Write(row); err != nil {
				return nil, nil, err
			}
			cw.Flush()
			buf.Truncate(buf.Len() - 1) // the newline
		}
		var key []byte
		if keyIdx >= 0 {
			key = []byte(row[keyIdx])
		}
		return key, bytes.Clone(buf.Bytes()), nil
	}, lacks: lacks}, nil
}

// jsonValue writes a CSV field as JSON: a number as a number (the text as written, when it is
// a JSON number), anything else as a string.
func jsonValue(v string) []byte {
	t := strings.TrimSpace(v)
	if _, err := strconv.ParseFloat(t, 64); err == nil && json.Valid([]byte(t)) {
		return []byte(t)
	}
	b, _ := json.Marshal(v)
	return b
}

// logfmtQuote quotes a logfmt value when it is empty or holds a space, '=' or a quote.
func logfmtQuote(v string) string {
	if v != "" && !strings.ContainsAny(v, " =\"\t\n\r\\") {
		return v
	}
	return strconv.Quote(v)
}

// logfmtValue finds key's value in a logfmt line (bare or double-quoted).
func logfmtValue(line []byte, key string) (value string, found bool) {
	logfmtPairs(line, func(k, v string, eq bool) bool {
		if k == key && eq { // a bare key (a flag) is no value for a message key
			value, found = v, true
		}
		return !found
	})
	return value, found
}

// logfmtPairs calls fn with each key and value of a logfmt line, and whether the key has a '='
// (a key without one is a flag: the ingest decoder reads it as the empty value), until fn
// returns false or a quoted value is malformed.
func logfmtPairs(line []byte, fn func(k, v string, eq bool) bool) {
	s := string(line)
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return
		}
		eq := strings.IndexAny(s, "= \t")
		if eq < 0 {
			eq = len(s)
		}
		k := s[:eq]
		if eq == len(s) || s[eq] != '=' {
			s = s[eq:]
			if !fn(k, "", false) {
				return
			}
			continue
		}
		s = s[eq+1:]
		var v string
		if strings.HasPrefix(s, `"`) {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return
			}
			v, _ = strconv.Unquote(q)
			s = s[len(q):]
		} else {
			end := strings.IndexAny(s, " \t")
			if end < 0 {
				end = len(s)
			}
			v, s = s[:end], s[end:]
		}
		if !fn(k, v, true) {
			return
		}
	}
}
