package ingest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestFieldsAgreeWithDecoder: Config.Fields is what the decoder does. In each format, a record
// of exactly the listed fields decodes; one without a Required field is refused naming it
// (`missing`), one without any other listed field decodes (its fill or uncertainty.default
// stands in). And each field's Key is the key Validate names when a CSV header lacks the
// field, but for an uncertainty suffix with a default (its column may be absent). produce and
// replay check a file's columns by it before any record is read.
func TestFieldsAgreeWithDecoder(t *testing.T) {
	t.Parallel()
	base := func(format Format, def *float64) Config {
		return testConfig(format, []string{"a", "b", "c"}, func(c *Config) {
			c.Missing, c.Fill = MissingFill, map[string]float64{"b": 0}
			c.Uncertainty = &Uncertainty{Suffix: "_sd", Fields: map[string]string{"a": "a_err"}, Default: def}
			c.KeyField, c.EventTimeField = "id", "ts"
		})
	}
	want := []Field{
		{`ingest.features[0]`, "a", "a", true, roleFeature}, {`ingest.uncertainty.fields["a"]`, "a_err", "a", true, roleSD},
		{`ingest.features[1]`, "b", "b", false, roleFeature}, {`ingest.uncertainty.suffix`, "b_sd", "b", true, roleSD},
		{`ingest.features[2]`, "c", "c", true, roleFeature}, {`ingest.uncertainty.suffix`, "c_sd", "c", true, roleSD},
		{`ingest.key_field`, "id", "", true, roleKey}, {`ingest.event_time_field`, "ts", "", true, roleTime},
	}
	if c := base(FormatJSON, nil); !slices.Equal(c.Fields(), want) {
		t.Fatalf("Fields:\n got %v\nwant %v", c.Fields(), want)
	}
	onlyDefault := func(format Format) Config { // no uncertainty field: every one the default
		return testConfig(format, []string{"a", "b"}, func(c *Config) { c.Uncertainty = &Uncertainty{Default: ptr(0.5)} })
	}
	for _, format := range []Format{FormatJSON, FormatLogfmt, FormatCSV} {
		for _, cfg := range []Config{base(format, nil), base(format, ptr(0.5)), onlyDefault(format)} {
			fields := cfg.Fields()
			var names []string
			for _, f := range fields {
				names = append(names, f.Name)
			}
			if format == FormatCSV {
				cfg.CSVHeader = names
			}
			dec := mustDecoder(t, cfg)
			out := cfg.NewDecoded()
			for i := -1; i < len(fields); i++ { // -1: none left out
				rec := record(format, names, i)
				err := dec.Decode([]byte(rec), out)
				var fe *FieldError
				switch {
				case i < 0 || !fields[i].Required:
					if err != nil {
						t.Errorf("%s %q: %v (want it decoded)", format, rec, err)
					}
				case !errors.As(err, &fe) || *fe != (FieldError{Field: fields[i].Name, Reason: ReasonMissing, Problem: "missing"}):
					t.Errorf("%s %q: %v, want %q missing", format, rec, err, fields[i].Name)
				}
			}
			if format != FormatCSV {
				continue
			}
			for i, f := range fields {
				c := cfg
				c.CSVHeader = slices.Delete(slices.Clone(names), i, i+1)
				err := c.Validate()
				if optional := f.Key == "ingest.uncertainty.suffix" && !f.Required; optional != (err == nil) ||
					!optional && !strings.Contains(err.Error(), f.Key+": ") {
					t.Errorf("csv_header without %q (%s): %v", f.Name, f.Key, err)
				}
			}
		}
	}
}

// record writes one record of the fields names in format, the one at skip left out (an empty
// CSV field); numbers but for the key.
func record(format Format, names []string, skip int) string {
	var parts []string
	for i, n := range names {
		v := "1"
		if n == "id" {
			v = "k"
		}
		switch {
		case i == skip && format == FormatCSV:
			parts = append(parts, "")
		case i == skip:
		case format == FormatCSV:
			parts = append(parts, v)
		case format == FormatJSON && v == "k":
			parts = append(parts, fmt.Sprintf("%q:%q", n, v))
		case format == FormatJSON:
			parts = append(parts, fmt.Sprintf("%q:%s", n, v))
		default:
			parts = append(parts, n+"="+v)
		}
	}
	switch format {
	case FormatJSON:
		return "{" + strings.Join(parts, ",") + "}"
	case FormatCSV:
		return strings.Join(parts, ",")
	}
	return strings.Join(parts, " ")
}

// TestLabel: a Label is read after the features, into Values[len(Features)]: true and false as
// 1 and 0 (JSON's literals; in CSV and logfmt the word in any case, quoted or not) besides
// numbers; a JSON string "true", other words, and a boolean in a feature stay refused as not
// numbers. A missing label is reported after the features and before the key, takes no fill
// value and no uncertainty, and adds no other way for a record to fail.
func TestLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		format Format
		mutate func(*Config)
		in     string
		want   float32
		err    string
	}{
		{FormatJSON, nil, `{"t":1,"l":true}`, 1, ""},
		{FormatJSON, nil, `{"t":1,"l":false}`, 0, ""},
		{FormatJSON, nil, `{"t":1,"l":2.5}`, 2.5, ""},
		{FormatJSON, nil, `{"t":1,"l":"true"}`, 0, `field "l": not a number: "true"`},
		{FormatJSON, nil, `{"t":true,"l":1}`, 0, `field "t": not a number: true`},
		{FormatCSV, nil, "1,True", 1, ""},
		{FormatCSV, nil, "1, FALSE ", 0, ""},
		{FormatCSV, nil, `1,"true"`, 1, ""},
		{FormatCSV, nil, "1,yes", 0, `field "l": not a number: "yes"`},
		{FormatCSV, nil, "1,truee", 0, `field "l": not a number: "truee"`},
		{FormatCSV, nil, "true,1", 0, `field "t": not a number: "true"`},
		{FormatLogfmt, nil, `t=1 l="tRUE"`, 1, ""},
		{FormatLogfmt, nil, `t=1 l=0`, 0, ""},
		{FormatJSON, func(c *Config) { c.KeyField = "k" }, `{"t":1}`, 0, `field "l": missing`},
		{FormatJSON, func(c *Config) { c.Missing, c.Fill = MissingFill, map[string]float64{"t": 0} }, `{}`, 0, `field "l": missing`},
		{FormatJSON, func(c *Config) { c.Uncertainty = &Uncertainty{Suffix: "_sd"} }, `{"t":1,"t_sd":0.5,"l":1}`, 1, ""},
		{FormatJSON, func(c *Config) { c.Uncertainty = &Uncertainty{Suffix: "_sd"} }, `{"t":1,"t_sd":0.5}`, 0, `field "l": missing`},
	} {
		cfg := testConfig(c.format, []string{"t"}, c.mutate)
		if c.format == FormatCSV {
			cfg.CSVHeader = []string{"t", "l"}
		}
		dec := mustDecoder(t, cfg, Label("l"))
		out := &Decoded{Values: make([]float32, 2)}
		if cfg.Uncertainty != nil {
			out.SD = []float32{-1, -1}
		}
		err := dec.Decode([]byte(c.in), out)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%s %q: %v, want %s", c.format, c.in, err, c.err)
			}
		case err != nil || out.Values[1] != c.want:
			t.Errorf("%s %q: %v, %v; want %v", c.format, c.in, out.Values, err, c.want)
		case out.SD != nil && out.SD[1] != -1:
			t.Errorf("%s %q: the label's uncertainty was written: %v", c.format, c.in, out.SD)
		}
	}
}
