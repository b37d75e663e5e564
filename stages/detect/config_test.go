package detect

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/core/config"
)

// TestValidateFeatures: exhaustive roll-up is refused above density.MaxRollupDims features (the
// limit density.Model enforces at the first batch), naming detect.density.mode; other modes and
// 20 features pass.
func TestValidateFeatures(t *testing.T) {
	c := Default()
	c.Density.Mode = "rollup"
	if err := c.ValidateFeatures(density.MaxRollupDims); err != nil {
		t.Errorf("rollup over %d features: %v", density.MaxRollupDims, err)
	}
	err := c.ValidateFeatures(density.MaxRollupDims + 1)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Key != "detect.density.mode" {
		t.Errorf("rollup over %d features: got %v, want a FieldError for detect.density.mode", density.MaxRollupDims+1, err)
	}
	for _, m := range []DensityMode{DensityIndependent, DensityRestricted, DensityAveraging} {
		c.Density.Mode = m
		if err := c.ValidateFeatures(200); err != nil {
			t.Errorf("%s over 200 features: %v", m, err)
		}
	}
}

// TestValidateKeysMaxBytes: a keys.max_bytes below one warm key's window and model (100 bytes,
// in a config lint passed) left every key evicted before its model, so the whole fleet was
// scored by the global model with nothing said; it is refused naming the least that holds one,
// and that least passes.
func TestValidateKeysMaxBytes(t *testing.T) {
	c := Default()
	c.KeyBy = KeyByKey
	one := keyBytes(c.Keys.Window, 3, true) + recentBytes(c.RecentScores, c.RecentBlocks())
	c.Keys.MaxBytes = 100
	err := c.ValidateFeatures(3)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Key != "detect.keys.max_bytes" || !strings.Contains(err.Error(), "at least "+strconv.FormatInt(one, 10)) {
		t.Errorf("max_bytes 100: got %v, want a FieldError for detect.keys.max_bytes asking at least %d", err, one)
	}
	for _, b := range []int64{0, one, 100 * one} {
		c.Keys.MaxBytes = b
		if err := c.ValidateFeatures(3); err != nil {
			t.Errorf("max_bytes %d: %v", b, err)
		}
	}
	c.KeyBy, c.Keys.MaxBytes = KeyByNone, 100 // no keys, nothing to hold
	if err := c.ValidateFeatures(3); err != nil {
		t.Errorf("key_by none: %v", err)
	}
}

// TestValidateKeyByFlagBy: key_by: key with another flag_by is refused at key_by, saying which
// flag_by it found and both ways out (it read `models per key flag by significance: set flag_by:
// significance (got "verdicts")`, the value after "got" not key_by's).
func TestValidateKeyByFlagBy(t *testing.T) {
	for _, f := range []FlagBy{FlagByVerdicts, FlagByRate} {
		c := Default()
		c.KeyBy, c.FlagBy = KeyByKey, f
		want := `detect.key_by: key needs flag_by: significance (a key's model flags by its own significance), but flag_by is "` + string(f) + `": set flag_by: significance, or key_by: none`
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Errorf("flag_by %s: got %v, want %q", f, err, want)
		}
	}
}

// TestValidateStateDir: detect.state_dir must be a directory snapshots can be written to, or
// one that can be created; Validate leaves nothing behind.
func TestValidateStateDir(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		want string // "" = valid
	}{
		{tmp, ""},
		{filepath.Join(tmp, "new", "nested"), ""},
		{file, "is not a directory"},
		{filepath.Join(file, "sub"), "cannot be created"},
	}
	for _, tc := range tests {
		c := Default()
		c.StateDir = tc.dir
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("state_dir %s: %v", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "detect.state_dir: ") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("state_dir %s: got %v, want detect.state_dir: ... %s", tc.dir, err, tc.want)
		}
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "file" {
		t.Errorf("Validate left %v in the directory, want only the test's file (no probe, nothing created)", ents)
	}
}

// TestEnumsDecodeAtLoad: the section's words decode into their typed values when the YAML is
// loaded, a word outside an enum is Validate's FieldError at its key, and a value of the wrong
// kind is reported as for a plain string (the message the keys had before they were typed).
func TestEnumsDecodeAtLoad(t *testing.T) {
	type doc struct {
		Detect Config `yaml:"detect"`
	}
	d := doc{Detect: Default()}
	yml := "detect:\n  combine: all\n  flag_by: verdicts\n  before_model: pass\n  score:\n    detectors: distance\n    combine: max\n  density:\n    mode: rollup\n"
	if err := config.LoadBytes("c.yaml", []byte(yml), &d); err != nil {
		t.Fatal(err)
	}
	c := d.Detect
	if c.Combine != CombineAll || c.FlagBy != FlagByVerdicts || c.BeforeModel != BeforeModelPass ||
		c.Score.Detectors != DetectorsDistance || c.Score.Combine != CombineMax || c.Density.Mode.Algo() != density.Rollup {
		t.Errorf("decoded %+v", c)
	}
	d = doc{Detect: Default()}
	err := config.LoadBytes("c.yaml", []byte("detect:\n  combine: [any]\n"), &d)
	if err == nil || err.Error() != "c.yaml:2:12: detect.combine: expected a single value (text), got a list" {
		t.Errorf("a list for combine: got %v", err)
	}
	d = doc{Detect: Default()}
	d.Detect.Density.Mode = "sideways"
	err = d.Detect.Validate()
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Key != "detect.density.mode" || !strings.Contains(err.Error(), `got "sideways"`) {
		t.Errorf("an unknown mode: got %v", err)
	}
}

// TestValidateWindowsFitTheFlagRings: detect.window and detect.keys.window above 2^31-1 records
// are refused, naming the key: the alarm cap and a key's significance marks count a window's
// flags in 32-bit rings (flagring.go), which such a window would overflow silently.
func TestValidateWindowsFitTheFlagRings(t *testing.T) {
	c := Default()
	c.Window = maxWindow
	c.KeyBy = KeyByKey
	c.Keys.Window = maxWindow
	c.Keys.MinRecords = min(c.Keys.MinRecords, c.Keys.Window)
	if err := c.Validate(); err != nil {
		t.Fatalf("windows of %d records: %v", maxWindow, err)
	}
	c.Window, c.Keys.Window = maxWindow+1, maxWindow+1
	err := c.Validate()
	for _, key := range []string{"detect.window", "detect.keys.window"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("windows of %d records: got %v, want an error naming %s", maxWindow+1, err, key)
		}
	}
}

// TestValidateKeysRebuildRecords: keys.rebuild_records takes 0 (a quarter of keys.window) to
// 2^31-1 records, more than keys.window included (a key rebuilt less often than its window
// turns over); a negative count or one past the flag rings' range is refused, naming the key.
func TestValidateKeysRebuildRecords(t *testing.T) {
	c := Default()
	c.KeyBy = KeyByKey
	for _, n := range []int{0, 1, c.Keys.Window + 1, maxWindow} {
		c.Keys.RebuildRecords = n
		if err := c.Validate(); err != nil {
			t.Errorf("keys.rebuild_records %d: %v", n, err)
		}
	}
	if c.Keys.RebuildRecords = 0; c.Keys.Rebuild() != c.Keys.Window/4 {
		t.Errorf("keys.rebuild_records 0: every %d records, want keys.window/4 = %d", c.Keys.Rebuild(), c.Keys.Window/4)
	}
	for _, n := range []int{-1, maxWindow + 1} {
		c.Keys.RebuildRecords = n
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "detect.keys.rebuild_records") {
			t.Errorf("keys.rebuild_records %d: got %v, want an error naming detect.keys.rebuild_records", n, err)
		}
	}
}
