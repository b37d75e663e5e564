package pipeline

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestPipelineNoTimestampKfake: end to end (emit: all, JSON), a record whose Kafka timestamp
// is -1 ("none": old producers, message format v0) or 0 is scored and written like any other,
// its "timestamp" null. Before, kafka-go's zero time for it went through as year 1:
// "0001-01-01T00:00:00Z".
func TestPipelineNoTimestampKfake(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	const n = 600
	t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		at := t0.Add(time.Duration(i) * time.Second)
		switch i % 7 {
		case 3:
			at = time.UnixMilli(-1)
		case 5:
			at = time.UnixMilli(0)
		}
		recs[i] = &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", i%3), Timestamp: at,
			Value: fmt.Appendf(nil, `{"temp":%d,"hum":%d}`, 20+i%5, 40+i%3)}
	}
	testsupport.Produce(t, br, recs...)
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 1000, 200, 50
	cfg.Detect.AlertCooldown = 10 * time.Minute
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	runUntilOut(t, cfg, n)
	seen := 0
	for _, m := range testsupport.ReadTopic(t, br, out, 1) {
		var o struct {
			Offset    int64   `json:"offset"`
			Timestamp *string `json:"timestamp"`
		}
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output %s: %v", m.Value, err)
		}
		seen++
		want := t0.Add(time.Duration(o.Offset) * time.Second).Format(time.RFC3339Nano)
		if o.Offset%7 == 3 || o.Offset%7 == 5 {
			if o.Timestamp != nil {
				t.Errorf("offset %d (no Kafka timestamp): timestamp %q, want null", o.Offset, *o.Timestamp)
			}
		} else if o.Timestamp == nil || *o.Timestamp != want {
			t.Errorf("offset %d: timestamp %v, want %s", o.Offset, o.Timestamp, want)
		}
	}
	if seen != n {
		t.Errorf("%d outputs, want %d", seen, n)
	}
}
