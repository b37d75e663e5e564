package metrics

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestLiveAlertNamesWarmingColumns: an alert of the live view names the feature columns still
// warming on its record (batch.Batch.Warming: a derived mean or std whose window was still
// filling, its partial window's value shown, a std of one value 0), as the Arrow output's
// `warming` column does, so that an operator does not read a warming std's 0 as a stuck
// sensor; a record without one names none (the field absent). Failed first: the alert showed
// the value and nothing else (no "warming" in the event).
func TestLiveAlertNamesWarmingColumns(t *testing.T) {
	b := liveBatch(t, 100, 20, 104, 105)
	valid := make([]bool, b.Len())
	for i := range valid {
		valid[i] = i != 4 // (offset 104's pressure warming)
	}
	bld := array.NewFloat32Builder(memory.NewGoAllocator())
	bld.AppendValues(b.Feature(1), valid)
	col := bld.NewArray()
	bld.Release()
	cols := make([]arrow.Array, b.Record.NumCols())
	for c := range cols {
		cols[c] = b.Record.Column(c)
	}
	cols[1] = col
	w, err := batch.New(b.Topic, b.Features, array.NewRecord(b.Record.Schema(), cols, int64(b.Len())), b.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	col.Release()
	w.Scores, w.ModelVersion = b.Scores, b.ModelVersion
	b.Release()
	defer w.Release()

	m := New()
	m.OfferBatch(w, 2)
	s := m.live.read(0, 0, 0)
	if len(s.alerts) != 2 {
		t.Fatalf("%d alerts, want 2", len(s.alerts))
	}
	data, err := json.Marshal(alertsJSON(s.alerts))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if ws, ok := got[0]["warming"].([]any); !ok || len(ws) != 1 || ws[0] != "pressure" {
		t.Errorf("offset 104's alert %s: want warming [pressure]", data)
	}
	if _, ok := got[1]["warming"]; ok || !strings.Contains(string(data), `"values":[105,-105]`) {
		t.Errorf("offset 105's alert in %s: want no warming, values [105,-105]", data)
	}
}
