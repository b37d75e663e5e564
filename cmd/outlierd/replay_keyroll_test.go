package main

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestReplayKeyedRollingCleanFleet (keywarm27, kept by keyroll28; defect 2 of docs/BENCHMARKS.md
// §12.59.1, §12.62, §12.69): a clean keyed fleet (gen's sensors, 50 keys, 2 values, seed 4: neither
// a tuning nor a held-out seed of docs/bench/notes/keyroll27_rule.md or keyroll28_rule.md) with a
// rolling std or mean of each value over 32 under key_by: key flags at most the target,
// 0.1 % of its records (40 of 40,000; the same fleet without the columns flags 0.02-0.06 %,
// §12.59.1). Each key's model reads its window, about 6 independent values of such a column, as if
// it held 200: main e7cea3c flags 419 (std) and 535 (mean); keyroll28's fleet widths 91 and 161.
// Still failing: the defect is open.
func TestReplayKeyedRollingCleanFleet(t *testing.T) {
	data, errs, code := outlierd(t, "gen", "--kind", "sensors", "--rows", "40000", "--head", "10000", "--spike-rate", "0",
		"--keys", "50", "--sensors", "2", "--seed", "4")
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	in := writeFile(t, "clean.csv", data)
	for _, kind := range []string{"std", "mean"} {
		t.Run(kind, func(t *testing.T) {
			cfg := writeFile(t, "roll.yaml", fmt.Sprintf(`ingest:
  features: [value1, value2]
  key_field: key
  derive:
    features:
      - {kind: %[1]s, of: value1, last: 32}
      - {kind: %[1]s, of: value2, last: 32}
detect:
  key_by: key
`, kind))
			out, errs, code := outlierd(t, "replay", "--input", in, "--label-column", "label", "--config", cfg,
				"--min-records", "10000", "--device", "cpu", "--json")
			if code != 0 {
				t.Fatalf("replay: exit %d: %s", code, errs)
			}
			var res struct{ Rows, Flagged int }
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if res.Rows != 40000 || res.Flagged > res.Rows/1000 {
				t.Fatalf("%d of %d clean records flagged with a rolling %s over 32 under key_by: key; want at most 0.1 %% (%d)", res.Flagged, res.Rows, kind, res.Rows/1000)
			}
			t.Logf("%d of %d flagged", res.Flagged, res.Rows)
		})
	}
}
