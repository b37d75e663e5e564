package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTailShowsAlertFields: tail's line says what the JSON output's scores.suppressed, folded
// with alert_timestamp, and folded_into_previous_alert say, read from the outputs the sink's
// golden file pins (what the sink writes, not a copy of it here).
func TestTailShowsAlertFields(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "stages", "sink", "testdata", "json_output.golden"))
	if err != nil {
		t.Fatal(err)
	}
	const flagged = "  outlier: score 9 >= threshold 5; "
	want := map[string]string{
		"sensors/1/20": "sensors/1/20  key=sensor-1  score=9.00 (suppressed: alarm cap)  not flagged, the alarm cap is spent (detect.alarm_rate): score 9 >= threshold 5",
		"sensors/1/21": "sensors/1/21  key=sensor-1  score=9.00 (folded into the alert of 2026-11-03T09:59:30.123Z)" + flagged + "folded into this key's open alert (detect.alert_cooldown)",
		"sensors/1/22": "sensors/1/22  key=sensor-1  score=9.00 (+3 folded into the previous alert)" + flagged + "3 more flagged records of this key were folded into its previous alert (detect.alert_cooldown)",
		"sensors/1/23": "sensors/1/23  key=sensor-2  score=9.00 (folded into the key's open alert)" + flagged + "folded into this key's open alert (detect.alert_cooldown)",
	}
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		var o tailOutput
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		w, ok := want[o.ID]
		if !ok {
			continue
		}
		delete(want, o.ID)
		if got := formatTail(&o); got != w {
			t.Errorf("tail printed\n%s\nwant\n%s", got, w)
		}
	}
	for id := range want {
		t.Errorf("the golden has no output %s", id)
	}
}
