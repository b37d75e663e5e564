package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReplayRollingWarmupNotFlagged: a rolling column's series that starts after the model
// exists (a new key, or every key after a restart: the derive state is in memory) holds fewer
// than `last` values at first, and its std is 0 or near it (a stuck sensor's signature) and its
// mean as spread as a single reading. Those records are scored with the warming columns at the
// model's centre, so a clean stream flags none of them, while a spike on a warming key's raw
// value is still found. Before warm26 the first records of each new series were flagged
// (spread26's §12.59: scores 8.6 / 4.8 / 5.2 for a second key's first three records).
//
// The stream: 20 keys round robin, three N(0, 1) sensors, each sensor's std and mean over 32;
// at row 20,000 every key is renamed (its series starts afresh, as after a restart), the model
// (min_records 10,000) long built. Key n01's 5th record after the renaming carries a +12 sd
// temp spike (n01's later records hold it in their std's window: not counted as clean).
func TestReplayRollingWarmupNotFlagged(t *testing.T) {
	const rows, keys, restart, last = 30000, 20, 20000, 32
	r := rand.New(rand.NewPCG(26, 59))
	spike := restart + 4*keys + 1 // key n01's 5th record after the restart
	var b strings.Builder
	b.WriteString("key,temp,pressure,humidity,label\n")
	for i := range rows {
		prefix := "o"
		if i >= restart {
			prefix = "n"
		}
		temp, lab := r.NormFloat64(), 0
		if i == spike {
			temp, lab = temp+12, 1
		}
		fmt.Fprintf(&b, "%s%02d,%.4f,%.4f,%.4f,%d\n", prefix, i%keys, temp, r.NormFloat64(), r.NormFloat64(), lab)
	}
	data := writeFile(t, "warm.csv", b.String())
	cfg := writeFile(t, "warm.yaml", `ingest:
  features: [temp, pressure, humidity]
  key_field: key
  derive:
    features:
      - {kind: std, of: temp, last: 32}
      - {kind: std, of: pressure, last: 32}
      - {kind: std, of: humidity, last: 32}
      - {kind: mean, of: temp, last: 32}
`)
	var warming []string
	for _, rec := range replayWarmupVerdicts(t, data, cfg) { // row,score,outlier,reason,recent
		row, _ := strconv.Atoi(rec[0])
		if row >= restart && row < restart+last*keys && row%keys != 1 && rec[2] == "true" {
			warming = append(warming, fmt.Sprintf("row %d (key n%02d's record %d) score %s: %s", row, row%keys, (row-restart)/keys+1, rec[1], rec[3]))
		}
		if row == spike {
			if rec[2] != "true" {
				t.Errorf("the spike on warming key n01 (row %d) not flagged: score %s", row, rec[1])
			}
			if strings.Contains(rec[3], ".std32") || strings.Contains(rec[3], ".mean32") {
				t.Errorf("the spike's reason %q cites a warming column", rec[3])
			}
		}
	}
	if len(warming) > 0 {
		t.Errorf("%d of the %d records of series still warming flagged after the restart (none on a clean stream):\n%s",
			len(warming), last*(keys-1), strings.Join(warming, "\n"))
	}
}

// TestReplayFleetRestartMeanNotFlagged (coldmean27; docs/BENCHMARKS.md §12.62's "open" note, fixed
// in §12.65): a fleet whose keys' sensors sit at baselines of their own (uniform in [0, 1000],
// readings ± 5), each sensor's rolling mean over 32 a column, starts cold (rows 0-639: every
// key's window filling, scored by the first model, built from rows 0-9,999 less those) and
// restarts at row 20,000 (every key renamed: its series starts afresh, as after a restart, the
// derive's state being in memory only). Under key_by none the global model scores every
// record; under key_by key it scores a key's records until the key's own model is ready (30
// records that were not warming), which after the renaming are new keys'. warm26 scored a
// warming mean at the global model's centre, the fleet's median, against a reading at the key's
// own baseline: a pair no record of the window has, and most such records were flagged. Limit:
// a clean stream flags at most 0.1 % of its records (keyroll27_rule.md's target), so at most one
// of the 1,240 warming records (20 keys x 31, twice); under key_by key the count is the global
// model's (the keys' own models' flags are §12.62's defect 2, not this one).
func TestReplayFleetRestartMeanNotFlagged(t *testing.T) {
	const rows, keys, restart, last = 30000, 20, 20000, 32
	r := rand.New(rand.NewPCG(27, 65))
	base := make([][2]float64, keys)
	for k := range base {
		base[k] = [2]float64{1000 * r.Float64(), 1000 * r.Float64()}
	}
	var b strings.Builder
	b.WriteString("key,temp,pressure,label\n")
	for i := range rows {
		prefix := "o"
		if i >= restart {
			prefix = "n"
		}
		k := i % keys
		fmt.Fprintf(&b, "%s%02d,%.4f,%.4f,0\n", prefix, k, base[k][0]+5*r.NormFloat64(), base[k][1]+5*r.NormFloat64())
	}
	data := writeFile(t, "fleet.csv", b.String())
	for _, keyBy := range []string{"none", "key"} {
		t.Run(keyBy, func(t *testing.T) {
			cfg := writeFile(t, "fleet.yaml", `ingest:
  features: [temp, pressure]
  key_field: key
  derive:
    features:
      - {kind: mean, of: temp, last: 32}
      - {kind: mean, of: pressure, last: 32}
detect:
  key_by: `+keyBy+"\n")
			var warming []string
			for _, rec := range replayWarmupVerdicts(t, data, cfg) { // row,score,outlier,reason,recent
				row, _ := strconv.Atoi(rec[0])
				inWarmup := row < (last-1)*keys || row >= restart && row < restart+(last-1)*keys
				if inWarmup && rec[2] == "true" && (keyBy == "none" || strings.Contains(rec[3], "global model")) {
					warming = append(warming, fmt.Sprintf("row %d score %s: %s", row, rec[1], rec[3]))
				}
			}
			if len(warming) > 1 {
				t.Errorf("%d of the %d clean records whose means were warming flagged by the global model, at most 1 (0.1 %%); the first:\n%s",
					len(warming), 2*(last-1)*keys, strings.Join(warming[:min(5, len(warming))], "\n"))
			}
		})
	}
}

// TestReplayKeyedRobustZFirstModelsNotFlagged (derive28; docs/BENCHMARKS.md §12.71): a robust_z
// over its series' previous `last` values is a z against fewer while they fill: 0 up to
// min_values (10), then standardised by the MAD of 10-31 values, a noisier scale whose z has
// heavier tails than the full window's. Unmarked, a key's first model (keys.min_records 30) was
// built from those records alone, and its next records (a key's 31st-64th) were read far out
// against it: 59-106 of each generated clean fleet's 92-125 flags (seeds 1-3, 7-9). Marked
// warming as a `mean`'s (derive_warmup.go), a key's builds leave them out and its first model
// waits for 30 records of full windows. The fleet: `gen --kind sensors` with 50 keys of two sensors at baselines of
// their own, clean, seed 1 (one of the tuning seeds of §12.71). Limits: keyroll27_rule.md's
// target, at most 0.1 % of a clean stream's records flagged (40 of 40,000; 95 before, 25 after
// on this seed), and at most 2 of the 1,700 records of the keys' first-model stretch (0.1 % of
// them, rounded up; 71 before, 0 after).
func TestReplayKeyedRobustZFirstModelsNotFlagged(t *testing.T) {
	const keys, last = 50, 32
	data := gen(t, "--kind", "sensors", "--rows", "40000", "--head", "10000", "--keys", strconv.Itoa(keys),
		"--sensors", "2", "--seed", "1", "--spike-rate", "0")
	cfg := writeFile(t, "rz.yaml", `ingest:
  features: [value1, value2]
  key_field: key
  derive:
    features:
      - {kind: robust_z, of: value1, last: 32}
      - {kind: robust_z, of: value2, last: 32}
detect:
  key_by: key
`)
	verdicts := replayWarmupVerdicts(t, data, cfg)
	rows := readVerdictRows(t, data) // key,value1,value2,label: each row's key
	seen := map[string]int{}
	pos := make([]int, len(rows)) // the row's place in its key's series
	for i, rec := range rows {
		pos[i] = seen[rec[0]]
		seen[rec[0]]++
	}
	var flagged, stretch []string
	for _, rec := range verdicts { // row,score,outlier,reason,recent
		if rec[2] != "true" {
			continue
		}
		row, _ := strconv.Atoi(rec[0])
		line := fmt.Sprintf("row %d (key %s's record %d) score %s: %s", row, rows[row][0], pos[row]+1, rec[1], rec[3])
		flagged = append(flagged, line)
		if pos[row] >= last-2 && pos[row] < 2*last {
			stretch = append(stretch, line)
		}
	}
	if len(flagged) > 40 {
		t.Errorf("%d of 40,000 clean records flagged, at most 40 (0.1 %%); the first:\n%s", len(flagged), strings.Join(flagged[:5], "\n"))
	}
	if len(stretch) > 2 {
		t.Errorf("%d of the %d records of the keys' first-model stretch (each key's records %d-%d) flagged, at most 2; the first:\n%s",
			len(stretch), keys*(last+2), last-1, 2*last, strings.Join(stretch[:min(5, len(stretch))], "\n"))
	}
}

// replayWarmupVerdicts replays data (label column `label`) under the config file cfg on the
// CPU, its first model after 10,000 records, and returns the verdict file's rows
// (row,score,outlier,reason,recent).
func replayWarmupVerdicts(t *testing.T, data, cfg string) [][]string {
	t.Helper()
	verdicts := filepath.Join(t.TempDir(), "verdicts.csv")
	_, errs, code := outlierd(t, "replay", "--input", data, "--label-column", "label", "--config", cfg,
		"--min-records", "10000", "--device", "cpu", "--verdicts-out", verdicts)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	return readVerdictRows(t, verdicts)
}
