package ingest

import "testing"

// TestDecodeJSONDuplicateKeys: a key repeated in one object follows the documented rule, "the
// last one wins" (as encoding/json into a map), in both orders: a bad value followed by a good
// one is accepted with the good one, a good value followed by a bad one is refused for the bad
// one. Before, any bad occurrence refused the record, and a repeated parent object kept the
// fields of the first. Feature, uncertainty, key, event time and unconfigured keys.
func TestDecodeJSONDuplicateKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatJSON, []string{"temp", "sensor.hum"}, func(c *Config) {
		c.KeyField = "dev"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.5)}
	})
	const tail = `"sensor":{"hum":3},"dev":"d","ts":7}`
	ok := func(name, in string, temp, hum, tempSD, humSD float32, key string, ts int64) decodeCase {
		return decodeCase{name: name, in: in, values: []float32{temp, hum}, sd: []float32{tempSD, humSD},
			key: key, hasKey: true, timeMS: ts, hasTime: true}
	}
	runDecodeCases(t, cfg, []decodeCase{
		// A feature repeated.
		ok("feature: bad then good", `{"temp":"abc","temp":1,`+tail, 1, 3, 0.5, 0.5, "d", 7),
		{name: "feature: good then bad", in: `{"temp":1,"temp":"abc",` + tail, err: `field "temp": not a number: "abc"`},
		ok("feature: out of range then good", `{"temp":1e39,"temp":2,`+tail, 2, 3, 0.5, 0.5, "d", 7),
		{name: "feature: good then out of range", in: `{"temp":2,"temp":1e39,` + tail, err: `field "temp": out of float32 range: 1e+39`},
		ok("feature: bad then good, escaped spelling", `{"temp":null,"t\u0065mp":4,`+tail, 4, 3, 0.5, 0.5, "d", 7),
		ok("nested feature: bad then good", `{"temp":1,"sensor":{"hum":"x","hum":5},"dev":"d","ts":7}`, 1, 5, 0.5, 0.5, "d", 7),
		{name: "nested feature: good then bad", in: `{"temp":1,"sensor":{"hum":5,"hum":"x"},"dev":"d","ts":7}`, err: `field "sensor.hum": not a number: "x"`},
		// A parent object repeated: the last one replaces the whole object.
		ok("parent: bad object then good", `{"temp":1,"sensor":{"hum":"x"},"sensor":{"hum":6},"dev":"d","ts":7}`, 1, 6, 0.5, 0.5, "d", 7),
		{name: "parent: good object then bad", in: `{"temp":1,"sensor":{"hum":6},"sensor":{"hum":"x"},"dev":"d","ts":7}`, err: `field "sensor.hum": not a number: "x"`},
		ok("parent: scalar then object", `{"temp":1,"sensor":5,"sensor":{"hum":6},"dev":"d","ts":7}`, 1, 6, 0.5, 0.5, "d", 7),
		{name: "parent: object then scalar", in: `{"temp":1,"sensor":{"hum":6},"sensor":5,"dev":"d","ts":7}`, err: `field "sensor.hum": missing`},
		ok("parent: the last object's uncertainty, else the default", `{"temp":1,"sensor":{"hum":6,"hum_sd":0.2},"sensor":{"hum":8},"dev":"d","ts":7}`, 1, 8, 0.5, 0.5, "d", 7),
		// An uncertainty repeated.
		ok("uncertainty: bad then good", `{"temp":1,"temp_sd":-1,"temp_sd":0.25,`+tail, 1, 3, 0.25, 0.5, "d", 7),
		{name: "uncertainty: good then bad", in: `{"temp":1,"temp_sd":0.25,"temp_sd":-1,` + tail, err: `field "temp_sd": uncertainty must be >= 0: -1`},
		// Non-feature keys repeated: the record key, the event time, a field not configured.
		ok("key: bad then good", `{"temp":1,"sensor":{"hum":3},"dev":{"x":1},"dev":"a","ts":7}`, 1, 3, 0.5, 0.5, "a", 7),
		{name: "key: good then bad", in: `{"temp":1,"sensor":{"hum":3},"dev":"a","dev":{"x":1},"ts":7}`, err: `field "dev": key must be a string or a number, got an object`},
		ok("key: two good, the last", `{"temp":1,"sensor":{"hum":3},"dev":"a","dev":42,"ts":7}`, 1, 3, 0.5, 0.5, "42", 7),
		ok("time: bad then good", `{"temp":1,"sensor":{"hum":3},"dev":"d","ts":"yesterday","ts":9}`, 1, 3, 0.5, 0.5, "d", 9),
		{name: "time: good then bad", in: `{"temp":1,"sensor":{"hum":3},"dev":"d","ts":9,"ts":"yesterday"}`, err: `field "ts": not an RFC 3339 time, a time as "2006-01-02 15:04:05" (UTC without an offset) or epoch milliseconds: "yesterday"`},
		ok("unconfigured: scalar then object", `{"note":"x","temp":1,"note":{"y":[1]},`+tail, 1, 3, 0.5, 0.5, "d", 7),
		ok("unconfigured: object then scalar", `{"note":{"y":[1]},"temp":1,"note":"x",`+tail, 1, 3, 0.5, 0.5, "d", 7),
	})
}

// TestDecodeLogfmtDuplicateKeys: logfmt documents the same rule, "the last one wins", in both
// orders, for a feature, an uncertainty, the event time and an unconfigured key.
func TestDecodeLogfmtDuplicateKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(FormatLogfmt, []string{"temp", "hum"}, func(c *Config) {
		c.KeyField = "dev"
		c.EventTimeField = "ts"
		c.Uncertainty = &Uncertainty{Suffix: "_sd", Default: ptr(0.0)}
	})
	ok := func(name, in string, temp, tempSD float32, ts int64) decodeCase {
		return decodeCase{name: name, in: in, values: []float32{temp, 3}, sd: []float32{tempSD, 0}, key: "a", hasKey: true, timeMS: ts, hasTime: true}
	}
	runDecodeCases(t, cfg, []decodeCase{
		ok("feature: bad then good", `dev=a temp=warm temp=2 hum=3 ts=1`, 2, 0, 1),
		{name: "feature: good then bad", in: `dev=a temp=2 temp=warm hum=3 ts=1`, err: `field "temp": not a number: "warm"`},
		ok("feature: NaN then good", `dev=a temp=NaN temp=2 hum=3 ts=1`, 2, 0, 1),
		ok("uncertainty: bad then good", `dev=a temp=2 temp_sd=-1 temp_sd=0.5 hum=3 ts=1`, 2, 0.5, 1),
		{name: "uncertainty: good then bad", in: `dev=a temp=2 temp_sd=0.5 temp_sd=-1 hum=3 ts=1`, err: `field "temp_sd": uncertainty must be >= 0: -1`},
		ok("time: bad then good", `dev=a temp=2 hum=3 ts=soon ts=4`, 2, 0, 4),
		{name: "time: good then bad", in: `dev=a temp=2 hum=3 ts=4 ts=soon`, err: `field "ts": not an RFC 3339 time, a time as "2006-01-02 15:04:05" (UTC without an offset) or epoch milliseconds: "soon"`},
		ok("unconfigured", `msg=x dev=a temp=2 msg="y z" hum=3 ts=1`, 2, 0, 1),
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
