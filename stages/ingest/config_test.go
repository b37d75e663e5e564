package ingest

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestDefaultIsValidOnceRequiredFieldsAreSet(t *testing.T) {
	t.Parallel()
	c := Default()
	err := c.Validate()
	if err == nil {
		t.Fatal("Default() without topic and features validated")
	}
	if c.GroupID != "outlierd" {
		t.Errorf("default group_id %q, want outlierd", c.GroupID)
	}
	for _, want := range []string{"topic: required", "features: at least one"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	c.Topic, c.GroupID, c.Features = "in", "g", []string{"x"}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.BatchSize != 1000 || c.MaxWait != 100*time.Millisecond || c.Format != FormatJSON {
		t.Errorf("defaults: batch %d, wait %v, format %q", c.BatchSize, c.MaxWait, c.Format)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings, each one a separate problem
	}{
		{
			name: "many at once",
			mutate: func(c *Config) {
				c.Brokers = []string{"nohost", "h:99999"}
				c.Format = "xml"
				c.BatchSize = 0
				c.MaxWait = 0
				c.DeadLetterTopic = c.Topic
				c.StartOffset = "middle"
				c.Features = []string{"a", "", "_p", "a"}
			},
			want: []string{
				`brokers[0]: "nohost" is not host:port`, `brokers[1]: "h:99999" is not host:port`,
				`format: "xml" is not one of`, "batch_size: 0 is not in", "max_wait: 0s must be positive",
				"dead_letter_topic: must differ", `start_offset: "middle"`, "features[1]: empty name",
				`features[2]: "_p" starts with "_"`, `ingest.features[3]: column name "a" is already used by ingest.features[0]`,
			},
		},
		{
			name: "csv without header needs indices",
			mutate: func(c *Config) {
				c.Format = FormatCSV
				c.Features = []string{"temp", "-1", "01", "2"}
				c.Uncertainty = &Uncertainty{Suffix: "_sd"}
				c.CSVDelimiter = ";;"
			},
			want: []string{
				`features[0]: "temp" is not a 0-based column index`, `features[1]: "-1" is not`, `features[2]: "01" is not`,
				"uncertainty.suffix: needs csv_header", `csv_delimiter: ";;" must be one character`,
			},
		},
		{
			name: "csv header problems",
			mutate: func(c *Config) {
				c.Format = FormatCSV
				c.CSVHeader = []string{"a", "b", "a", ""}
				c.Features = []string{"a", "c", "9"}
				c.KeyField = "zz"
			},
			want: []string{
				`csv_header[2]: "a" appears twice`, "csv_header[3]: empty name",
				`features[1]: "c" is neither a csv_header name nor`, "features[2]: column index 9 is beyond", `key_field: "zz"`,
			},
		},
		{
			name: "uncertainty problems",
			mutate: func(c *Config) {
				c.Features = []string{"a", "b", "a_sd"}
				c.Uncertainty = &Uncertainty{Fields: map[string]string{"zz": "q", "a": "x..y"}, Default: ptr(math.Inf(1))}
			},
			want: []string{
				`column name "a_sd" is already used by ingest.features[0] (its uncertainty column)`,
				"uncertainty.default: +Inf must be finite", `uncertainty.fields: "zz" is not a feature`,
				`uncertainty.fields["a"]: "x..y" has an empty path segment`,
			},
		},
		{
			// The value read as its own standard deviation: every record's temp was as
			// uncertain as it was large, without a word.
			name: "a feature's uncertainty field is the feature itself",
			mutate: func(c *Config) {
				c.Features = []string{"a", "b"}
				c.Uncertainty = &Uncertainty{Fields: map[string]string{"a": "a", "b": "eb"}}
			},
			want: []string{`uncertainty.fields["a"]: "a" is the feature's own field`},
		},
		{
			name: "uncertainty without a source",
			mutate: func(c *Config) {
				c.Features = []string{"a", "b"}
				c.Uncertainty = &Uncertainty{Fields: map[string]string{"a": "ea"}}
			},
			want: []string{`feature "b" has no uncertainty field`},
		},
		{
			name: "empty uncertainty",
			mutate: func(c *Config) {
				c.Uncertainty = &Uncertainty{}
			},
			want: []string{"uncertainty: set suffix, fields or default"},
		},
		{
			name: "json path conflicts and logfmt keys",
			mutate: func(c *Config) {
				c.Features = []string{"s", "s.t"}
			},
			want: []string{`JSON path "s" is a prefix of "s.t"`},
		},
		{
			name: "a suffixed uncertainty column not in csv_header",
			mutate: func(c *Config) {
				c.Format, c.Features = FormatCSV, []string{"a", "b", "c"}
				c.CSVHeader = []string{"a", "b", "c", "b_sd", "a_err"}
				c.Uncertainty = &Uncertainty{Suffix: "_sd", Fields: map[string]string{"a": "a_err"}}
			},
			want: []string{`uncertainty.suffix: column "c_sd" (for feature "c") is not in csv_header and there is no default`},
		},
		{
			// The empty feature's uncertainty path ("" + "b") is no prefix of "b.c" to report.
			name: "an empty feature's fields not in the json path check",
			mutate: func(c *Config) {
				c.Features = []string{"", "b.c"}
				c.Uncertainty = &Uncertainty{Suffix: "b"}
			},
			want: []string{"features[0]: empty name"},
		},
		{
			name: "logfmt key syntax and csv_header misuse",
			mutate: func(c *Config) {
				c.Format = FormatLogfmt
				c.Features = []string{"a b"}
				c.CSVHeader = []string{"x"}
			},
			want: []string{`features[0]: "a b" is not a logfmt key`, "csv_header: only for format"},
		},
		{
			// 1ns heartbeat kafka-go's member flat out: a third of a core, the broker flooded.
			name: "heartbeat below its floor",
			mutate: func(c *Config) {
				c.HeartbeatInterval = time.Nanosecond
			},
			want: []string{"heartbeat_interval: 1ns must be at least 100ms (shorter only loads the broker)"},
		},
		{
			name: "group timing",
			mutate: func(c *Config) {
				c.HeartbeatInterval = 5 * time.Second
				c.SessionTimeout = 6 * time.Second
				c.FetchMaxBytes = 10
			},
			want: []string{"session_timeout: 6s must be at least 3 x", "fetch_max_bytes: 10 is below"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := testConfig(FormatJSON, []string{"x"}, tc.mutate)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing problem %q in:\n%v", w, err)
				}
			}
			if len(lines) != len(tc.want) {
				t.Errorf("%d problems reported, want %d:\n%v", len(lines), len(tc.want), err)
			}
		})
	}
}

// TestConfigYAMLStrict decodes a full config the way the lead's loader does (strict, on top of
// Default) and checks every key lands in its field.
func TestConfigYAMLStrict(t *testing.T) {
	t.Parallel()
	src := `
brokers: ["k1:9092", "k2:9092"]
topic: readings
group_id: outlierd
start_offset: latest
format: csv
features: [temp, hum]
csv_header: [id, temp, temp_sd, hum, hum_sd, ts]
csv_delimiter: ";"
uncertainty:
  suffix: _sd
  fields: {hum: hum_sd}
  default: 0.25
key_field: id
event_time_field: ts
event_time_zone: Europe/Berlin
batch_size: 500
max_wait: 250ms
dead_letter_topic: readings-dlq
fetch_max_bytes: 2097152
heartbeat_interval: 1s
session_timeout: 10s
`
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.MaxWait != 250*time.Millisecond || c.BatchSize != 500 || c.CSVDelimiter != ";" || c.Uncertainty.Fields["hum"] != "hum_sd" ||
		*c.Uncertainty.Default != 0.25 || c.SessionTimeout != 10*time.Second || c.StartOffset != StartLatest || len(c.Brokers) != 2 ||
		c.EventTimeZone != "Europe/Berlin" {
		t.Errorf("decoded %+v", c)
	}
	bad := Default()
	dec = yaml.NewDecoder(strings.NewReader("topic: x\nbatchsize: 3\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&bad); err == nil {
		t.Error("strict decoding accepted the unknown key batchsize")
	}
}
