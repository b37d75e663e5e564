package ingest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// testConfig returns a valid config for format with the given features; mutate adjusts it.
func testConfig(format Format, features []string, mutate func(*Config)) Config {
	c := Default()
	c.Topic, c.GroupID = "in", "g"
	c.Format = format
	c.Features = features
	if mutate != nil {
		mutate(&c)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// mustDecoder is cfg's decoder, made as the source and replay make it (cfg must pass Check).
func mustDecoder(t testing.TB, cfg Config, opts ...DecoderOption) Decoder {
	t.Helper()
	k, err := cfg.Check()
	if err != nil {
		t.Fatal(err)
	}
	return k.NewDecoder(opts...)
}

// decodeCase is one message and what decoding it must give.
type decodeCase struct {
	name    string
	in      string
	values  []float32
	sd      []float32 // nil: not checked
	key     string    // checked when hasKey
	hasKey  bool
	timeMS  int64 // checked when hasTime
	hasTime bool
	err     string // exact error text; "" = success
}

func runDecodeCases(t *testing.T, cfg Config, cases []decodeCase) {
	t.Helper()
	dec := mustDecoder(t, cfg)
	out := cfg.NewDecoded()
	for _, tc := range cases {
		err := dec.Decode([]byte(tc.in), out)
		if tc.err != "" {
			if err == nil {
				t.Errorf("%s: Decode(%q) = nil error, want %q", tc.name, tc.in, tc.err)
			} else if err.Error() != tc.err {
				t.Errorf("%s: Decode(%q) error\n got %q\nwant %q", tc.name, tc.in, err.Error(), tc.err)
			}
			if fe := (*FieldError)(nil); errors.As(err, &fe) && fe.Reason == 0 {
				t.Errorf("%s: Decode(%q): %v has no Reason", tc.name, tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Decode(%q): %v", tc.name, tc.in, err)
			continue
		}
		if !slices.Equal(out.Values, tc.values) {
			t.Errorf("%s: values %v, want %v", tc.name, out.Values, tc.values)
		}
		if tc.sd != nil && !slices.Equal(out.SD, tc.sd) {
			t.Errorf("%s: sd %v, want %v", tc.name, out.SD, tc.sd)
		}
		if out.HasKey != tc.hasKey || (tc.hasKey && string(out.Key) != tc.key) {
			t.Errorf("%s: key %q (has %v), want %q (has %v)", tc.name, out.Key, out.HasKey, tc.key, tc.hasKey)
		}
		if out.HasEventTime != tc.hasTime || (tc.hasTime && out.EventTime != tc.timeMS) {
			t.Errorf("%s: time %d (has %v), want %d (has %v)", tc.name, out.EventTime, out.HasEventTime, tc.timeMS, tc.hasTime)
		}
	}
}

var tsMS = time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC).UnixMilli()

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatJSON, []string{"temp", "sensor.hum"}, nil)
	runDecodeCases(t, cfg, []decodeCase{
		{name: "plain", in: `{"temp": 21.5, "sensor": {"hum": 40}}`, values: []float32{21.5, 40}},
		{name: "extra fields skipped", in: `{"a":[1,{"b":null}],"temp":-1e2,"x":"y\"z","sensor":{"q":true,"hum":0.25},"z":{}}`, values: []float32{-100, 0.25}},
		{name: "whitespace", in: " \n{ \"temp\" :1 , \"sensor\":{\"hum\":2} } \t", values: []float32{1, 2}},
		{name: "a feature repeated", in: `{"temp":1,"temp":2,"sensor":{"hum":3}}`, err: `field "temp": repeated in one object (which of its values is meant is unknown)`},
		{name: "escaped key", in: `{"t\u0065mp":7,"sensor":{"hum":8}}`, values: []float32{7, 8}},
		{name: "missing", in: `{"sensor":{"hum":1}}`, err: `field "temp": missing`},
		{name: "missing nested", in: `{"temp":1,"sensor":{}}`, err: `field "sensor.hum": missing`},
		{name: "parent not an object", in: `{"temp":1,"sensor":5}`, err: `field "sensor.hum": missing`},
		{name: "string", in: `{"temp":"abc","sensor":{"hum":1}}`, err: `field "temp": not a number: "abc"`},
		{name: "numeric string refused", in: `{"temp":"12.5","sensor":{"hum":1}}`, err: `field "temp": not a number: "12.5"`},
		{name: "boolean refused", in: `{"temp":true,"sensor":{"hum":1}}`, err: `field "temp": not a number: true`},
		{name: "null refused", in: `{"temp":null,"sensor":{"hum":1}}`, err: `field "temp": not a number: null`},
		{name: "object refused", in: `{"temp":{"v":1},"sensor":{"hum":1}}`, err: `field "temp": not a number: an object`},
		{name: "float32 overflow", in: `{"temp":1e39,"sensor":{"hum":1}}`, err: `field "temp": out of float32 range: 1e+39`},
		{name: "float64 overflow", in: `{"temp":1e400,"sensor":{"hum":1}}`, err: `field "temp": out of range: "1e400"`},
		{name: "invalid after value", in: `{"temp": 21.5 "sensor": 1}`, err: `invalid JSON at byte 14: expected ',' or '}' after an object value`},
		{name: "truncated", in: `{"temp": 21.5, "sensor": {"hum"`, err: `invalid JSON at byte 31: expected ':' after an object key`},
		{name: "not an object", in: `[1,2]`, err: `invalid JSON at byte 0: expected a JSON object`},
		{name: "empty", in: ``, err: `invalid JSON at byte 0: expected a JSON object`},
		{name: "trailing data", in: `{"temp":1,"sensor":{"hum":2}}x`, err: `invalid JSON at byte 29: unexpected data after the top-level object`},
		{name: "bad number", in: `{"temp":01,"sensor":{"hum":2}}`, err: `invalid JSON at byte 9: expected ',' or '}' after an object value`},
		{name: "bad number in skipped field", in: `{"x":1.,"temp":1,"sensor":{"hum":2}}`, err: `invalid JSON at byte 7: invalid number: digit expected after '.'`},
		{name: "bad escape", in: `{"x":"\q","temp":1,"sensor":{"hum":2}}`, err: `invalid JSON at byte 6: invalid escape in string`},
		{name: "control char", in: "{\"x\":\"a\x01\",\"temp\":1}", err: `invalid JSON at byte 7: control character in string`},
		{name: "bad literal", in: `{"x":tru,"temp":1}`, err: `invalid JSON at byte 5: expected a value`},
		{name: "trailing comma", in: `{"temp":1,"sensor":{"hum":2},}`, err: `invalid JSON at byte 29: expected a string key`},
		{name: "deep nesting", in: deepJSON(maxJSONDepth + 5), err: `invalid JSON at byte 1004: nesting too deep`},
	})
}

// deepJSON is {"x":[[[...]]]} nested n levels.
func deepJSON(n int) string {
	b := []byte(`{"x":`)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(append(b, '}'))
}

func TestDecodeJSONKeyTimeUncertainty(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatJSON, []string{"a", "b", "c"}, func(c *Config) {
		c.KeyField = "meta.id"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Fields: map[string]string{"b": "err.b"}, Default: ptr(0.5)}
	})
	runDecodeCases(t, cfg, []decodeCase{
		{
			name: "all present", in: `{"a":1,"a_sd":0.1,"b":2,"err":{"b":0.2},"c":3,"c_sd":0.3,"meta":{"id":"dev-\u00e9"},"ts":"2026-11-21T05:00:00Z"}`,
			values: []float32{1, 2, 3}, sd: []float32{0.1, 0.2, 0.3}, key: "dev-é", hasKey: true, timeMS: tsMS, hasTime: true,
		},
		{
			name: "default uncertainty, numeric key, epoch ms", in: `{"a":1,"b":2,"c":3,"meta":{"id":42},"ts":1700000000123}`,
			values: []float32{1, 2, 3}, sd: []float32{0.5, 0.5, 0.5}, key: "42", hasKey: true, timeMS: 1700000000123, hasTime: true,
		},
		{name: "negative uncertainty", in: `{"a":1,"a_sd":-1,"b":2,"c":3,"meta":{"id":1},"ts":1}`, err: `field "a_sd": uncertainty must be >= 0: -1`},
		{name: "key missing", in: `{"a":1,"b":2,"c":3,"ts":1}`, err: `field "meta.id": missing`},
		{name: "key an object", in: `{"a":1,"b":2,"c":3,"meta":{"id":{}},"ts":1}`, err: `field "meta.id": key must be a string or a number, got an object`},
		{name: "time not integer", in: `{"a":1,"b":2,"c":3,"meta":{"id":1},"ts":1.5}`, err: `field "ts": epoch milliseconds must be an integer: "1.5"`},
		{name: "time bad string", in: `{"a":1,"b":2,"c":3,"meta":{"id":1},"ts":"yesterday"}`, err: `field "ts": not an RFC 3339 time, a time as "2006-01-02 15:04:05" (UTC without an offset) or epoch milliseconds: "yesterday"`},
		{name: "time missing", in: `{"a":1,"b":2,"c":3,"meta":{"id":1}}`, err: `field "ts": missing`},
	})
	// Without a default, a missing uncertainty field is an error.
	cfg.Uncertainty.Default = nil
	runDecodeCases(t, cfg, []decodeCase{
		{name: "no default", in: `{"a":1,"b":2,"err":{"b":0.2},"c":3,"c_sd":0.3,"meta":{"id":1},"ts":1}`, err: `field "a_sd": missing`},
	})
}

func TestDecodeCSV(t *testing.T) {
	t.Parallel()
	named := testConfig(FormatCSV, []string{"temp", "hum"}, func(c *Config) {
		c.CSVHeader = []string{"id", "temp", "temp_sd", "hum", "ts"}
		c.KeyField = "id"
		c.EventTimeField = "ts"
		// hum_sd is not a column: hum's uncertainty is always the default.
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(1.0)}
	})
	runDecodeCases(t, named, []decodeCase{
		{name: "plain", in: "dev1,21.5,0.1,40,1700000000000\n", values: []float32{21.5, 40}, sd: []float32{0.1, 1},
			key: "dev1", hasKey: true, timeMS: 1700000000000, hasTime: true},
		{name: "quoted, CRLF, spaces", in: "\"dev,\"\"1\"\"\", 2 ,\"0.5\",3,2026-11-21T05:00:00Z\r\n", values: []float32{2, 3}, sd: []float32{0.5, 1},
			key: `dev,"1"`, hasKey: true, timeMS: tsMS, hasTime: true},
		{name: "quoted newline", in: "\"a\nb\",2,0.5,3,5", values: []float32{2, 3}, sd: []float32{0.5, 1}, key: "a\nb", hasKey: true, timeMS: 5, hasTime: true},
		{name: "empty uncertainty takes the default", in: "d,2,,3,5", values: []float32{2, 3}, sd: []float32{1, 1}, key: "d", hasKey: true, timeMS: 5, hasTime: true},
		{name: "too few columns", in: "d,2,0.1,3", err: `invalid CSV at byte 0: 4 columns, csv_header has 5`},
		{name: "not a number", in: "d,abc,0.1,3,5", err: `field "temp": not a number: "abc"`},
		{name: "NaN", in: "d,NaN,0.1,3,5", err: `field "temp": NaN/Inf not allowed`},
		{name: "Inf", in: "d,-Inf,0.1,3,5", err: `field "temp": NaN/Inf not allowed`},
		{name: "hex refused", in: "d,0x1p3,0.1,3,5", err: `field "temp": not a number: "0x1p3"`},
		{name: "empty feature", in: "d,,0.1,3,5", err: `field "temp": missing`},
		{name: "bare quote", in: "d,1\"2,0.1,3,5", err: `invalid CSV at byte 3: bare " in an unquoted field`},
		{name: "unterminated quote", in: "d,\"12,0.1,3,5", err: `invalid CSV at byte 2: unterminated quoted field`},
		{name: "junk after quote", in: "d,\"1\"x,0.1,3,5", err: `invalid CSV at byte 5: expected ',' or the end of the line after a closing quote`},
	})
	indexed := testConfig(FormatCSV, []string{"2", "0"}, func(c *Config) { c.CSVDelimiter = ";" })
	runDecodeCases(t, indexed, []decodeCase{
		{name: "indices", in: "1.5;x;2.5", values: []float32{2.5, 1.5}},
		{name: "extra columns fine without header", in: "1;2;3;4;5", values: []float32{3, 1}},
		{name: "short line", in: "1;2", err: `field "2": missing`},
	})
}

func TestDecodeLogfmt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatLogfmt, []string{"temp", "hum"}, func(c *Config) {
		c.KeyField = "dev"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.0)}
	})
	runDecodeCases(t, cfg, []decodeCase{
		{name: "plain", in: `level=info dev=d1 temp=21.5 temp_sd=0.5 hum=40 ts=2026-11-21T05:00:00Z msg="a reading"`,
			values: []float32{21.5, 40}, sd: []float32{0.5, 0}, key: "d1", hasKey: true, timeMS: tsMS, hasTime: true},
		{name: "quoted values and escapes", in: "dev=\"dev \\\"x\\\"\" temp=\"-3e1\" hum=1 ts=12 flag\n",
			values: []float32{-30, 1}, sd: []float32{0, 0}, key: `dev "x"`, hasKey: true, timeMS: 12, hasTime: true},
		{name: "a feature repeated", in: `dev=a temp=1 temp=2 hum=3 ts=1`, err: `field "temp": repeated in one message (which of its values is meant is unknown)`},
		{name: "missing", in: `dev=a temp=1 ts=1`, err: `field "hum": missing`},
		{name: "flag is missing", in: `dev=a temp hum=1 ts=1`, err: `field "temp": missing`},
		{name: "not a number", in: `dev=a temp=warm hum=1 ts=1`, err: `field "temp": not a number: "warm"`},
		{name: "NaN", in: `dev=a temp=NaN hum=1 ts=1`, err: `field "temp": NaN/Inf not allowed`},
		{name: "negative sd", in: `dev=a temp=1 temp_sd=-2 hum=1 ts=1`, err: `field "temp_sd": uncertainty must be >= 0: -2`},
		{name: "unterminated", in: `dev=a temp="1 hum=1`, err: `invalid logfmt at byte 11: unterminated quoted value`},
		{name: "no key", in: `dev=a =1`, err: `invalid logfmt at byte 6: '=' without a key`},
		{name: "quote in bare value", in: `dev=a temp=1"2`, err: `invalid logfmt at byte 12: unexpected '"' in an unquoted value`},
		{name: "junk after quote", in: `dev="a"b temp=1`, err: `invalid logfmt at byte 7: expected a space after a closing quote`},
	})
}

func TestDecodeErrorTypes(t *testing.T) {
	t.Parallel()
	dec := mustDecoder(t, testConfig(FormatJSON, []string{"x"}, nil))
	out := &Decoded{Values: make([]float32, 1)}
	var fe *FieldError
	if err := dec.Decode([]byte(`{"x":"1"}`), out); !errors.As(err, &fe) || fe.Field != "x" {
		t.Errorf("want a *FieldError for x, got %v", err)
	}
	var se *SyntaxError
	if err := dec.Decode([]byte(`{"x":1`), out); !errors.As(err, &se) || se.Offset != 6 || se.Format != "JSON" {
		t.Errorf("want a *SyntaxError at byte 6, got %#v", err)
	}
}

// TestDecodeJSONKeyOrderMemo: one decoder fed messages whose layouts repeat, change, grow,
// shrink and nest (the key-order memo hits, misses and is replaced; distinct unwanted keys
// overflow its byte budget) decodes each exactly as a fresh decoder does.
func TestDecodeJSONKeyOrderMemo(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatJSON, []string{"a", "b", "s.c"}, func(c *Config) {
		c.KeyField = "s.id"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.5)}
	})
	long := mustDecoder(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{`"a":1.5`, `"a_sd":0.25`, `"b":-2`, `"b_sd":1`, `"s":{"c":3,"id":"k"}`, `"s":{"id":7,"c":4,"x":[1]}`,
		`"ab":9`, `"":0`, `"\u0061":8`, `"a_s":5`, `"s":{"c":"no"}`, `"b":true`}
	for m := range 3000 {
		var fields []string
		switch {
		case m%3 != 0 && m > 0: // the layout of message 0 again
			fields = parts[:5]
		default:
			for range 1 + rng.IntN(9) {
				fields = append(fields, parts[rng.IntN(len(parts))])
			}
			if m%7 == 0 { // a new unwanted key: the memo's byte budget fills and is reset
				fields = append(fields[:len(fields)/2], append([]string{fmt.Sprintf(`"u%d_%s":0`, m, strings.Repeat("z", 200))}, fields[len(fields)/2:]...)...)
			}
		}
		msg := []byte("{" + strings.Join(fields, ",") + "}")
		fresh := mustDecoder(t, cfg)
		want, got := cfg.NewDecoded(), cfg.NewDecoded()
		errW, errG := fresh.Decode(msg, want), long.Decode(msg, got)
		if fmt.Sprint(errW) != fmt.Sprint(errG) || (errW == nil && !reflect.DeepEqual(want, got)) {
			t.Fatalf("message %d %s: fresh decoder %+v, %v; long-lived %+v, %v", m, msg, want, errW, got, errG)
		}
	}
}
