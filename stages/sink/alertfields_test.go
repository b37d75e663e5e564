package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// alertRows are the records whose explanation speaks of the alarm cap or an alert group
// (detect.alarm_rate, detect.alert_cooldown), each with the "scores" fields a program reads
// for it (nil: absent); the explanations say the same in words (TestExplain).
func alertRows() ([]testbatch.Row, []map[string]any) {
	at := ts0.Add(-30 * time.Second)
	sc := func(s batch.Score) batch.Score {
		s.Scored, s.Score, s.Threshold, s.Recent = true, 9, 5, 1
		return s
	}
	rows := []testbatch.Row{
		{Offset: 20, Key: []byte("sensor-1"), Score: sc(batch.Score{Suppressed: true})},
		{Offset: 21, Key: []byte("sensor-1"), Score: sc(batch.Score{Outlier: true, Grouped: true, AlertTimed: true, AlertAt: at.UnixMilli()})},
		{Offset: 22, Key: []byte("sensor-1"), Score: sc(batch.Score{Outlier: true, Folded: 3})},
		// An alert whose record had no timestamp: the group's time is unknown, not 1970.
		{Offset: 23, Key: []byte("sensor-2"), Score: sc(batch.Score{Outlier: true, Grouped: true})},
		{Offset: 24, Key: []byte("sensor-2"), Score: sc(batch.Score{Outlier: true})},
		// An alert at 0 ms: a time, not none.
		{Offset: 25, Key: []byte("sensor-3"), Score: sc(batch.Score{Outlier: true, Grouped: true, AlertTimed: true})},
	}
	want := []map[string]any{
		{"suppressed": true},
		{"folded": true, "alert_timestamp": at.Format(time.RFC3339Nano)},
		{"folded_into_previous_alert": 3.0},
		{"folded": true, "alert_timestamp": nil},
		{},
		{"folded": true, "alert_timestamp": "1970-01-01T00:00:00Z"},
	}
	for i := range rows {
		rows[i].Partition, rows[i].Time, rows[i].Features = 1, ts0.Add(time.Duration(i)*time.Second), []float32{1, 2}
		rows[i].Payload = []byte(`{"temp":1}`)
	}
	return rows, want
}

// checkAlertFields checks the alarm cap's and the alert groups' fields of one output's
// "scores" against want: each of them present with its value, or absent.
func checkAlertFields(t *testing.T, id string, value []byte, want map[string]any) {
	t.Helper()
	var out struct {
		Scores map[string]any `json:"scores"`
	}
	if err := json.Unmarshal(value, &out); err != nil {
		t.Fatalf("output %s: %v", id, err)
	}
	for _, f := range []string{"suppressed", "folded", "alert_timestamp", "folded_into_previous_alert"} {
		got, ok := out.Scores[f]
		w, wantOK := want[f]
		if ok != wantOK || fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("output %s: scores.%s = %v (present %v), want %v (present %v): %s", id, f, got, ok, w, wantOK, value)
		}
	}
}

// TestJSONAlertFields: a program reads from the JSON output, without parsing the explanation,
// that a record was held back by the alarm cap ("suppressed"), folded into its key's open
// alert ("folded", with that alert's "alert_timestamp"), or is an alert that closed a group
// ("folded_into_previous_alert"). With emit: all each record goes out with its fields; with
// emit: outliers the folded records stay out and the alert that counts them goes out.
func TestJSONAlertFields(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		for _, emit := range []Emit{EmitAll, EmitOutliers} {
			t.Run(string(emit), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				cfg := testConfig(t, br)
				cfg.Emit = emit
				s := openSink(t, cfg)
				rows, want := alertRows()
				b := testbatch.New(t, mem, "sensors", features, false, true, rows)
				defer b.Record.Release()
				if err := s.Write(context.Background(), b); err != nil {
					t.Fatalf("Write: %v", err)
				}
				wantByID := map[string]map[string]any{}
				for i, r := range rows {
					if emit == EmitAll || r.Score.Outlier && !r.Score.Grouped {
						wantByID[OutputID("sensors", r.Partition, r.Offset)] = want[i]
					}
				}
				for _, r := range testsupport.ConsumeExactly(t, br, cfg.Topic, len(wantByID)) {
					id, _ := testsupport.Header(r, HeaderID)
					w, ok := wantByID[id]
					if !ok {
						t.Errorf("output %s, not expected with emit: %s", id, emit)
						continue
					}
					delete(wantByID, id)
					checkAlertFields(t, id, r.Value, w)
				}
				if len(wantByID) > 0 {
					t.Errorf("outputs missing: %v", wantByID)
				}
			})
		}
	})
}

// TestArrowAlertFields: the Arrow output carries what the JSON output's "scores" says of the
// alarm cap, the alert groups and the key's model as columns of their own (suppressed, folded,
// alert_timestamp, folded_into_previous_alert, key_model_version), so that an Arrow consumer
// does not parse the explanation: each null when the record was not scored; alert_timestamp
// null unless folded into an alert with a time; key_model_version null when no key's model
// scored the record.
func TestArrowAlertFields(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows, want := alertRows()
	rows[4].Score.KeyModelVersion = 7
	rows = append(rows, testbatch.Row{Partition: 1, Offset: 26, Time: ts0, Features: []float32{1, 2}, Payload: []byte(`{"temp":1}`)}) // not scored
	b := testbatch.New(t, mem, "sensors", features, false, true, rows)
	defer b.Record.Release()
	byOffset := map[int64]map[string]any{}
	for i, r := range rows {
		w := map[string]any{ColSuppressed: false, ColFolded: false, ColAlertTimestamp: nil, ColFoldedIntoPrevious: int64(0), ColKeyModelVersion: nil}
		if !r.Score.Scored {
			w = map[string]any{ColSuppressed: nil, ColFolded: nil, ColAlertTimestamp: nil, ColFoldedIntoPrevious: nil, ColKeyModelVersion: nil}
		}
		if i < len(want) {
			for f, v := range want[i] {
				switch f {
				case "suppressed":
					w[ColSuppressed] = v
				case "folded":
					w[ColFolded] = v
				case "alert_timestamp":
					if v != nil {
						at, err := time.Parse(time.RFC3339Nano, v.(string))
						if err != nil {
							t.Fatal(err)
						}
						w[ColAlertTimestamp] = at.UTC()
					}
				case "folded_into_previous_alert":
					w[ColFoldedIntoPrevious] = int64(v.(float64))
				}
			}
		}
		if r.Score.KeyModelVersion != 0 {
			w[ColKeyModelVersion] = r.Score.KeyModelVersion
		}
		byOffset[r.Offset] = w
	}
	seen := 0
	for _, m := range arrowOutputs(t, mem, b, 1<<20) {
		forEachArrowRow(t, mem, m.Value, func(get func(string) any) {
			seen++
			off := get("_offset").(int64)
			for col, w := range byOffset[off] {
				if got := get(col); fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("offset %d: %s = %v, want %v", off, col, got, w)
				}
			}
		})
	}
	if seen != len(rows) {
		t.Errorf("%d rows in the Arrow output, want %d", seen, len(rows))
	}
}
