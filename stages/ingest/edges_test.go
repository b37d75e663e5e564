package ingest

import (
	"errors"
	"testing"
)

// TestDecodeJSONDuplicateKeys: a key repeated in one object on a configured path (a feature, an
// uncertainty, the record key, the event time, or an object on such a path) made the last
// occurrence win, silently: a producer's bug (two values of one feature, which is meant?) was
// scored with one of them. Such a record is a dead letter naming the path (reason
// duplicate_key), whatever the values and in either order; a key the pipeline does not read
// may repeat (as encoding/json, it changes nothing scored), and a message that is not valid
// JSON is still a syntax error first.
func TestDecodeJSONDuplicateKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatJSON, []string{"temp", "sensor.hum"}, func(c *Config) {
		c.KeyField = "dev"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.5)}
	})
	const tail = `"sensor":{"hum":3},"dev":"d","ts":7}`
	dup := func(name, in, field string) decodeCase {
		return decodeCase{name: name, in: in, err: `field "` + field + `": repeated in one object (which of its values is meant is unknown)`}
	}
	runDecodeCases(t, cfg, []decodeCase{
		dup("feature: bad then good", `{"temp":"abc","temp":1,`+tail, "temp"),
		dup("feature: good then bad", `{"temp":1,"temp":"abc",`+tail, "temp"),
		dup("feature: twice the same", `{"temp":1,"temp":1,`+tail, "temp"),
		dup("feature: escaped spelling", `{"temp":1,"t\u0065mp":4,`+tail, "temp"),
		dup("nested feature", `{"temp":1,"sensor":{"hum":5,"hum":6},"dev":"d","ts":7}`, "sensor.hum"),
		dup("parent object", `{"temp":1,"sensor":{"hum":6},"sensor":{"hum":6},"dev":"d","ts":7}`, "sensor"),
		dup("parent: scalar then object", `{"temp":1,"sensor":5,"sensor":{"hum":6},"dev":"d","ts":7}`, "sensor"),
		dup("uncertainty", `{"temp":1,"temp_sd":0.1,"temp_sd":0.25,`+tail, "temp_sd"),
		dup("key", `{"temp":1,"sensor":{"hum":3},"dev":"a","dev":42,"ts":7}`, "dev"),
		dup("time", `{"temp":1,"sensor":{"hum":3},"dev":"d","ts":9,"ts":9}`, "ts"),
		{name: "not JSON after the repeat: a syntax error first", in: `{"temp":1,"temp":2,` + tail + `x`,
			err: "invalid JSON at byte 55: unexpected data after the top-level object"},
		{name: "unconfigured: scalar then object", in: `{"note":"x","temp":1,"note":{"y":[1]},` + tail,
			values: []float32{1, 3}, sd: []float32{0.5, 0.5}, key: "d", hasKey: true, timeMS: 7, hasTime: true},
		{name: "unconfigured, under a configured object", in: `{"temp":1,"sensor":{"hum":3,"x":1,"x":2},"dev":"d","ts":7}`,
			values: []float32{1, 3}, sd: []float32{0.5, 0.5}, key: "d", hasKey: true, timeMS: 7, hasTime: true},
		{name: "the same name in two objects", in: `{"temp":1,"sensor":{"hum":3,"temp":9},"dev":"d","ts":7}`,
			values: []float32{1, 3}, sd: []float32{0.5, 0.5}, key: "d", hasKey: true, timeMS: 7, hasTime: true},
	})
	dec := mustDecoder(t, cfg)
	var fe *FieldError
	if err := dec.Decode([]byte(`{"temp":1,"temp":2,`+tail), cfg.NewDecoded()); !errors.As(err, &fe) || fe.Reason.String() != "duplicate_key" {
		t.Errorf("a repeated feature: %v, want a FieldError of reason duplicate_key", err)
	}
	// One decoder, many messages: a path met in the previous message is not a repeat.
	for i := range 3 {
		if err := dec.Decode([]byte(`{"temp":1,`+tail), cfg.NewDecoded()); err != nil {
			t.Errorf("message %d after a repeat: %v", i, err)
		}
	}
}

// TestDecodeLogfmtDuplicateKeys: logfmt follows the JSON decoder's rule: a configured key
// repeated in one message is a dead letter naming it (duplicate_key), whatever the values; a key
// the pipeline does not read may repeat.
func TestDecodeLogfmtDuplicateKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatLogfmt, []string{"temp", "hum"}, func(c *Config) {
		c.KeyField = "dev"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.0)}
	})
	dup := func(name, in, field string) decodeCase {
		return decodeCase{name: name, in: in, err: `field "` + field + `": repeated in one message (which of its values is meant is unknown)`}
	}
	runDecodeCases(t, cfg, []decodeCase{
		dup("feature: bad then good", `dev=a temp=warm temp=2 hum=3 ts=1`, "temp"),
		dup("feature: good then bad", `dev=a temp=2 temp=warm hum=3 ts=1`, "temp"),
		dup("feature: quoted and bare", `dev=a temp=2 temp="2" hum=3 ts=1`, "temp"),
		dup("uncertainty", `dev=a temp=2 temp_sd=0.1 temp_sd=0.5 hum=3 ts=1`, "temp_sd"),
		dup("time", `dev=a temp=2 hum=3 ts=4 ts=4`, "ts"),
		dup("key", `dev=a dev=b temp=2 hum=3 ts=4`, "dev"),
		{name: "unconfigured", in: `msg=x dev=a temp=2 msg="y z" hum=3 ts=1`, values: []float32{2, 3}, sd: []float32{0, 0}, key: "a", hasKey: true, timeMS: 1, hasTime: true},
	})
}

// TestDecodeFLTMax: FLT_MAX as every language prints a float32 (3.4028235e38, its shortest
// round-trip spelling, a common "no reading" sentinel) is a float32 value and is accepted as
// FLT_MAX; only a number that rounds past it to infinity is out of range. Before, the check
// compared the float64 3.4028235e38 with FLT_MAX (3.40282346...e38) and refused it.
func TestDecodeFLTMax(t *testing.T) {
	t.Parallel()
	const fltMax = float32(3.4028234663852886e38)
	for _, format := range []Format{FormatJSON, FormatLogfmt} {
		cfg := testConfig(format, []string{"a", "b"}, nil)
		msg := func(a, b string) string {
			if format == FormatJSON {
				return `{"a":` + a + `,"b":` + b + `}`
			}
			return "a=" + a + " b=" + b
		}
		runDecodeCases(t, cfg, []decodeCase{
			{name: string(format) + ": FLT_MAX printed", in: msg("3.4028235e38", "-3.4028235e+38"), values: []float32{fltMax, -fltMax}},
			{name: string(format) + ": FLT_MAX in full", in: msg("340282346638528859811704183484516925440", "1e20"), values: []float32{fltMax, 1e20}},
			{name: string(format) + ": just below the rounding midpoint", in: msg("3.40282356779733e38", "0"), values: []float32{fltMax, 0}},
			{name: string(format) + ": past the midpoint", in: msg("3.4028236e38", "0"), err: `field "a": out of float32 range: 3.4028236e+38`},
			{name: string(format) + ": 1e39", in: msg("0", "-1e39"), err: `field "b": out of float32 range: -1e+39`},
		})
	}
}
