package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testConfig exercises the field kinds outlierd's configs use.
type testConfig struct {
	Name    string        `yaml:"name"`
	Port    int           `yaml:"port"`
	Timeout time.Duration `yaml:"timeout"`
	Tags    []string      `yaml:"tags"`
	Secret  string        `yaml:"secret"`
	Inner   testInner     `yaml:"inner"`
}

type testInner struct {
	Ratio   float64 `yaml:"ratio"`
	Enabled bool    `yaml:"enabled"`
	Mode    string  `yaml:"mode"`
}

func defaultTestConfig() testConfig {
	return testConfig{Name: "outlierd", Port: 9092, Timeout: time.Second, Tags: []string{"a"},
		Inner: testInner{Ratio: 0.5, Enabled: true, Mode: "fast"}}
}

// Validate reports every problem at once, like the stage configs do.
func (c *testConfig) Validate() error {
	var errs []error
	if c.Port <= 0 || c.Port > 65535 {
		errs = append(errs, errors.New("port: must be in 1..65535"))
	}
	if c.Inner.Ratio < 0 || c.Inner.Ratio > 1 {
		errs = append(errs, errors.New("inner.ratio: must be in [0, 1]"))
	}
	return errors.Join(errs...)
}

// plainConfig has no Validate method.
type plainConfig struct {
	A int `yaml:"a"`
}

func TestLoadBytesValid(t *testing.T) {
	t.Setenv("OUTLIERD_TEST_PORT", "19092")
	t.Setenv("OUTLIERD_TEST_EMPTY", "")
	t.Setenv("OUTLIERD_TEST_SECRET", "p4ss: #word\nwith newline")
	tests := []struct {
		name string
		yaml string
		want func(*testConfig)
	}{
		{"empty document keeps defaults", "", func(*testConfig) {}},
		{"comments only keep defaults", "# nothing here\n", func(*testConfig) {}},
		{"omitted keys keep defaults", "inner:\n  mode: slow\n", func(c *testConfig) { c.Inner.Mode = "slow" }},
		{"all kinds", "name: x\nport: 1\ntimeout: 250ms\ntags: [b, c]\ninner: {ratio: 0.25, enabled: false}\n",
			func(c *testConfig) {
				c.Name, c.Port, c.Timeout, c.Tags = "x", 1, 250*time.Millisecond, []string{"b", "c"}
				c.Inner.Ratio, c.Inner.Enabled = 0.25, false
			}},
		{"env into int", "port: ${OUTLIERD_TEST_PORT}\n", func(c *testConfig) { c.Port = 19092 }},
		{"env default used when unset", "port: ${OUTLIERD_TEST_UNSET:-8080}\n", func(c *testConfig) { c.Port = 8080 }},
		{"env default used when empty", "name: ${OUTLIERD_TEST_EMPTY:-dflt}\n", func(c *testConfig) { c.Name = "dflt" }},
		{"env set but empty, no default", "name: \"${OUTLIERD_TEST_EMPTY}\"\n", func(c *testConfig) { c.Name = "" }},
		{"empty default in plain scalar is null", "port: ${OUTLIERD_TEST_UNSET:-}\n", func(*testConfig) {}},
		{"env inside text", "name: pre-${OUTLIERD_TEST_PORT}-post\n", func(c *testConfig) { c.Name = "pre-19092-post" }},
		{"quoted env stays string", "name: \"${OUTLIERD_TEST_PORT}\"\n", func(c *testConfig) { c.Name = "19092" }},
		{"escape", "name: $${NOT_A_VAR} and $$ and $x\n", func(c *testConfig) { c.Name = "${NOT_A_VAR} and $$ and $x" }},
		{"escape then var", "name: $${A}${OUTLIERD_TEST_PORT}\n", func(c *testConfig) { c.Name = "${A}19092" }},
		{"default with colon and spaces", "name: \"${OUTLIERD_TEST_UNSET:-a: b # c}\"\n", func(c *testConfig) { c.Name = "a: b # c" }},
		{"secret with YAML syntax stays one scalar", "secret: ${OUTLIERD_TEST_SECRET}\nport: 2\n",
			func(c *testConfig) { c.Secret, c.Port = "p4ss: #word\nwith newline", 2 }},
		{"env in sequence", "tags: [x, \"${OUTLIERD_TEST_PORT}\"]\n", func(c *testConfig) { c.Tags = []string{"x", "19092"} }},
		{"env in comment ignored", "# ${OUTLIERD_TEST_UNSET}\nport: 3 # ${OUTLIERD_TEST_UNSET}\n", func(c *testConfig) { c.Port = 3 }},
		{"anchors and aliases", "name: &n ${OUTLIERD_TEST_PORT}\nsecret: *n\n", func(c *testConfig) { c.Name, c.Secret = "19092", "19092" }},
		{"a whole number written as a float", "port: 5e3\n", func(c *testConfig) { c.Port = 5000 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := defaultTestConfig()
			if err := LoadBytes("t.yaml", []byte(tc.yaml), &got); err != nil {
				t.Fatalf("LoadBytes: %v", err)
			}
			want := defaultTestConfig()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoadBytesErrors(t *testing.T) {
	t.Setenv("OUTLIERD_TEST_WORD", "hunter2-secret")
	t.Setenv("OUTLIERD_TEST_FRACTION", "2.5")
	tests := []struct {
		name string
		yaml string
		// want lists substrings, one per expected issue line, in order.
		want []string
	}{
		{"unknown top-level key", "name: x\nprot: 1\n",
			[]string{"t.yaml:2:1: unknown key `prot` at the top level; did you mean `port`?"}},
		{"misspelt nested key with column", "inner:\n  ratio: 0.1\n  enabeld: true\n",
			[]string{"t.yaml:3:3: unknown key `enabeld` in inner; did you mean `enabled`?"}},
		{"unknown key in flow mapping", "inner: {ratio: 0.1, mood: x}\n",
			[]string{"t.yaml:1:21: unknown key `mood` in inner; did you mean `mode`?"}},
		{"several problems at once", "prot: 1\nport: abc\ninner:\n  ratio: [1]\n  foo: 2\n",
			[]string{
				"t.yaml:1:1: unknown key `prot` at the top level; did you mean `port`?",
				"t.yaml:2:7: port: expected a whole number (such as 1000), got `abc`",
				"t.yaml:4:10: inner.ratio: expected a number (such as 0.2 or 1e-3), got a list",
				"t.yaml:5:3: unknown key `foo` in inner; the keys there are enabled, mode, ratio",
			}},
		// yaml.v3 truncates a float into an int field without a word: detect.window: 1.5 ran as 1.
		{"a fraction where a whole number goes", "port: 1.5\n",
			[]string{"t.yaml:1:7: port: expected a whole number (such as 1000), got `1.5`"}},
		{"an interpolated fraction where a whole number goes", "port: ${OUTLIERD_TEST_FRACTION}\n",
			[]string{"t.yaml:1:7: port: expected a whole number (such as 1000), got `${OUTLIERD_TEST_FRACTION}` (after interpolation)"}},
		// A whole number or a duration too large for its key was worded as the wrong kind of
		// value ("expected a whole number (such as 1000), got `99999999999999999999`").
		{"a whole number out of range", "port: 99999999999999999999\n",
			[]string{"t.yaml:1:7: port: a whole number out of range, got `99999999999999999999`: at most 9223372036854775807"}},
		{"a negative whole number out of range", "port: -99999999999999999999\n",
			[]string{"t.yaml:1:7: port: a whole number out of range, got `-99999999999999999999`: at least -9223372036854775808"}},
		{"a duration out of range", "timeout: 9999999h\n",
			[]string{"t.yaml:1:10: timeout: a duration out of range, got `9999999h`: at most 2562047h47m16.854775807s"}},
		{"wrong type for duration", "timeout: 5 parsecs\n", []string{"t.yaml:1:10: timeout: expected a duration, got `5 parsecs`: write a duration such as 100ms, 30s or 5m"}},
		// A flow list holds the wrong element: the element's position, not the list's (yaml.v3
		// names only the line; the first list on it was taken).
		{"a list inside a flow list of text", "tags: [a, [b]]\n", []string{"t.yaml:1:11: tags[1]: expected a single value (text), got a list"}},
		{"two sections inside a flow list of text", "tags: [{x: 1}, a, {y: 2}]\n", []string{
			"t.yaml:1:8: tags[0]: expected a single value (text), got a section (keys below it)",
			"t.yaml:1:19: tags[2]: expected a single value (text), got a section (keys below it)"}},
		{"mapping where scalar expected", "name:\n  a: 1\n", []string{"t.yaml:2:3: name: expected a single value (text), got a section (keys below it)"}},
		// yaml.v3 skipped a null key without a word (strict decoding or not) and worded an empty
		// one "field  not found in type config.testConfig".
		{"a null key", "name: x\n~: 1\n", []string{"t.yaml:2:1: a key without a name (`~`) at the top level"}},
		{"a null key in a section", "inner:\n  null: 1\n  mode: x\n", []string{"t.yaml:2:3: a key without a name (`null`) in inner"}},
		{"an empty key", "\"\": 1\nport: 2\n", []string{"t.yaml:1:1: a key without a name (`\"\"`) at the top level"}},
		{"duplicate key", "port: 1\nport: 2\n", []string{`t.yaml:2:1: port: mapping key "port" already defined at line 1`}},
		{"missing variable", "name: x\nport: ${OUTLIERD_TEST_UNSET}\n",
			[]string{"t.yaml:2:7: environment variable OUTLIERD_TEST_UNSET is not set"}},
		{"missing variables and an unknown key, all reported", "name: ${OUTLIERD_TEST_UNSET_A}\nprot: 1\nsecret: a${OUTLIERD_TEST_UNSET_B}b\n",
			[]string{
				"t.yaml:1:7: environment variable OUTLIERD_TEST_UNSET_A is not set",
				"t.yaml:2:1: unknown key `prot` at the top level; did you mean `port`?",
				"t.yaml:3:10: environment variable OUTLIERD_TEST_UNSET_B is not set",
			}},
		{"missing variable in an int field: no type error on top", "port: x${OUTLIERD_TEST_UNSET}\n",
			[]string{"t.yaml:1:8: environment variable OUTLIERD_TEST_UNSET is not set"}},
		{"unterminated", "name: ${OUTLIERD_TEST_WORD\n", []string{`t.yaml:1:7: unterminated "${"`}},
		{"bad variable name", "name: ${1X}\n", []string{`t.yaml:1:7: invalid environment variable name "1X"`}},
		{"missing variable in quoted scalar", "name: \"ab ${OUTLIERD_TEST_UNSET}\"\n", []string{"t.yaml:1:11: environment variable OUTLIERD_TEST_UNSET"}},
		{"missing variable in literal block", "name: |\n  line one\n  x ${OUTLIERD_TEST_UNSET}\n", []string{"t.yaml:3: environment variable OUTLIERD_TEST_UNSET"}},
		{"interpolated type error hides the value", "tags: [a]\nport: ${OUTLIERD_TEST_WORD}\n",
			[]string{"t.yaml:2:7: port: expected a whole number (such as 1000), got `${OUTLIERD_TEST_WORD}` (after interpolation)"}},
		{"positions after interpolation are the file's", "secret: ${OUTLIERD_TEST_WORD}\n\n\n# gap\ninner:\n    mdoe: x\n",
			[]string{"t.yaml:6:5: unknown key `mdoe` in inner; did you mean `mode`?"}},
		{"syntax error", "name: x\n  port: 1\n", []string{"t.yaml:2:3: YAML syntax: mapping values are not allowed"}},
		// yaml.v3 says "found character that cannot start any token" of a tab, a common slip.
		{"tab indentation", "inner:\n\tmode: x\n", []string{"t.yaml:2:2: YAML syntax: found character that cannot start any token (a tab: YAML indents with spaces only)"}},
		// yaml.v3 names the line where the enclosing block starts; the key that breaks it is named.
		{"key indented less than its siblings", "inner:\n  ratio: 0.1\n mode: x\n", []string{"t.yaml:3:2: YAML syntax: did not find expected key"}},
		{"key indented more than its siblings", "name: x\ninner:\n    ratio: 0.1\n  mode: x\n", []string{"t.yaml:4:3: YAML syntax: did not find expected key"}},
		{"list item indented less", "name: x\ntags:\n    - a\n   - b\nport: 1\n", []string{"t.yaml:4:4: YAML syntax: did not find expected key"}},
		{"unclosed flow list", "tags: [a,\n  b\nport: 1\n", []string{"t.yaml:2:3: YAML syntax: did not find expected ',' or ']'"}},
		{"two documents", "name: x\n---\nname: y\n", []string{"t.yaml:2:1: a second YAML document"}},
		{"top level is a list", "- a\n- b\n", []string{"t.yaml:1:1: expected a section of keys indented below it, got a list"}},
		{"validate errors prefixed", "port: 0\ninner: {ratio: 2}\n",
			[]string{"t.yaml: port: must be in 1..65535", "t.yaml: inner.ratio: must be in [0, 1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultTestConfig()
			err := LoadBytes("t.yaml", []byte(tc.yaml), &cfg)
			if err == nil {
				t.Fatal("LoadBytes succeeded, want an error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d issues, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("issue %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks an environment value: %v", err)
			}
			if !reflect.DeepEqual(cfg, defaultTestConfig()) {
				t.Errorf("destination modified on error: %+v", cfg)
			}
		})
	}
}

func TestErrorTypes(t *testing.T) {
	cfg := defaultTestConfig()
	err := LoadBytes("a.yaml", []byte("prot: 1\n"), &cfg)
	var ce *Error
	if !errors.As(err, &ce) || ce.File != "a.yaml" || len(ce.Issues) != 1 || ce.Issues[0] != (Issue{Line: 1, Column: 1, Msg: ce.Issues[0].Msg}) {
		t.Fatalf("got %#v, want *Error with one issue at 1:1", err)
	}
	err = LoadBytes("a.yaml", []byte("port: -1\n"), &cfg)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.File != "a.yaml" {
		t.Fatalf("got %#v, want *ValidationError", err)
	}
}

func TestLoadWithoutValidate(t *testing.T) {
	var p plainConfig
	if err := LoadBytes("p.yaml", []byte("a: 7\n"), &p); err != nil || p.A != 7 {
		t.Fatalf("got %+v, %v", p, err)
	}
	if err := LoadBytes[plainConfig]("p.yaml", []byte("a: 1\n"), nil); err == nil {
		t.Fatal("nil destination accepted")
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("port: 1\nbad: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultTestConfig()
	err := Load(path, &cfg)
	if err == nil || !strings.HasPrefix(err.Error(), path+":2:1: ") {
		t.Fatalf("got %v, want an error at %s:2:1", err, path)
	}
	if err := Load(filepath.Join(dir, "missing.yaml"), &cfg); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want os.ErrNotExist", err)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "E": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want string
		problems int
	}{
		{"plain", "plain", 0},
		{"${A}", "1", 0},
		{"${A}${A}", "11", 0},
		{"${E}", "", 0},
		{"${E:-d}", "d", 0},
		{"${U:-}", "", 0},
		{"${U:-x:-y}", "x:-y", 0},
		{"$${A}", "${A}", 0},
		{"$$${A}", "$${A}", 0}, // leftmost match: "$" then the escape "$${"
		{"$${", "${", 0},
		{"$", "$", 0},
		{"${U}", "", 1},
		{"${U} ${V}", " ", 2},
		{"${}", "", 1},
		{"${A", "${A", 1},
		{"${A B}", "", 1},
	}
	for _, tc := range tests {
		got, problems := expand(tc.in, lookup)
		if got != tc.want || len(problems) != tc.problems {
			t.Errorf("expand(%q) = %q, %d problems %v; want %q, %d", tc.in, got, len(problems), problems, tc.want, tc.problems)
		}
	}
}

// TestLoadWritten: LoadWritten reports the keys the file sets, nested ones by their path, and
// not the keys left to their defaults, even where a written value equals the default.
func TestLoadWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("port: 9092\ninner:\n  ratio: 0.25\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultTestConfig()
	written, err := LoadWritten(path, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"port": true, "inner": true, "inner.ratio": true, "name": false, "inner.mode": false} {
		if written(key) != want {
			t.Errorf("written(%q) = %v, want %v", key, !want, want)
		}
	}
	if cfg.Inner.Ratio != 0.25 {
		t.Errorf("ratio %v: the file was not decoded", cfg.Inner.Ratio)
	}
	if err := os.WriteFile(path, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if written, err := LoadWritten(path, &cfg); err != nil || written("port") {
		t.Errorf("an empty file: %v, port written %v", err, err == nil && written("port"))
	}
	if err := os.WriteFile(path, []byte("port: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if written, err := LoadWritten(path, &cfg); err == nil || written != nil {
		t.Errorf("an invalid file: %v", err)
	}
}

// TestLoadBytesUnsignedOutOfRange: yaml.v3 converts a whole float of at most 2^64 into a
// uint64 without a word, so `seed: 18446744073709551616` (2^64) and `seed: -1e5` loaded as
// whatever the platform's conversion gave (lint said ok), and -1e20 into an int as
// -9223372036854775808. Each is now an error at its position naming the bound.
func TestLoadBytesUnsignedOutOfRange(t *testing.T) {
	type seeded struct {
		Seed uint64 `yaml:"seed"`
		N    int64  `yaml:"n"`
	}
	for _, c := range []struct{ yaml, want string }{
		{"seed: 18446744073709551616\n", "t.yaml:1:7: seed: a whole number out of range, got `18446744073709551616`: at most 18446744073709551615"},
		{"seed: -1e5\n", "t.yaml:1:7: seed: a whole number out of range, got `-1e5`: at least 0"},
		{"n: -1e20\n", "t.yaml:1:4: n: a whole number out of range, got `-1e20`: at least -9223372036854775808"},
		{"n: 9223372036854775808\n", "t.yaml:1:4: n: a whole number out of range, got `9223372036854775808`: at most 9223372036854775807"},
	} {
		var got seeded
		err := LoadBytes("t.yaml", []byte(c.yaml), &got)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v (loaded %+v), want %q", c.yaml, err, got, c.want)
		}
	}
	var ok seeded
	if err := LoadBytes("t.yaml", []byte("seed: 18446744073709551615\nn: -9223372036854775808\n"), &ok); err != nil || ok.Seed != math.MaxUint64 || ok.N != math.MinInt64 {
		t.Errorf("the bounds themselves: %v, %+v", err, ok)
	}
}
