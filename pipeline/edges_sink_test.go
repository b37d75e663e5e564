package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// Real-broker tests of the sink's promises at the pipeline's edges (issue 15): the most
// extreme records, whose scores may be non-finite, reach the output topic and not the
// dead-letter topic, in both output formats; every Arrow row carries its stable id.

// flagMax is FLT_MAX as producers print it, a common "no reading" sentinel.
const flagMax = "3.4028235e38"

// extremeRecord is a valid sensor message (a copy of base) with the given fields replaced.
func extremeRecord(t *testing.T, base *sensorRecord, key string, fields map[string]string) *sensorRecord {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(base.value, &m); err != nil {
		t.Fatal(err)
	}
	for f, v := range fields {
		if _, ok := m[f]; !ok {
			t.Fatalf("sensor message has no field %q", f)
		}
		m[f] = json.RawMessage(v)
	}
	v, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &sensorRecord{p: base.p, key: []byte(key), value: v}
}

// extremeCases are records far out of the N(mode, spread) sensor stream: single features at
// 1e20 and at ±FLT_MAX, and every feature at FLT_MAX.
func extremeCases(t *testing.T, base *sensorRecord) []*sensorRecord {
	all := map[string]string{}
	for _, f := range []string{"temp", "pressure", "humidity", "vibration", "current", "voltage", "rpm", "flow"} {
		all[f] = flagMax
	}
	return []*sensorRecord{
		extremeRecord(t, base, "x-1e20", map[string]string{"temp": "1e20"}),
		extremeRecord(t, base, "x-fltmax", map[string]string{"pressure": flagMax}),
		extremeRecord(t, base, "x-neg-fltmax", map[string]string{"rpm": "-" + flagMax}),
		extremeRecord(t, base, "x-1e20-two", map[string]string{"humidity": "1e20", "flow": "-1e20"}),
		extremeRecord(t, base, "x-all-fltmax", all),
	}
}

// jsonScore reads a float of the JSON output's scores by the documented rule: a number, or
// "Infinity", "-Infinity", "NaN".
func jsonScore(raw json.RawMessage) (float64, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case sink.JSONPosInf, sink.JSONNegInf, sink.JSONNaN:
			return strconv.ParseFloat(s, 64)
		}
		return 0, fmt.Errorf("string %s is not one of the non-finite spellings", raw)
	}
	var v float64
	err := json.Unmarshal(raw, &v)
	return v, err
}

// TestExtremeScoresReachOutputRealBroker: with emit: all, a stream of normal sensor records (the
// first model built from them with the defaults), then records at 1e20 and FLT_MAX, then normal
// records again. Every record gets exactly one output in the output topic, the extreme ones
// included, scored, with whatever scores they get written by the documented rule (JSON) or as
// IEEE values (Arrow); nothing reaches the dead-letter topic, and the offsets are committed to
// the end. Before, a +Inf weight made the JSON output unencodable and the record a dead letter.
func TestExtremeScoresReachOutputRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	for _, format := range []sink.Format{sink.FormatJSON, sink.FormatArrow} {
		t.Run(string(format), func(t *testing.T) {
			const parts = 2
			in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
			testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
			cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
			cfg.Sink.Format = format

			// The defaults' first model: min_records normal records, and some more.
			normal := makeSensorRecords(t, cfg.Detect.MinRecords+1000, parts, 21, 0, 0)
			input := newInput(in, parts, normal)
			produceSensors(t, br, input)
			r := startPipeline(t, cfg, nil)
			r.waitCommitted(t, br, group, input, 90*time.Second)

			extreme := extremeCases(t, normal[0])
			extreme = append(extreme, extremeCases(t, normal[1])...) // the other partition too
			after := makeSensorRecords(t, 500, parts, 22, 0, 0)
			cl := testsupport.NewProducer(t, br)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, recs := range [][]*sensorRecord{extreme, after} {
				input.records = append(input.records, recs...)
				if err := produceRecords(ctx, cl, input, recs); err != nil {
					t.Fatal(err)
				}
			}
			cl.Close()
			r.waitCommitted(t, br, group, input, 60*time.Second)
			if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
				t.Fatalf("graceful stop: Run returned %v, want nil", err)
			}

			if dls := testsupport.ReadTopic(t, br, dlq, 1); len(dls) != 0 {
				for _, m := range dls {
					src, _ := testsupport.Header(m, sink.HeaderSource)
					reason, _ := testsupport.Header(m, sink.HeaderError)
					t.Errorf("dead letter from %s: %s", src, reason)
				}
			}
			isExtreme := map[coord]bool{}
			for _, e := range extreme {
				isExtreme[coord{e.p, e.off}] = true
			}
			// Each produced record's outputs, by id, and the extreme records' scores.
			seen := map[string]int{}
			scores := map[string][3]float64{} // id -> eta-probability, weight, w*
			for _, m := range testsupport.ReadTopic(t, br, out, parts) {
				if format == sink.FormatJSON {
					readJSONOutput(t, m, seen, scores)
				} else {
					readArrowOutput(t, m, seen, scores)
				}
			}
			for _, rec := range input.records {
				id := fmt.Sprintf("%s/%d/%d", in, rec.p, rec.off)
				if seen[id] != 1 {
					t.Errorf("record %s (key %s): %d outputs, want 1", id, rec.key, seen[id])
				}
				if isExtreme[coord{rec.p, rec.off}] {
					sc, ok := scores[id]
					if !ok {
						t.Errorf("extreme record %s (key %s): not scored", id, rec.key)
						continue
					}
					t.Logf("%s %s: eta-probability %v, weight %v, w* %v", id, rec.key, sc[0], sc[1], sc[2])
				}
			}
		})
	}
}

// readJSONOutput checks one JSON output (valid UTF-8 JSON, its float scores by the documented
// rule) and counts it in seen under its id; a scored record's scores go to scores.
func readJSONOutput(t *testing.T, m *kgo.Record, seen map[string]int, scores map[string][3]float64) {
	t.Helper()
	if !utf8.Valid(m.Value) || !json.Valid(m.Value) {
		t.Errorf("output at %d/%d is not valid JSON: %q", m.Partition, m.Offset, m.Value)
		return
	}
	var o struct {
		ID     string                     `json:"id"`
		Scores map[string]json.RawMessage `json:"scores"`
	}
	if err := json.Unmarshal(m.Value, &o); err != nil {
		t.Errorf("output at %d/%d: %v", m.Partition, m.Offset, err)
		return
	}
	if id, _ := testsupport.Header(m, sink.HeaderID); id != o.ID {
		t.Errorf("output %s: header %s = %q", o.ID, sink.HeaderID, id)
	}
	seen[o.ID]++
	if o.Scores == nil {
		return
	}
	var sc [3]float64
	for i, f := range []string{"eta_probability", "weight", "w_star"} {
		v, err := jsonScore(o.Scores[f])
		if err != nil {
			t.Errorf("output %s: %s: %v", o.ID, f, err)
		}
		sc[i] = v
	}
	scores[o.ID] = sc
}

// readArrowOutput reads one Arrow output message (an IPC stream) and counts its rows in seen
// under their _id; scored rows' scores go to scores.
func readArrowOutput(t *testing.T, m *kgo.Record, seen map[string]int, scores map[string][3]float64) {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(m.Value))
	if err != nil {
		t.Errorf("output at %d/%d: %v", m.Partition, m.Offset, err)
		return
	}
	defer rd.Release()
	col := func(name string) int {
		idx := rd.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("Arrow output: column %q appears %d times, want once", name, len(idx))
		}
		return idx[0]
	}
	id, scored := col(sink.ColID), col(sink.ColScored)
	fcols := [3]int{col(sink.ColEtaProbability), col(sink.ColWeight), col(sink.ColWStar)}
	for rd.Next() {
		rec := rd.Record()
		ids := rec.Column(id).(*array.String)
		for k := 0; k < int(rec.NumRows()); k++ {
			seen[ids.Value(k)]++
			if !rec.Column(scored).(*array.Boolean).Value(k) {
				continue
			}
			var sc [3]float64
			for i, c := range fcols {
				a := rec.Column(c).(*array.Float64)
				if a.IsNull(k) {
					t.Errorf("row %s: scored, but column %d is null", ids.Value(k), c)
				}
				sc[i] = a.Value(k)
			}
			scores[ids.Value(k)] = sc
		}
	}
	if err := rd.Err(); err != nil {
		t.Errorf("output at %d/%d: %v", m.Partition, m.Offset, err)
	}
}

// TestArrowIDsStableRealBroker: the same input read twice by the pipeline (two consumer groups,
// as a redelivery reads it again) with other batch boundaries (ingest.batch_size 1000, then
// 97) gives Arrow messages with other keys but the same rows under the same _id: one per
// produced record, "<topic>/<partition>/<offset>". before_model: pass, so that the rows go out
// without waiting for a model (they are then unscored).
func TestArrowIDsStableRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 2
	in := testsupport.UniqueName("in")
	testsupport.CreateTopics(t, br, map[string]int{in: parts})
	input := newInput(in, parts, makeSensorRecords(t, 3000, parts, 23, 0, 0))
	produceSensors(t, br, input)
	run := func(batchSize int) (map[string]int, map[string]bool) {
		out, dlq, group := testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
		testsupport.CreateTopics(t, br, map[string]int{out: parts, dlq: 1})
		cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
		cfg.Sink.Format = sink.FormatArrow
		cfg.Detect.BeforeModel = detect.BeforeModelPass
		cfg.Ingest.BatchSize = batchSize
		r := startPipeline(t, cfg, nil)
		r.waitCommitted(t, br, group, input, 60*time.Second)
		if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			t.Fatalf("graceful stop: Run returned %v, want nil", err)
		}
		seen, keys := map[string]int{}, map[string]bool{}
		for _, m := range testsupport.ReadTopic(t, br, out, parts) {
			keys[string(m.Key)] = true
			readArrowOutput(t, m, seen, map[string][3]float64{})
		}
		return seen, keys
	}
	seen1, keys1 := run(1000)
	seen2, keys2 := run(97)
	for _, rec := range input.records {
		id := fmt.Sprintf("%s/%d/%d", in, rec.p, rec.off)
		if seen1[id] != 1 || seen2[id] != 1 {
			t.Errorf("row %s: %d times in the first read, %d in the second, want once each", id, seen1[id], seen2[id])
		}
	}
	if len(seen1) != len(input.records) || len(seen2) != len(input.records) {
		t.Errorf("%d and %d distinct ids, want %d (the produced records)", len(seen1), len(seen2), len(input.records))
	}
	common := 0
	for k := range keys1 {
		if keys2[k] {
			common++
		}
	}
	t.Logf("%d messages in the first read, %d in the second, %d keys in common", len(keys1), len(keys2), common)
	if common == len(keys1) && len(keys1) == len(keys2) {
		t.Errorf("both reads gave the same message keys: the batch boundaries did not change, the test checks nothing")
	}
}
