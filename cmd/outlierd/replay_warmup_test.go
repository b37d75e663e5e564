package main

import (
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
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
	dir := t.TempDir()
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
	verdicts := filepath.Join(dir, "verdicts.csv")
	_, errs, code := outlierd(t, "replay", "--input", data, "--label-column", "label", "--config", cfg,
		"--min-records", "10000", "--device", "cpu", "--verdicts-out", verdicts)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := os.Open(verdicts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var warming []string
	for _, rec := range recs[1:] { // row,score,outlier,reason,recent
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
