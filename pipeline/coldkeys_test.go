package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestKeysEvictedColdAreLoggedKfake: under detect.key_by: key, a producer that keys every
// message by something unique (a record id, as change-data-capture does) or a fleet larger
// than keys.max_keys makes keys that are evicted before they ever get their own model: every
// record is scored by the global model, the keys' memory sits at max_keys (868 MB RSS for
// 100,000 such keys of 2 features in replay), and nothing said so but the gauges
// (outlierd_keys_warming at max_keys, outlierd_key_evictions_total rising). Now the log says
// it, a warning a minute at most while it goes on, with the count, keys.max_keys and
// keys.min_records and what to check (ingest.key_field, the message key, max_keys).
func TestKeysEvictedColdAreLoggedKfake(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
	const n = 3000
	recs := makeSensorRecords(t, n, 1, 7, 0, 0)
	for i, r := range recs {
		r.key = fmt.Appendf(nil, "event-%d", i) // a unique id per record
	}
	input := newInput(in, 1, recs)
	produceSensors(t, br, input)
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Detect.Window, cfg.Detect.MinRecords = 1000, 500
	cfg.Detect.Keys.MaxKeys = 100
	r, logs := startLogged(t, cfg)
	deadline := time.Now().Add(60 * time.Second)
	for r.p.Stats().RecordsOut.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records out after 60 s", r.p.Stats().RecordsOut.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.stop(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "evicted before their own model") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d lines on the keys evicted cold, want 1 (a minute at most)", len(lines))
	}
	for _, want := range []string{`"level":"warn"`, "keys.max_keys", "keys.min_records", "ingest.key_field", `"max_keys":100`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line lacks %s: %s", want, lines[0])
		}
	}
}
