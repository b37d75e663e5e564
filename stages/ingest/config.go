// Package ingest reads records from a Kafka topic through a consumer group, decodes them (JSON,
// CSV or logfmt) into feature values, and assembles Arrow batches (package internal/core/batch) for
// the rest of the pipeline. Messages that cannot be decoded become dead letters; every fetched
// message is registered with a per-partition checkpointer, and Source.Commit commits only what
// the checkpointer says is done.
//
// Files: config.go (Config, Default, Validate), deriveconfig.go (the ingest.derive section),
// decode.go (the Decoder interface and value parsing shared by the formats), eventtime.go (the
// event time, ingest.event_time_zone's wall clocks), json.go (with jsonfields.go: its paths and
// values), csv.go, logfmt.go (the decoders), builder.go (the Arrow batch builder), derive.go (derived features:
// per-key differences, rolling robust z and rolling means, time of day and day of week), source.go (the Kafka
// source), commit.go (its offset commits).
package ingest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
)

// Format is ingest.format: how message values are encoded. The word is decoded once when the
// YAML is loaded (UnmarshalYAML) and checked by Validate; Checked.NewDecoder picks its decoder
// by it.
type Format string

// Formats accepted by Config.Format.
const (
	FormatJSON   Format = "json"
	FormatCSV    Format = "csv"
	FormatLogfmt Format = "logfmt"
)

// UnmarshalYAML decodes the word (Validate checks it).
func (f *Format) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, f) }

// MissingPolicy is ingest.missing: what a record with a missing feature becomes.
type MissingPolicy string

// The policies of Config.Missing.
const (
	MissingDeadLetter MissingPolicy = "dead_letter"
	MissingFill       MissingPolicy = "fill"
)

// UnmarshalYAML decodes the word (Validate checks it).
func (m *MissingPolicy) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, m) }

// StartOffset is ingest.start_offset: where a group without committed offsets starts. The word
// is decoded once when the YAML is loaded and checked by Validate.
type StartOffset string

// Start offsets accepted by Config.StartOffset.
const (
	StartEarliest StartOffset = "earliest"
	StartLatest   StartOffset = "latest"
)

// UnmarshalYAML decodes the word (Validate checks it).
func (s *StartOffset) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, s) }

// Config configures the Kafka source and its decoder. Decode it from YAML strictly (unknown keys
// are errors) on top of Default(), then call Validate.
type Config struct {
	// Brokers are the bootstrap brokers, "host:port". Default ["localhost:9092"]. One reachable
	// broker is enough; listing more only helps when some are down at start.
	Brokers []string `yaml:"brokers"`
	// Topic is the topic to consume. Required.
	Topic string `yaml:"topic"`
	// GroupID is the consumer group: offsets are committed to the group, and the group spreads
	// partitions over several outlierd processes. Default "outlierd"; give each pipeline that
	// reads the same topic for another purpose a group of its own.
	GroupID string `yaml:"group_id"`
	// StartOffset is where a group without committed offsets starts: "earliest" (default:
	// nothing already in the topic is skipped) or "latest" (only new records; less backlog at
	// first start). It is also where a partition whose committed offset is past its end (the
	// topic deleted and created again, a truncated log) is read from, logged: Kafka's
	// auto.offset.reset. (An offset below the first retained record goes on from that record
	// either way.) Under "earliest" a partition without a committed offset whose records the
	// window restored from detect.state_dir holds starts after the window's newest one of it
	// instead, committed as its fetch starts; one the window holds none of is warned of
	// (resume.go: a builder's first start on a role-all run's state_dir).
	StartOffset StartOffset `yaml:"start_offset"`
	// Format of the message values: "json" (default), "csv" (one line per message) or "logfmt".
	Format Format `yaml:"format"`
	// Features are the fields read as features, in column order. JSON: dotted paths into nested
	// objects ("sensor.temp"). CSV: names from CSVHeader, or 0-based column indices ("0", "3")
	// when there is no header. logfmt: keys. Values must be numbers (JSON strings are refused,
	// see jsonfields.go). Required; names must be distinct and may not start with "_" (reserved for
	// the coordinate columns).
	Features []string `yaml:"features"`
	// CSVHeader names the CSV columns, in order (messages carry no header line). Optional: with
	// it, fields may be named; without it, fields are 0-based indices. When set, every message
	// must have exactly this many columns.
	CSVHeader []string `yaml:"csv_header"`
	// CSVDelimiter is the CSV field separator, one character. Default ",". (Columns are
	// selected by Features: names from CSVHeader or indices; other columns are skipped.)
	CSVDelimiter string `yaml:"csv_delimiter"`
	// CSVMissing lists the CSV field texts that mean "no value" for a feature or an
	// uncertainty (compared after trimming spaces and tabs), besides the empty field, which
	// always does. Default ["NA", "N/A", "null"], as sensor exports write gaps ("NaN" is
	// refused as a producer bug unless listed here). Missing decides what happens to the record.
	CSVMissing []string `yaml:"csv_missing"`
	// Missing is what happens to a record with a feature missing (absent, an empty CSV field,
	// or one of CSVMissing): "dead_letter" (default): the record goes to the dead-letter topic
	// with the reason `field "temp": missing`; "fill": the feature takes its Fill value (a
	// feature without one still sends the record to the dead-letter topic).
	Missing MissingPolicy `yaml:"missing"`
	// Fill is each feature's value when it is missing, under Missing: fill ({temp: 20.0}).
	// Keys must be features; values finite.
	Fill map[string]float64 `yaml:"fill"`
	// Uncertainty says where each feature's uncertainty (a standard deviation, in the feature's
	// unit) comes from. Nil (default): no uncertainty columns; the algorithms for uncertain data
	// then cannot run.
	Uncertainty *Uncertainty `yaml:"uncertainty"`
	// Derive declares derived features (derive.go): per-key first differences and rolling
	// robust z-scores of features, and the time of day and day of week of the record's
	// timestamp as cyclic (sin, cos) pairs. Their columns follow Features in the batch, so the
	// detectors see them as ordinary features. Nil (default): none.
	Derive *Derive `yaml:"derive"`
	// KeyField is a field whose value becomes the record key (_key): a string, or a number's
	// text. Optional; by default the Kafka message key is used. When set, it must be present.
	KeyField string `yaml:"key_field"`
	// EventTimeField is a field holding the event time (_timestamp): an RFC 3339 string, a time
	// as CSV exports and SQL write it ("2006-01-02 15:04:05", a space or a T, a fraction after
	// a point or a comma optional, an offset Z, +hh:mm or +hh optional; without an offset a
	// wall clock of EventTimeZone), or integer epoch milliseconds (a JSON number, or for
	// CSV/logfmt a value of only digits). Each field has its two digits, and an offset is at
	// most 23:59: an hour of one digit (12-hour clocks write it: without its AM/PM "1:34"
	// may be 13:34) or an offset of 24 hours makes the record a dead letter.
	// Optional; by default the Kafka message timestamp is used. When set, it must be present.
	EventTimeField string `yaml:"event_time_field"`
	// EventTimeZone is the IANA zone (e.g. "Europe/Berlin") whose wall clock an event time
	// without an offset is, as plants log local time: "2026-03-09 10:34:33" in Europe/Berlin is
	// 09:34:33 UTC. Default "UTC". Times with an offset (Z, +01:00, +01) and epoch milliseconds
	// are instants and read as such. A wall clock that a DST transition repeats (autumn) is its
	// first instant, one it skips (spring) is read with the offset before the gap ("02:30" in
	// Berlin's gap is 03:30 CEST), as RFC 5545 (iCalendar) reads them. "Local" (the host's
	// zone) is refused: a config means the same on every host.
	EventTimeZone string `yaml:"event_time_zone"`
	// EventTimeUnit is the unit of an epoch number in EventTimeField: "ms" (default: integer
	// epoch milliseconds) or "s" (epoch seconds, Unix time, with an optional fraction:
	// 1764304016.25). Under ms an integer that is clearly seconds (read as seconds within 30
	// days of its Kafka timestamp) is a dead letter saying so; "s" is for a producer that writes
	// seconds. Texts (RFC 3339, "2006-01-02 15:04:05") are read alike under both.
	EventTimeUnit string `yaml:"event_time_unit"`
	// BatchSize is the most records in one batch. Default 1000. Larger batches amortise
	// per-batch work (GPU launches, commits) at the cost of latency and memory.
	BatchSize int `yaml:"batch_size"`
	// MaxWait is how long a batch stays open after its first record before it is closed short
	// of BatchSize. Default 100ms. It bounds the latency added by batching at low traffic.
	MaxWait time.Duration `yaml:"max_wait"`
	// DeadLetterTopic is deprecated and read by nothing but validation: the sink writes the dead
	// letters to sink.dead_letter_topic. Still accepted so that configs that set it keep
	// loading; when set it must equal sink.dead_letter_topic (pipeline config) and differ from
	// Topic. Leave it out.
	DeadLetterTopic string `yaml:"dead_letter_topic"`
	// FetchMaxBytes is the most bytes one fetch request asks the broker for. Default 10 MiB.
	// It must exceed the largest message; larger values cost memory per partition fetched.
	FetchMaxBytes int `yaml:"fetch_max_bytes"`
	// HeartbeatInterval is how often the group member heartbeats, which is also how soon it
	// notices a rebalance. Default 3s; must be below SessionTimeout/3, and at least
	// minHeartbeat (1ns heartbeat flat out: a third of a core, the broker flooded).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// SessionTimeout is how long the group coordinator waits without a heartbeat before it
	// evicts this member and gives its partitions to others. Default 30s. Shorter: faster
	// failover; longer: fewer spurious rebalances under GC or CPU pauses.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// Security is TLS and SASL for the connections to Brokers (see pipeline/kafkasec). Default
	// none (plaintext, unauthenticated). Kept per stage, beside Brokers: the sink may write to
	// another cluster, or as another principal.
	Security kafkasec.Config `yaml:"security"`
}

// Uncertainty says where the uncertainty of each feature comes from. For a feature f the first
// of these that is set applies: Fields[f], then the field f+Suffix, then Default. When the field
// is named but missing in a message, Default is used if set, else the message is a dead letter.
// Uncertainties must be finite and >= 0.
type Uncertainty struct {
	// Suffix: the uncertainty of f is in the field f+Suffix (e.g. "_sd": temp -> temp_sd).
	// With CSV, only when CSVHeader names the columns.
	Suffix string `yaml:"suffix"`
	// Fields maps a feature to the field holding its uncertainty, overriding Suffix; never the
	// feature's own field (its value is no uncertainty).
	Fields map[string]string `yaml:"fields"`
	// Default is the uncertainty used when no field applies or the field is missing. Nil: no
	// default (a missing field is an error).
	Default *float64 `yaml:"default"`
}

// minHeartbeat is ingest.heartbeat_interval's floor.
const minHeartbeat = 100 * time.Millisecond

// Default returns the configuration with every default filled in. Topic and Features have no
// default and must be set.
func Default() Config {
	return Config{
		Brokers:           []string{"localhost:9092"},
		GroupID:           "outlierd",
		StartOffset:       StartEarliest,
		Format:            FormatJSON,
		CSVDelimiter:      ",",
		CSVMissing:        []string{"NA", "N/A", "null"},
		Missing:           MissingDeadLetter,
		EventTimeZone:     "UTC",
		EventTimeUnit:     EventTimeMillis,
		BatchSize:         1000,
		MaxWait:           100 * time.Millisecond,
		FetchMaxBytes:     10 << 20,
		HeartbeatInterval: 3 * time.Second,
		SessionTimeout:    30 * time.Second,
	}
}

// maxBatchSize bounds BatchSize: one batch is one Arrow record held in memory end to end.
const maxBatchSize = 1 << 20

// Validate reports every problem of the configuration at once (errors.Join), each a
// config.FieldError naming the key with its full path ("ingest.group_id"), so that a config
// file points at the line to fix.
func (c *Config) Validate() error {
	_, err := c.Check()
	return err
}

// Checked is a Config that Validate passed, with the zones it loaded: its decoders and its
// Deriver are made without validating again or loading a zone again (the source makes a
// decoder a partition; replay checks the config once, before a file's first line).
type Checked struct {
	cfg        Config
	zone       *time.Location // event_time_zone
	deriveZone *time.Location // derive.timezone; nil without derive
}

// Check is Validate, and returns the checked configuration (nil with the error). The Checked
// shares c's slices and maps: change neither after.
func (c *Config) Check() (*Checked, error) {
	var errs []error
	// bad reports a problem of key (its path under ingest.; "features[2]").
	bad := func(key, format string, args ...any) {
		errs = append(errs, config.Fieldf("ingest."+key, format, args...))
	}

	if len(c.Brokers) == 0 {
		bad("brokers", "at least one broker is required")
	}
	for i, b := range c.Brokers {
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || !isPort(port) {
			bad(fmt.Sprintf("brokers[%d]", i), "%s", config.NotHostPort(b))
		}
	}
	if c.Topic == "" {
		bad("topic", "required")
	}
	if c.GroupID == "" {
		bad("group_id", "required")
	}
	if c.StartOffset != StartEarliest && c.StartOffset != StartLatest {
		bad("start_offset", "%q is not %q or %q", c.StartOffset, StartEarliest, StartLatest)
	}
	if c.DeadLetterTopic != "" && c.DeadLetterTopic == c.Topic {
		bad("dead_letter_topic", "must differ from topic %q (a dead letter would be read again)", c.Topic)
	}
	if c.BatchSize < 1 || c.BatchSize > maxBatchSize {
		bad("batch_size", "%d is not in [1, %d]", c.BatchSize, maxBatchSize)
	}
	if c.MaxWait <= 0 {
		bad("max_wait", "%v must be positive", c.MaxWait)
	}
	if c.FetchMaxBytes < 1024 {
		bad("fetch_max_bytes", "%d is below 1024", c.FetchMaxBytes)
	}
	if c.HeartbeatInterval < minHeartbeat {
		bad("heartbeat_interval", "%v must be at least %v (shorter only loads the broker)", c.HeartbeatInterval, minHeartbeat)
	}
	if c.SessionTimeout < 3*c.HeartbeatInterval {
		bad("session_timeout", "%v must be at least 3 x heartbeat_interval (%v)", c.SessionTimeout, c.HeartbeatInterval)
	}
	errs = append(errs, c.Security.Problems("ingest.security.")...)

	switch c.Missing {
	case MissingDeadLetter:
		if len(c.Fill) > 0 {
			bad("fill", "only with missing: %s (missing is %s)", MissingFill, c.Missing)
		}
	case MissingFill:
		if len(c.Fill) == 0 {
			bad("fill", "missing: fill needs a value per feature to fill ({%s: 0})", strings.Join(c.Features, ": 0, "))
		}
	default:
		bad("missing", "%q is not %q or %q", c.Missing, MissingDeadLetter, MissingFill)
	}
	for _, f := range slices.Sorted(maps.Keys(c.Fill)) {
		v := c.Fill[f]
		if !slices.Contains(c.Features, f) {
			bad(fmt.Sprintf("fill[%q]", f), "%q is not a feature", f)
		} else if math.IsNaN(v) || math.IsInf(float64(float32(v)), 0) {
			bad(fmt.Sprintf("fill[%q]", f), "%v must be a finite float32", v)
		}
	}
	for i, m := range c.CSVMissing {
		if strings.TrimSpace(m) != m || m == "" {
			bad(fmt.Sprintf("csv_missing[%d]", i), "%q: write the text without surrounding spaces (the empty field is always missing)", m)
		}
	}

	formatOK := true
	switch c.Format {
	case FormatJSON, FormatLogfmt:
		if len(c.CSVHeader) > 0 {
			bad("csv_header", "only for format %q", FormatCSV)
		}
	case FormatCSV:
		if len([]rune(c.CSVDelimiter)) != 1 || c.CSVDelimiter == "\"" || c.CSVDelimiter == "\n" || c.CSVDelimiter == "\r" {
			bad("csv_delimiter", "%q must be one character other than a quote or a newline", c.CSVDelimiter)
		} else if c.CSVDelimiter[0] >= 0x80 {
			bad("csv_delimiter", "%q must be an ASCII character", c.CSVDelimiter)
		}
		for i, h := range c.CSVHeader {
			if h == "" {
				bad(fmt.Sprintf("csv_header[%d]", i), "empty name")
			} else if slices.Index(c.CSVHeader, h) != i {
				bad(fmt.Sprintf("csv_header[%d]", i), "%q appears twice", h)
			}
		}
	default:
		formatOK = false
		bad("format", "%q is not one of %q, %q, %q", c.Format, FormatJSON, FormatCSV, FormatLogfmt)
	}

	if len(c.Features) == 0 {
		bad("features", "at least one feature is required")
	}
	columns := map[string]string{} // Arrow column name -> what claimed it
	claim := func(key, col, what string) {
		if prev, ok := columns[col]; ok {
			bad(key, "%scolumn name %q is already used by %s", what, col, prev)
			return
		}
		columns[col] = "ingest." + key + strings.TrimSuffix(" "+what, " ")
	}
	for i, f := range c.Features {
		what := fmt.Sprintf("features[%d]", i)
		switch {
		case f == "":
			bad(what, "empty name")
			continue
		case strings.HasPrefix(f, "_"):
			bad(what, "%q starts with \"_\", reserved for the coordinate columns", f)
			continue
		}
		claim(what, f, "")
		if c.Uncertainty != nil {
			claim(what, f+batch.UncertaintySuffix, "(its uncertainty column) ")
		}
		if formatOK {
			if err := c.checkField(f); err != nil {
				bad(what, "%w", err)
			}
		}
	}
	var deriveZone *time.Location
	if c.Derive != nil {
		deriveZone = c.Derive.validate(c.Features, c.Uncertainty != nil, bad, claim)
	}
	if formatOK && c.KeyField != "" {
		if err := c.checkField(c.KeyField); err != nil {
			bad("key_field", "%w", err)
		}
	}
	if formatOK && c.EventTimeField != "" {
		if err := c.checkField(c.EventTimeField); err != nil {
			bad("event_time_field", "%w", err)
		}
	}
	zone, err := loadZone(c.EventTimeZone)
	if err != nil {
		bad("event_time_zone", "%w", err)
	}
	if u := c.EventTimeUnit; u != "" && u != EventTimeMillis && u != EventTimeSeconds {
		bad("event_time_unit", "%q: want ms (epoch milliseconds) or s (epoch seconds)", u)
	}
	if u := c.Uncertainty; u != nil {
		if u.Suffix == "" && len(u.Fields) == 0 && u.Default == nil {
			bad("uncertainty", "set suffix, fields or default (or leave uncertainty out)")
		}
		if u.Default != nil && (math.IsNaN(*u.Default) || math.IsInf(*u.Default, 0) || *u.Default < 0) {
			bad("uncertainty.default", "%v must be finite and >= 0", *u.Default)
		}
		if u.Suffix != "" && c.Format == FormatCSV && len(c.CSVHeader) == 0 {
			bad("uncertainty.suffix", "needs csv_header (CSV columns without a header are indices)")
		}
		for _, f := range slices.Sorted(maps.Keys(u.Fields)) {
			if !slices.Contains(c.Features, f) {
				bad("uncertainty.fields", "%q is not a feature", f)
			} else if u.Fields[f] == f {
				// The value would be read as its own standard deviation.
				bad(fmt.Sprintf("uncertainty.fields[%q]", f), "%q is the feature's own field: name the field that holds its uncertainty (a standard deviation), or leave the feature out of fields", f)
			} else if formatOK {
				if err := c.checkField(u.Fields[f]); err != nil {
					bad(fmt.Sprintf("uncertainty.fields[%q]", f), "%w", err)
				}
			}
		}
		if u.Suffix == "" && u.Default == nil && len(u.Fields) > 0 {
			for _, f := range c.Features {
				if _, ok := u.Fields[f]; !ok && f != "" {
					bad("uncertainty", "feature %q has no uncertainty field (fields or suffix) and there is no default", f)
				}
			}
		}
		if c.Format == FormatCSV && len(c.CSVHeader) > 0 {
			// Only a configured CSV header can tell that a suffixed column does not exist; the
			// decoder's plan says which features read one (not those uncertainty.fields names).
			for _, f := range c.Fields() {
				if f.Key == "ingest.uncertainty.suffix" && f.Required && f.Feature != "" && !slices.Contains(c.CSVHeader, f.Name) {
					bad("uncertainty.suffix", "column %q (for feature %q) is not in csv_header and there is no default", f.Name, f.Feature)
				}
			}
		}
	}
	if formatOK && c.Format == FormatJSON {
		for _, p := range checkJSONPaths(c.allFields()) {
			bad("features", "%s", p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Checked{cfg: *c, zone: zone, deriveZone: deriveZone}, nil
}

// checkField checks that name can address a field in the configured format.
func (c *Config) checkField(name string) error {
	switch c.Format {
	case FormatCSV:
		if _, err := c.csvColumn(name); err != nil {
			return err
		}
	case FormatJSON:
		for _, seg := range strings.Split(name, ".") {
			if seg == "" {
				return fmt.Errorf("%q has an empty path segment", name)
			}
		}
	case FormatLogfmt:
		if name == "" || strings.ContainsAny(name, " =\"\t\n\r") {
			return fmt.Errorf("%q is not a logfmt key (no spaces, '=' or quotes)", name)
		}
	}
	return nil
}

// csvColumn resolves a CSV field: a csv_header name, else a 0-based index.
func (c *Config) csvColumn(name string) (int, error) {
	if i := slices.Index(c.CSVHeader, name); i >= 0 {
		return i, nil
	}
	i, err := strconv.Atoi(name)
	if err != nil || i < 0 || strconv.Itoa(i) != name {
		if len(c.CSVHeader) > 0 {
			return 0, fmt.Errorf("%q is neither a csv_header name nor a 0-based column index", name)
		}
		return 0, fmt.Errorf("%q is not a 0-based column index (set csv_header to use names)", name)
	}
	if len(c.CSVHeader) > 0 && i >= len(c.CSVHeader) {
		return 0, fmt.Errorf("column index %d is beyond csv_header's %d columns", i, len(c.CSVHeader))
	}
	return i, nil
}

// allFields lists every field the decoder reads (Fields'), for the JSON path conflict check;
// an empty feature's (reported as such) left out.
func (c *Config) allFields() []string {
	var out []string
	for _, f := range c.Fields() {
		if (f.role == roleFeature || f.role == roleSD) && f.Feature == "" {
			continue
		}
		out = append(out, f.Name)
	}
	return out
}

// checkJSONPaths refuses a path that is a strict prefix of another ("a" and "a.b"): the value
// at "a" would have to be a number and an object at once.
func checkJSONPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		for _, q := range paths {
			if strings.HasPrefix(q, p+".") {
				out = append(out, fmt.Sprintf("JSON path %q is a prefix of %q (a value cannot be a number and an object)", p, q))
			}
		}
	}
	return out
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}
