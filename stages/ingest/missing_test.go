package ingest

import (
	"strings"
	"testing"
)

// TestMissingValues: csv_missing texts are missing values like the empty field; under missing:
// dead_letter (the default) such a record is refused naming the field (the pipeline sends it
// to the dead-letter topic with that reason), under missing: fill the feature takes its fill
// value, and a feature without one is still refused; the JSON decoder fills an absent field.
func TestMissingValues(t *testing.T) {
	t.Parallel()
	csvCfg := func(policy MissingPolicy, fill map[string]float64) Config {
		return testConfig(FormatCSV, []string{"temp", "hum"}, func(c *Config) {
			c.CSVHeader = []string{"id", "temp", "hum"}
			c.CSVDelimiter = ";"
			c.Missing, c.Fill = policy, fill
		})
	}
	runDecodeCases(t, csvCfg(MissingDeadLetter, nil), []decodeCase{
		{name: "NA is missing", in: "d;NA;3", err: `field "temp": missing`},
		{name: "null with spaces is missing", in: "d; null ;3", err: `field "temp": missing`},
		{name: "N/A in the second feature", in: "d;2;N/A", err: `field "hum": missing`},
		{name: "a value", in: "d;2;3", values: []float32{2, 3}},
	})
	runDecodeCases(t, csvCfg(MissingFill, map[string]float64{"temp": 20}), []decodeCase{
		{name: "NA filled", in: "d;NA;3", values: []float32{20, 3}},
		{name: "empty filled", in: "d;;3", values: []float32{20, 3}},
		{name: "no fill for hum", in: "d;2;NA", err: `field "hum": missing`},
		{name: "not a number is not missing", in: "d;abc;3", err: `field "temp": not a number: "abc"`},
	})
	custom := csvCfg(MissingDeadLetter, nil)
	custom.CSVMissing = []string{"-999"}
	runDecodeCases(t, custom, []decodeCase{
		{name: "sentinel is missing", in: "d;-999;3", err: `field "temp": missing`},
		{name: "NA no longer listed", in: "d;NA;3", err: `field "temp": not a number: "NA"`},
	})
	jsonFill := testConfig(FormatJSON, []string{"temp", "hum"}, func(c *Config) {
		c.Missing, c.Fill = MissingFill, map[string]float64{"temp": -1, "hum": 50}
	})
	runDecodeCases(t, jsonFill, []decodeCase{
		{name: "absent JSON field filled", in: `{"hum": 3}`, values: []float32{-1, 3}},
	})

	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Fill = map[string]float64{"temp": 1} }, `ingest.fill: only with missing: fill`},
		{func(c *Config) { c.Missing = MissingFill }, `ingest.fill: missing: fill needs a value per feature`},
		{func(c *Config) { c.Missing, c.Fill = MissingFill, map[string]float64{"pres": 1} }, `ingest.fill["pres"]: "pres" is not a feature`},
		{func(c *Config) { c.Missing = "drop" }, `ingest.missing: "drop" is not "dead_letter" or "fill"`},
		{func(c *Config) { c.CSVMissing = []string{" NA"} }, `ingest.csv_missing[0]`},
	} {
		c := csvCfg(MissingDeadLetter, nil)
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
