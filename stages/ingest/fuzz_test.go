package ingest

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// checkDecoded fails when an accepted record carries a value the contract forbids.
func checkDecoded(t *testing.T, in []byte, out *Decoded) {
	t.Helper()
	for i, v := range out.Values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("Decode(%q) accepted non-finite value %v for feature %d", in, v, i)
		}
	}
	for i, v := range out.SD {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
			t.Fatalf("Decode(%q) accepted uncertainty %v for feature %d", in, v, i)
		}
	}
}

// checkDecodeError fails when a refusal is not one of the decoders' two errors, or a field's
// has no Reason (callers act on it).
func checkDecodeError(t *testing.T, in []byte, err error) {
	t.Helper()
	var fe *FieldError
	var se *SyntaxError
	if errors.As(err, &fe) && fe.Reason == 0 || !errors.As(err, &fe) && !errors.As(err, &se) {
		t.Fatalf("Decode(%q): %#v: want a *SyntaxError or a *FieldError with a Reason", in, err)
	}
}

func fuzzDecoder(f *testing.F, cfg Config) (Decoder, *Decoded) {
	dec := mustDecoder(f, cfg)
	return dec, cfg.NewDecoded()
}

// FuzzDecodeJSON checks that the scanner never panics, accepts only finite values, and agrees
// with encoding/json: it accepts only valid JSON, refuses valid JSON objects only for field
// reasons (never a syntax error, unless nested deeper than maxJSONDepth), and reads the same
// numbers encoding/json reads.
func FuzzDecodeJSON(f *testing.F) {
	cfg := testConfig(FormatJSON, []string{"a", "s.b"}, func(c *Config) {
		c.KeyField = "k"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.5)}
	})
	dec, out := fuzzDecoder(f, cfg)
	for _, s := range []string{
		`{"a":1,"s":{"b":2},"k":"x","ts":5}`,
		`{"a":1e3,"a_sd":0.1,"s":{"b":-0.0,"b_sd":2},"k":3,"ts":"2026-01-02T03:04:05Z","z":[1,{"q":null}]}`,
		`{"a":"1","s":{"b":2}}`, `{"a":1,"s":{"b":2}`, `{"\u0061":1,"s":{"b":1e39},"k":"\ud83d\ude00","ts":1}`,
		`{"a":1,"s":{"b":2},"k":"x","ts":"2020-03-09 10:34:33+01:00"}`, `[]`, `{}`, `{"a":01}`, ` {"a" : 1 , "s" : { "b" : 2 } , "k" : "" , "ts" : -1 } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		err := dec.Decode(in, out)
		valid := json.Valid(in)
		if err == nil {
			checkDecoded(t, in, out)
			if !valid {
				t.Fatalf("accepted invalid JSON %q", in)
			}
			var m map[string]any
			if err := json.Unmarshal(in, &m); err != nil {
				t.Fatalf("accepted %q, encoding/json: %v", in, err)
			}
			a, _ := m["a"].(float64)
			s, _ := m["s"].(map[string]any)
			b, _ := s["b"].(float64)
			if float32(a) != out.Values[0] || float32(b) != out.Values[1] {
				t.Fatalf("%q: values %v, encoding/json reads %v %v", in, out.Values, a, b)
			}
			return
		}
		checkDecodeError(t, in, err)
		var se *SyntaxError
		if errors.As(err, &se) && valid && strings.HasPrefix(strings.TrimLeft(string(in), " \t\r\n"), "{") && se.Msg != "nesting too deep" {
			t.Fatalf("syntax error %v for valid JSON %q", err, in)
		}
	})
}

func FuzzDecodeCSV(f *testing.F) {
	cfg := testConfig(FormatCSV, []string{"a", "b"}, func(c *Config) {
		c.CSVHeader = []string{"k", "a", "a_sd", "b", "ts"}
		c.KeyField = "k"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(1.0)}
	})
	dec, out := fuzzDecoder(f, cfg)
	for _, s := range []string{
		"x,1,0.1,2,5\n", "\"x,\"\"y\",1,,2,2026-01-02T03:04:05Z\r\n", "x,NaN,1,2,3", "x,1,-1,2,3", "x,\"1\n2\",1,2,3", ",,,,", "x,1e39,1,2,3",
		"x,1,,2,2020-03-09 10:34:33.25+01\n", "x,1,,2, 2020-03-09T10:34:33 ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := dec.Decode(in, out); err != nil {
			checkDecodeError(t, in, err)
		} else {
			checkDecoded(t, in, out)
		}
	})
}

func FuzzDecodeLogfmt(f *testing.F) {
	cfg := testConfig(FormatLogfmt, []string{"a", "b"}, func(c *Config) {
		c.KeyField = "k"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(1.0)}
	})
	dec, out := fuzzDecoder(f, cfg)
	for _, s := range []string{
		"k=x a=1 b=2 ts=5", `k="a \"b\"" a="1" a_sd=0.5 b=-2e3 ts=2026-01-02T03:04:05Z msg="hi there"`, "a=NaN b=1 k=1 ts=1",
		"a b=1", `a="1`, "=1", "a=1\"", "a=1 b=1 k= ts=1",
		`a=1 b=2 k=x ts="2020-03-09 10:34:33.5"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := dec.Decode(in, out); err != nil {
			checkDecodeError(t, in, err)
		} else {
			checkDecoded(t, in, out)
		}
	})
}
