package main

import (
	"strings"
	"testing"
)

// TestLintWarnsOfKeysFirstModelsOnFewRollingValues: under detect.key_by: key a key's first model
// is built from keys.min_records records whose rolling derived columns (mean, std) are full (its
// warming records stay out since keywarm27); with min_records at or below the largest `last`
// those records' windows share most of their values, about one independent value of the column,
// which the model reads as the key's normal (docs/BENCHMARKS.md §12.62: a clean generated fleet
// with a std over 32 flagged 316-618 of 40,000 at min_records 30, 183-247 at 64; before
// keywarm27 the first model was built from the partial windows alone, §12.59). The config was
// accepted without a word; lint warns at that derived feature's `last`, exit 0. Without key_by,
// a robust_z (its own min_values is its warm-up) or min_records above last: no warning.
func TestLintWarnsOfKeysFirstModelsOnFewRollingValues(t *testing.T) {
	for _, c := range []struct {
		name, derive, detect, want string
	}{
		{"std under key_by", "      - {kind: std, of: v, last: 32}\n", "  key_by: key\n", ":7:28: ingest.derive.features[0].last: warning: 32 values fill this window, at least detect.keys.min_records (30)"},
		{"mean, min_records equal", "      - {kind: diff, of: v}\n      - {kind: mean, of: v, last: 40}\n", "  key_by: key\n  keys:\n    min_records: 40\n", ":8:29: ingest.derive.features[1].last: warning: 40 values fill this window, at least detect.keys.min_records (40)"},
		{"min_records above", "      - {kind: std, of: v, last: 32}\n", "  key_by: key\n  keys:\n    min_records: 64\n", ""},
		{"global model", "      - {kind: std, of: v, last: 32}\n", "", ""},
		{"robust_z", "      - {kind: robust_z, of: v, last: 60}\n", "  key_by: key\n", ""},
		// derive.max_keys below keys.max_keys: series evicted from derive restart warming, and a key
		// whose records are all warming never gets a model (review27; a robust_z's too since derive28).
		{"derive evicts keys", "      - {kind: std, of: v, last: 16}\n    max_keys: 1000\n", "  key_by: key\n", ":8:5: ingest.derive.max_keys: warning: 1000 series, fewer than detect.keys.max_keys (100000)"},
		{"derive evicts a robust_z", "      - {kind: robust_z, of: v, last: 16}\n    max_keys: 1000\n", "  key_by: key\n", ":8:5: ingest.derive.max_keys: warning: 1000 series, fewer than detect.keys.max_keys (100000)"},
		{"derive evicts, no rolling column", "      - {kind: diff, of: v}\n    max_keys: 1000\n", "  key_by: key\n", ""},
		{"derive evicts, global model", "      - {kind: std, of: v, last: 16}\n    max_keys: 1000\n", "", ""},
		{"derive holds the keys", "      - {kind: std, of: v, last: 16}\n    max_keys: 1000\n", "  key_by: key\n  keys:\n    max_keys: 1000\n", ""},
	} {
		path := writeFile(t, "d.yaml", "ingest:\n  topic: in\n  features: [v]\n  key_field: k\n  derive:\n    features:\n"+c.derive+
			"sink:\n  topic: out\n  dead_letter_topic: dl\ndetect:\n"+c.detect)
		out, errs, code := outlierd(t, "lint", "--config", path)
		warned := c.want == "" && errs == "" || c.want != "" && strings.HasPrefix(errs, path+c.want) && strings.Count(errs, "\n") == 1
		if code != 0 || !strings.Contains(out, "ok") || !warned {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want exit 0, ok and %q", c.name, code, out, errs, c.want)
		}
	}
}
