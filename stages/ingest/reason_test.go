package ingest

import (
	"errors"
	"strings"
	"testing"
)

// TestFieldErrorReason: each decoder gives each kind of field problem its Reason, which callers
// test instead of the message's wording (replay's hint that a text column is the key tested
// the prefix "not a number"). The same problem has the same reason in every format.
func TestFieldErrorReason(t *testing.T) {
	t.Parallel()
	// reasonCase: a record, the field whose problem it has, and the reason that problem gets.
	type reasonCase struct {
		in    string
		field string
		want  Reason
	}
	for _, c := range []struct {
		format Format
		cases  []reasonCase
	}{
		{FormatJSON, []reasonCase{
			{`{"dev":"a","temp":1,"ts":1}`, "hum", ReasonMissing},
			{`{"dev":"a","temp":"warm","hum":1,"ts":1}`, "temp", ReasonNotNumber},
			{`{"dev":"a","temp":null,"hum":1,"ts":1}`, "temp", ReasonNotNumber},
			{`{"dev":"a","temp":{"v":1},"hum":1,"ts":1}`, "temp", ReasonNotNumber},
			{`{"dev":"a","temp":1e39,"hum":1,"ts":1}`, "temp", ReasonOutOfRange},
			{`{"dev":"a","temp":1e400,"hum":1,"ts":1}`, "temp", ReasonOutOfRange},
			{`{"dev":"a","temp":1,"temp_sd":-2,"hum":1,"ts":1}`, "temp_sd", ReasonNegative},
			{`{"dev":"a","temp":1,"hum":1,"ts":"noon"}`, "ts", ReasonBadTime},
			{`{"dev":"a","temp":1,"hum":1,"ts":1.5}`, "ts", ReasonBadTime},
			{`{"dev":"a","temp":1,"hum":1,"ts":[1]}`, "ts", ReasonBadTime},
			{`{"dev":{"id":1},"temp":1,"hum":1,"ts":1}`, "dev", ReasonBadKey},
			{`{"dev":"a","temp":1,"hum":1,"hum":2,"ts":1}`, "hum", ReasonDuplicateKey},
		}},
		{FormatCSV, []reasonCase{
			{"a,1,0,,1", "hum", ReasonMissing},
			{"a,warm,0,1,1", "temp", ReasonNotNumber},
			{"a,NaN,0,1,1", "temp", ReasonNotFinite},
			{"a,1e39,0,1,1", "temp", ReasonOutOfRange},
			{"a,1e400,0,1,1", "temp", ReasonOutOfRange},
			{"a,1,-2,1,1", "temp_sd", ReasonNegative},
			{"a,1,0,1,noon", "ts", ReasonBadTime},
			{"a,1,0,1,99999999999999999999", "ts", ReasonBadTime},
		}},
		{FormatLogfmt, []reasonCase{
			{"dev=a temp=1 ts=1", "hum", ReasonMissing},
			{"dev=a temp=warm hum=1 ts=1", "temp", ReasonNotNumber},
			{"dev=a temp=Inf hum=1 ts=1", "temp", ReasonNotFinite},
			{"dev=a temp=1 temp_sd=-2 hum=1 ts=1", "temp_sd", ReasonNegative},
			{"dev=a temp=1 hum=1 ts=noon", "ts", ReasonBadTime},
			{"dev=a temp=1 hum=1 hum=1 ts=1", "hum", ReasonDuplicateKey},
		}},
	} {
		cfg := testConfig(c.format, []string{"temp", "hum"}, func(cf *Config) {
			cf.KeyField, cf.EventTimeField = "dev", "ts"
			cf.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.0)}
			if c.format == FormatCSV {
				cf.CSVHeader = []string{"dev", "temp", "temp_sd", "hum", "ts"}
			}
		})
		dec := mustDecoder(t, cfg)
		out := cfg.NewDecoded()
		for _, tc := range c.cases {
			var fe *FieldError
			if err := dec.Decode([]byte(tc.in), out); !errors.As(err, &fe) || fe.Field != tc.field || fe.Reason != tc.want {
				t.Errorf("%s %q: %v (%#v), want field %q: %s", c.format, tc.in, err, fe, tc.field, tc.want)
			}
		}
	}
}

// TestReasonString: every reason the decoders give has its name; a value they do not give
// says its number.
func TestReasonString(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for r := ReasonMissing; r <= ReasonDuplicateKey; r++ {
		// A word, as the dead letters' outlierd-reason header carries it (batch.DeadLetter.Code).
		if s := r.String(); s == "" || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz_") != "" || seen[s] || s == codeMalformed {
			t.Errorf("Reason %d: %q (empty, not a lower-case word, a name twice, or the syntax errors')", r, s)
		} else {
			seen[s] = true
		}
	}
	if s := (ReasonDuplicateKey + 1).String(); s != "reason(9)" {
		t.Errorf("an unknown reason: %q, want reason(9)", s)
	}
	if s := Reason(0).String(); s != "reason(0)" {
		t.Errorf("no reason: %q, want reason(0)", s)
	}
}
