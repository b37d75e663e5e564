package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/pipeline"
)

// TestRunAndLintHelp: `outlierd run --help` and `outlierd lint --help` say what the command does
// and list every flag with its usage, and exit 0.
func TestRunAndLintHelp(t *testing.T) {
	cases := []struct {
		cmd  string
		want []string
	}{
		{"run", []string{
			"Usage: outlierd run --config FILE",
			"Runs the streaming pipeline",
			"SIGHUP",
			"-config",
			"pipeline YAML file (required)",
			"-log-level",
			"debug, info, warn or error",
		}},
		{"lint", []string{
			"Usage: outlierd lint --config FILE",
			"Validates a pipeline config",
			"file:line:column",
			"-config",
			"pipeline YAML file (required)",
		}},
	}
	for _, tc := range cases {
		for _, h := range []string{"--help", "-h"} {
			out, errs, code := outlierd(t, tc.cmd, h)
			if code != 0 {
				t.Errorf("%s %s: exit %d", tc.cmd, h, code)
			}
			help := out + errs
			for _, w := range tc.want {
				if !strings.Contains(help, w) {
					t.Errorf("%s %s: help lacks %q:\n%s", tc.cmd, h, w, help)
				}
			}
		}
	}
}

// TestRunLogLevel: the log level is run.log_level unless --log-level overrides it; an unknown
// level is a usage error. At the default (info) a debug line, which is what kafka-go's Logger
// writes through the source's adapter, writes nothing; at debug it is written.
func TestRunLogLevel(t *testing.T) {
	cfg := pipeline.Default()
	cases := []struct {
		flag, config string
		want         zerolog.Level
	}{
		{"", "info", zerolog.InfoLevel},
		{"", "debug", zerolog.DebugLevel},
		{"warn", "debug", zerolog.WarnLevel},
		{"debug", "info", zerolog.DebugLevel},
	}
	for _, tc := range cases {
		cfg.Run.LogLevel = pipeline.LogLevel(tc.config)
		var buf bytes.Buffer
		log, err := runLogger(&buf, tc.flag, cfg)
		if err != nil {
			t.Fatalf("flag %q config %q: %v", tc.flag, tc.config, err)
		}
		if got := log.GetLevel(); got != tc.want {
			t.Errorf("flag %q config %q: level %v, want %v", tc.flag, tc.config, got, tc.want)
		}
		log.Debug().Msg("entering loop for consumer group")
		if wrote := buf.Len() > 0; wrote != (tc.want == zerolog.DebugLevel) {
			t.Errorf("flag %q config %q: debug line written = %v at level %v", tc.flag, tc.config, wrote, tc.want)
		}
	}
	if _, err := runLogger(&bytes.Buffer{}, "loud", pipeline.Default()); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("--log-level loud: got %v, want a usage error naming --log-level", err)
	}
	if d := pipeline.Default(); d.Run.LogLevel != "info" {
		t.Errorf("default run.log_level is %q, want info", d.Run.LogLevel)
	}
}

// TestLintRefusesRollupOverTwentyFeatures: `outlierd lint` refuses exhaustive roll-up over 21
// features, naming the key at its line and column (it used to pass lint and stop the pipeline
// at its first scored batch).
func TestLintRefusesRollupOverTwentyFeatures(t *testing.T) {
	names := make([]string, 21)
	for i := range names {
		names[i] = "f" + strconv.Itoa(i)
	}
	body := "ingest:\n  brokers: [\"localhost:9092\"]\n  topic: in\n  group_id: g\n  features: [" + strings.Join(names, ", ") + "]\n" +
		"detect:\n  density:\n    mode: rollup\n" +
		"sink:\n  brokers: [\"localhost:9092\"]\n  topic: out\n  dead_letter_topic: dl\n"
	path := writeFile(t, "rollup.yaml", body)
	_, errs, code := outlierd(t, "lint", "--config", path)
	want := path + ":8:5: detect.density.mode: rollup tests all 2^r - 1 subspaces of the r features and accepts at most r = 20, but ingest.features has 21"
	if code != 1 || !strings.Contains(errs, want) {
		t.Fatalf("lint: exit %d, stderr %q; want exit 1 and %q", code, errs, want)
	}
	path = writeFile(t, "rollup20.yaml", strings.Replace(body, ", f20]", "]", 1))
	if out, errs, code := outlierd(t, "lint", "--config", path); code != 0 {
		t.Fatalf("lint of rollup over 20 features: exit %d: %s%s", code, out, errs)
	}
}

// TestLintLinesAreFileLineColumn: every problem lint prints is one line "file:line:column: key:
// message", as its help and docs/OPERATIONS.md say (a CI step can grep them); the first one
// used to carry the "outlierd lint: " prefix of other commands' errors.
func TestLintLinesAreFileLineColumn(t *testing.T) {
	path := writeFile(t, "bad.yaml", "ingest:\n  topic: in\n  features: [v]\nsink:\n  topic: out\n  dead_letter_topic: dl\ndetect:\n  key_by: keys\n  keys:\n    max_keys: -1\n")
	_, errs, code := outlierd(t, "lint", "--config", path)
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != 1 || len(lines) != 2 {
		t.Fatalf("exit %d, stderr %q: want exit 1 and two lines", code, errs)
	}
	for i, want := range []string{path + ":8:3: detect.key_by: ", path + ":10:5: detect.keys.max_keys: "} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d %q: want it to start with %q", i+1, lines[i], want)
		}
	}
}

// TestLintWarnsOfSessionTimeoutBrokersRefuse: an ingest.session_timeout outside a default
// broker's group.min/max.session.timeout.ms (6 s, 30 min) is a warning at its line; valid YAML
// that a default broker refuses at the group's join, and the pipeline stopped 3 s after its start
// with "[26] Invalid Session Timeout". Inside the range, no warning.
func TestLintWarnsOfSessionTimeoutBrokersRefuse(t *testing.T) {
	for _, c := range []struct{ timing, want string }{
		{"  session_timeout: 1s\n  heartbeat_interval: 300ms\n", ":4:3: ingest.session_timeout: warning: 1s is below 6s"},
		{"  session_timeout: 1h\n", ":4:3: ingest.session_timeout: warning: 1h0m0s is above 30m0s"},
		{"  session_timeout: 6s\n  heartbeat_interval: 2s\n", ""},
	} {
		path := writeFile(t, "s.yaml", "ingest:\n  topic: in\n  features: [v]\n"+c.timing+"sink:\n  topic: out\n  dead_letter_topic: dl\n")
		out, errs, code := outlierd(t, "lint", "--config", path)
		warned := c.want == "" && errs == "" || c.want != "" && strings.HasPrefix(errs, path+c.want)
		if code != 0 || !strings.Contains(out, "ok") || !warned {
			t.Errorf("%q: exit %d, stdout %q, stderr %q: want exit 0, ok and %q", c.timing, code, out, errs, c.want)
		}
	}
}

// TestLintWarnsOfKeysUnderKeyByNone: detect.keys.* values other than their defaults under
// key_by: none apply to nothing: a warning each, at its line, exit 0 (they were accepted without
// a word). Their values are still judged (an invalid one is an error, as in a disabled
// hypercube section), and the defaults (the reference config writes them) are no warning.
func TestLintWarnsOfKeysUnderKeyByNone(t *testing.T) {
	base := "ingest:\n  topic: in\n  features: [v]\nsink:\n  topic: out\n  dead_letter_topic: dl\ndetect:\n"
	for _, c := range []struct {
		detect string
		code   int
		want   []string
	}{
		{"  keys:\n    window: 50\n    min_records: 30\n    tail: own\n", 0, []string{
			":9:5: detect.keys.window: warning: 50 applies to no key: detect.key_by is none (set key_by: key for models per key, or remove it)",
			":11:5: detect.keys.tail: warning: own applies to no key"}},
		{"  key_by: none\n  keys: {window: 200, k: 10}\n", 0, nil},
		{"  key_by: key\n  keys: {window: 50}\n", 0, nil},
		{"  keys: {window: 5, k: 2, min_records: 4}\n", 1, []string{":8:10: detect.keys.window: must be in [8, 2147483647], got 5"}},
	} {
		path := writeFile(t, "k.yaml", base+c.detect)
		_, errs, code := outlierd(t, "lint", "--config", path)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if errs == "" {
			lines = nil
		}
		ok := code == c.code && len(lines) == len(c.want)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasPrefix(lines[i], path+c.want[i])
		}
		if !ok {
			t.Errorf("%q: exit %d, stderr %q: want exit %d and %q", c.detect, code, errs, c.code, c.want)
		}
	}
}
