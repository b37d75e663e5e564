package main

import (
	"encoding/csv"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestReplayContextualExplainedAsCombination (newuser29): a record flagged for its context (a
// reading ordinary twelve hours away, read beside time_of_day) has no reading far from the
// window's median, and the explanation named the farthest anyway: on the stream below every
// one of the 6 flagged contextual records read "score 5.41 >= threshold 5 (temp -1.3 robust sd
// from the window's median)", an ordinary reading given as the cause of the page. Within 3
// robust sd (the level below which explainDeviations names no second feature) the explanation
// now says that every feature is within it and that the combination is what is rare, naming the
// farthest as such; a spike keeps "temp +N robust sd from the window's median".
func TestReplayContextualExplainedAsCombination(t *testing.T) {
	data := gen(t, "--kind", "sensors", "--rows", "60000", "--ts", "--seed", "8", "--spike-rate", "0.0002",
		"--daily", "4", "--contextual", "10", "--head", "10000", "--kind-column")
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	kind := rows[0][len(rows[0])-2] // (anomaly_kind, before label)
	if kind != "anomaly_kind" {
		t.Fatalf("gen's columns %v: want anomaly_kind before label", rows[0])
	}
	cfg := writeFile(t, "ctx.yaml", `ingest:
  features: [temp, pressure, humidity]
  event_time_field: ts
  derive:
    features:
      - {kind: time_of_day}
`) // (one reading a minute: the default window of 50,000 spans 35 days, the pair is read)
	ctx, spikes := 0, 0
	for _, rec := range replayCycleVerdicts(t, data, cfg) { // row,score,outlier,reason,recent
		if rec[2] != "true" {
			continue
		}
		row, _ := strconv.Atoi(rec[0])
		reason := rec[3]
		switch rows[1+row][len(rows[0])-2] {
		case "spike":
			spikes++
			if !strings.Contains(reason, "(temp +") || !strings.Contains(reason, " robust sd from the window's median)") {
				t.Errorf("the spike at row %d explained %q", row, reason)
			}
		case "contextual":
			ctx++
			if !strings.Contains(reason, "every feature within 3 robust sd of the window's median") ||
				!strings.Contains(reason, "the combination is what is rare") {
				t.Errorf("the contextual record at row %d (score %s) explained %q: an ordinary reading given as the cause", row, rec[1], reason)
			}
		}
	}
	if ctx == 0 || spikes == 0 {
		t.Fatalf("flagged %d contextual records and %d spikes: the test reads too few explanations", ctx, spikes)
	}
	t.Logf("%d contextual records and %d spikes flagged", ctx, spikes)
}
