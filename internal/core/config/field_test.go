package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fieldConfig validates with FieldErrors, as the stage configs do.
type fieldConfig struct {
	Section struct {
		Name  string            `yaml:"name"`
		Items []string          `yaml:"items"`
		Map   map[string]string `yaml:"map"`
		Deep  struct {
			Level int `yaml:"level"`
		} `yaml:"deep"`
	} `yaml:"section"`
	Other struct {
		Deep struct {
			Level int `yaml:"level"`
		} `yaml:"deep"`
	} `yaml:"other"`
	Plain int `yaml:"plain"`
}

func (c *fieldConfig) Validate() error {
	var errs []error
	s := &c.Section
	if s.Name == "" {
		errs = append(errs, Fieldf("section.name", "required"))
	}
	for i, it := range s.Items {
		if it == "bad" {
			errs = append(errs, Fieldf(fmt.Sprintf("section.items[%d]", i), "%q is not allowed", it))
		}
	}
	for k, v := range s.Map {
		if v == "bad" {
			errs = append(errs, Fieldf(fmt.Sprintf("section.map[%q]", k), "bad value"))
		}
	}
	if s.Deep.Level > 3 {
		errs = append(errs, Fieldf("section.deep.level", "must be <= 3, got %d", s.Deep.Level))
	}
	if c.Other.Deep.Level > 3 {
		errs = append(errs, Fieldf("other.deep.level", "must be <= 3, got %d", c.Other.Deep.Level))
	}
	if c.Plain < 0 {
		errs = append(errs, errors.New("plain is negative (an error without a key)"))
	}
	return errors.Join(errs...)
}

// TestFieldErrorPositions: every FieldError is reported at its key's line and column, with the
// key's full path, in file order; a key left out at its nearest written ancestor.
func TestFieldErrorPositions(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // the exact lines of the error
	}{
		{"nested key", "section:\n  name: x\n  deep:\n    level: 9\n",
			[]string{"f.yaml:4:5: section.deep.level: must be <= 3, got 9"}},
		{"required key left out: its section", "plain: 1\nsection:\n  items: [a]\n",
			[]string{"f.yaml:2:1: section.name: required"}},
		{"sequence element", "section:\n  name: x\n  items:\n    - a\n    - bad\n",
			[]string{`f.yaml:5:7: section.items[1]: "bad" is not allowed`}},
		{"flow sequence element", "section: {name: x, items: [a, b, bad]}\n",
			[]string{`f.yaml:1:34: section.items[2]: "bad" is not allowed`}},
		{"map entry with a dot in its key", "section:\n  name: x\n  map:\n    ok: fine\n    a.b: bad\n",
			[]string{`f.yaml:5:5: section.map["a.b"]: bad value`}},
		{"through an alias", "section:\n  name: x\n  deep: &d\n    level: 7\nother:\n  deep: *d\n",
			[]string{"f.yaml:4:5: section.deep.level: must be <= 3, got 7", "f.yaml:4:5: other.deep.level: must be <= 3, got 7"}},
		{"file order, keyless error last", "plain: -1\nother:\n  deep: {level: 5}\nsection:\n  deep:\n    level: 4\n",
			[]string{
				"f.yaml:3:10: other.deep.level: must be <= 3, got 5",
				"f.yaml:4:1: section.name: required",
				"f.yaml:6:5: section.deep.level: must be <= 3, got 4",
				"f.yaml: plain is negative (an error without a key)",
			}},
		{"section absent: no position", "plain: 2\n", []string{"f.yaml: section.name: required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg fieldConfig
			err := LoadBytes("f.yaml", []byte(tc.yaml), &cfg)
			if err == nil {
				t.Fatal("LoadBytes succeeded, want an error")
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", err, strings.Join(tc.want, "\n"))
			}
			var fe *FieldError
			if !errors.As(err, &fe) && strings.Contains(tc.want[0], ": section.") {
				t.Errorf("errors.As(*FieldError) fails on %#v", err)
			}
		})
	}
}

func TestSplitKey(t *testing.T) {
	tests := []struct {
		key  string
		want string // steps joined by |, indices as #i
		ok   bool
	}{
		{"a", "a", true},
		{"a.b.c", "a|b|c", true},
		{"a.b[3]", "a|b|#3", true},
		{`a.m["x.y]"].z`, "a|m|x.y]|z", true},
		{"a[", "", false},
		{"a[-1]", "", false},
		{".a", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		segs, ok := splitKey(tc.key)
		var parts []string
		for _, s := range segs {
			if s.index {
				parts = append(parts, fmt.Sprintf("#%d", s.i))
			} else {
				parts = append(parts, s.name)
			}
		}
		if ok != tc.ok || (ok && strings.Join(parts, "|") != tc.want) {
			t.Errorf("splitKey(%q) = %v, %v; want %q, %v", tc.key, parts, ok, tc.want, tc.ok)
		}
	}
}
