package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// Tests of the sink at the pipeline's edges (issue 15): extreme and non-finite scores, payloads
// that json.Valid accepts but that are not UTF-8, and the per-row ids of the Arrow output.

// extremeRows are records far out: features at 1e20 and FLT_MAX (a common "no reading"
// sentinel), with the scores such records get or may get: a +Inf kNN weight (the squared
// distance overflows float32), a NaN, a -Inf and a weight that is finite but huge.
func extremeRows() []testbatch.Row {
	inf, nan := math.Inf(1), math.NaN()
	return []testbatch.Row{
		{Partition: 0, Offset: 1, Key: []byte("far"), Time: ts0, Features: []float32{1e20, 0}, Payload: []byte(`{"temp":1e20,"pressure":0}`),
			Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, EtaProbability: 0, Weight: inf, WStar: 6.02}},
		{Partition: 0, Offset: 2, Key: []byte("max"), Time: ts0, Features: []float32{math.MaxFloat32, 0}, Payload: []byte(`{"temp":3.4028235e38,"pressure":0}`),
			Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, DensityOutlier: true, EtaProbability: nan,
				Subspace: []string{"temp"}, Weight: inf, WStar: inf}},
		{Partition: 1, Offset: 3, Key: []byte("neg"), Time: ts0, Features: []float32{-math.MaxFloat32, 0}, Payload: []byte(`{"temp":-3.4028235e38,"pressure":0}`),
			Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, EtaProbability: math.Inf(-1), Weight: nan, WStar: 1}},
		{Partition: 1, Offset: 4, Key: []byte("huge"), Time: ts0, Features: []float32{1e20, 1e20}, Payload: []byte(`{"temp":1e20,"pressure":1e20}`),
			Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, EtaProbability: 1e-300, Weight: math.MaxFloat64, WStar: 6.02}},
	}
}

// floatOut reads a float field of the JSON output by the documented rule: a JSON number when
// finite, else one of the strings "Infinity", "-Infinity", "NaN".
func floatOut(t *testing.T, raw json.RawMessage) float64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "Infinity", "-Infinity", "NaN":
		default:
			t.Errorf("float field %s: a string other than Infinity, -Infinity, NaN", raw)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Errorf("float field %s: %v", raw, err)
		}
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			t.Errorf("float field %s: a finite value written as a string", raw)
		}
		return v
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("float field %s: neither a number nor a string: %v", raw, err)
	}
	return v
}

// sameFloat is == that also takes NaN as equal to NaN.
func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// TestJSONNonFiniteScores: every float field of the scores is written, whatever its value; a
// non-finite one as the string the rule names, which parses back (strconv.ParseFloat, Python's
// float(), JavaScript's Number()) to the same value. Before, such a record became a dead letter.
func TestJSONNonFiniteScores(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := extremeRows()
	b := testbatch.New(t, mem, "sensors", features, false, true, rows)
	defer b.Record.Release()
	c, err := batchColumns(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		v, err := encodeJSON(b, c, i)
		if err != nil {
			t.Errorf("row %d (weight %v, w* %v, eta %v): %v", i, r.Score.Weight, r.Score.WStar, r.Score.EtaProbability, err)
			continue
		}
		if !json.Valid(v) || !utf8.Valid(v) {
			t.Fatalf("row %d: invalid JSON %s", i, v)
		}
		var out struct {
			Scores map[string]json.RawMessage `json:"scores"`
		}
		if err := json.Unmarshal(v, &out); err != nil {
			t.Fatalf("row %d: %v: %s", i, err, v)
		}
		for name, want := range map[string]float64{"weight": r.Score.Weight, "w_star": r.Score.WStar, "eta_probability": r.Score.EtaProbability} {
			if got := floatOut(t, out.Scores[name]); !sameFloat(got, want) {
				t.Errorf("row %d: %s = %s, want %v", i, name, out.Scores[name], want)
			}
		}
		if string(out.Scores["outlier"]) != "true" {
			t.Errorf("row %d: outlier %s, want true", i, out.Scores["outlier"])
		}
	}
}

// TestJSONFiniteScoresUnchanged: finite scores are JSON numbers exactly as encoding/json writes
// a float64 (the golden file pins the rest), so the rule for non-finite values changes nothing
// for the others.
func TestJSONFiniteScoresUnchanged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// math.Copysign(0, -1) is negative zero (the literal -0.0 is +0 in Go): encoding/json writes it "-0".
	vals := []float64{0, math.Copysign(0, -1), 1e-300, 5e-324, 1e-7, 0.12, 6.02, 1e20, 1e21, math.MaxFloat32, math.MaxFloat64, -math.MaxFloat64}
	var rows []testbatch.Row
	for i, v := range vals {
		rows = append(rows, testbatch.Row{Partition: 0, Offset: int64(i), Time: ts0, Features: []float32{0, 0}, Payload: []byte("{}"),
			Score: batch.Score{Scored: true, EtaProbability: v, Weight: v, WStar: v}})
	}
	b := testbatch.New(t, mem, "s", features, false, true, rows)
	defer b.Record.Release()
	c, err := batchColumns(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		out, err := encodeJSON(b, c, i)
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		num, _ := json.Marshal(v)
		for _, f := range []string{"eta_probability", "weight", "w_star"} {
			if want := []byte(`"` + f + `":` + string(num)); !bytes.Contains(out, want) {
				t.Errorf("%v: output %s lacks %s", v, out, want)
			}
		}
	}
}

// TestArrowNonFiniteScores: the Arrow output carries the same values in its float64 columns
// (IEEE 754 +Inf, -Inf, NaN; null only for a record that was not scored), and the features at
// FLT_MAX and 1e20 unchanged.
func TestArrowNonFiniteScores(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := extremeRows()
	b := testbatch.New(t, mem, "sensors", features, false, true, rows)
	defer b.Record.Release()
	msgs := arrowOutputs(t, mem, b, 1<<20)
	seen := 0
	for _, m := range msgs {
		forEachArrowRow(t, mem, m.Value, func(get func(string) any) {
			off := get("_offset").(int64)
			var r *testbatch.Row
			for i := range rows {
				if rows[i].Offset == off {
					r = &rows[i]
				}
			}
			if r == nil {
				t.Fatalf("row with offset %d not in the batch", off)
			}
			seen++
			for name, want := range map[string]float64{ColWeight: r.Score.Weight, ColWStar: r.Score.WStar, ColEtaProbability: r.Score.EtaProbability} {
				got, ok := get(name).(float64)
				if !ok || !sameFloat(got, want) {
					t.Errorf("offset %d: %s = %v, want %v", off, name, get(name), want)
				}
			}
			if got := get("temp").(float32); got != r.Features[0] {
				t.Errorf("offset %d: temp = %v, want %v", off, got, r.Features[0])
			}
		})
	}
	if seen != len(rows) {
		t.Errorf("%d rows in the Arrow output, want %d", seen, len(rows))
	}
}

// arrowOutputs returns the Arrow output messages of b with emit: all and the given
// max_message_bytes, encoded as Write does, without a broker; it fails on any dead letter.
func arrowOutputs(t *testing.T, mem memory.Allocator, b *batch.Batch, maxBytes int) []kafka.Message {
	t.Helper()
	cfg := Default()
	cfg.Brokers, cfg.Topic, cfg.DeadLetterTopic = []string{"127.0.0.1:1"}, "out", "dlq" // never dialled
	cfg.Format, cfg.Emit, cfg.MaxMessageBytes = FormatArrow, EmitAll, maxBytes
	s, err := New(cfg, WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := batchColumns(b)
	if err != nil {
		t.Fatal(err)
	}
	c.emit = EmitAll
	msgs, dead, err := s.arrowMessages(b, c)
	if err != nil || len(dead) != 0 {
		t.Fatalf("arrowMessages: %v, %d dead letters, want none", err, len(dead))
	}
	return msgs
}

// forEachArrowRow reads one Arrow output message and calls fn per row with a getter by column
// name (nil for a null; float32, float64, int32, int64, string or bool otherwise).
func forEachArrowRow(t *testing.T, mem memory.Allocator, value []byte, fn func(get func(string) any)) {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(value), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("ipc reader: %v", err)
	}
	defer rd.Release()
	for rd.Next() {
		rec := rd.Record()
		for k := 0; k < int(rec.NumRows()); k++ {
			fn(func(name string) any {
				idx := rec.Schema().FieldIndices(name)
				if len(idx) != 1 {
					t.Fatalf("column %q: %d in the schema, want 1", name, len(idx))
				}
				col := rec.Column(idx[0])
				if col.IsNull(k) {
					return nil
				}
				switch a := col.(type) {
				case *array.Float32:
					return a.Value(k)
				case *array.Float64:
					return a.Value(k)
				case *array.Int32:
					return a.Value(k)
				case *array.Int64:
					return a.Value(k)
				case *array.String:
					return a.Value(k)
				case *array.Boolean:
					return a.Value(k)
				case *array.Uint64:
					return a.Value(k)
				case *array.Timestamp:
					return a.Value(k).ToTime(arrow.Millisecond).UTC()
				case *array.List: // (list<utf8>: subspace, warming)
					lo, hi := a.ValueOffsets(k)
					names := a.ListValues().(*array.String)
					out := []string{}
					for v := lo; v < hi; v++ {
						out = append(out, names.Value(int(v)))
					}
					return out
				}
				t.Fatalf("column %q: type %s not handled", name, col.DataType())
				return nil
			})
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("ipc reader: %v", err)
	}
}

// TestJSONPayloadInvalidUTF8: a payload that is JSON by grammar but holds invalid UTF-8 in a
// string (json.Valid accepts it) is not embedded raw, which would make the output invalid
// JSON (RFC 8259 requires UTF-8): by the documented rule it is written as base64.
func TestJSONPayloadInvalidUTF8(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	payloads := [][]byte{
		[]byte("{\"temp\":1,\"pressure\":2,\"note\":\"\xff\xfe\"}"),
		[]byte("{\"temp\":1,\"pressure\":2,\"\xc3\x28\":\"x\"}"),        // invalid UTF-8 in a key
		[]byte("{\"temp\":1,\"pressure\":2,\"note\":\"\xed\xa0\x80\"}"), // an encoded surrogate
	}
	var rows []testbatch.Row
	for i, p := range payloads {
		rows = append(rows, testbatch.Row{Partition: 0, Offset: int64(i), Time: ts0, Features: []float32{1, 2}, Payload: p,
			Score: batch.Score{Scored: true, Weight: 1, WStar: 2}})
	}
	b := testbatch.New(t, mem, "s", features, false, true, rows)
	defer b.Record.Release()
	c, err := batchColumns(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range payloads {
		v, err := encodeJSON(b, c, i)
		if err != nil {
			t.Fatalf("payload %q: %v", p, err)
		}
		if !utf8.Valid(v) || !json.Valid(v) {
			t.Errorf("payload %q: the output is not valid JSON (UTF-8): %q", p, v)
			continue
		}
		var out struct {
			Payload         json.RawMessage `json:"payload"`
			PayloadEncoding string          `json:"payload_encoding"`
		}
		if err := json.Unmarshal(v, &out); err != nil {
			t.Fatal(err)
		}
		var s string
		if err := json.Unmarshal(out.Payload, &s); err != nil || out.PayloadEncoding != "base64" {
			t.Errorf("payload %q: payload %s, encoding %q; want a base64 string, encoding base64", p, out.Payload, out.PayloadEncoding)
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(s); err != nil || !bytes.Equal(got, p) {
			t.Errorf("payload %q: base64 decodes to %q (%v)", p, got, err)
		}
	}
}

// TestArrowStableIDs: every row of the Arrow output carries its id "<topic>/<partition>/
// <offset>" (column _id), the same as the JSON output's "id", whatever the batch boundaries:
// the same records re-read in other batches (a redelivery after a restart), or split by
// max_message_bytes, give the same ids, so consumers de-duplicate rows by _id. The message
// key (the offset range) does change with the boundaries.
func TestArrowStableIDs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var rows []testbatch.Row
	for i := 0; i < 40; i++ {
		rows = append(rows, testbatch.Row{Partition: int32(i % 3), Offset: int64(100 + i/3), Time: ts0, Features: []float32{float32(i), 1}, Payload: []byte("{}"),
			Score: batch.Score{Scored: true, Outlier: i%4 == 0, Weight: float64(i), WStar: 20}})
	}
	// idsOf encodes rows as batches cut at the given boundaries and returns id -> temp of each
	// output row, and the message keys.
	idsOf := func(cuts []int, maxBytes int) (map[string]float32, map[string]bool) {
		ids, keys := map[string]float32{}, map[string]bool{}
		lo := 0
		for _, hi := range append(cuts, len(rows)) {
			b := testbatch.New(t, mem, "sensors", features, false, true, rows[lo:hi])
			for _, m := range arrowOutputs(t, mem, b, maxBytes) {
				keys[string(m.Key)] = true
				forEachArrowRow(t, mem, m.Value, func(get func(string) any) {
					id, _ := get(ColID).(string)
					want := OutputID("sensors", get("_partition").(int32), get("_offset").(int64))
					if id != want {
						t.Errorf("row %s: _id %q", want, id)
					}
					if _, dup := ids[id]; dup {
						t.Errorf("id %s twice in one delivery", id)
					}
					ids[id] = get("temp").(float32)
				})
			}
			b.Record.Release()
			lo = hi
		}
		return ids, keys
	}
	ids1, keys1 := idsOf(nil, 1<<20)
	if len(ids1) != len(rows) {
		t.Fatalf("%d ids, want %d", len(ids1), len(rows))
	}
	for _, redelivery := range []struct {
		cuts     []int
		maxBytes int
	}{
		{[]int{7, 8, 30}, 1 << 20},
		{[]int{1, 2, 3, 20, 39}, 1 << 20},
		{nil, 4500}, // split by size: several messages per partition (4000 before the warming column, which a row alone then exceeded)
	} {
		ids2, keys2 := idsOf(redelivery.cuts, redelivery.maxBytes)
		if len(ids2) != len(ids1) {
			t.Errorf("cuts %v, max %d bytes: %d ids, want %d", redelivery.cuts, redelivery.maxBytes, len(ids2), len(ids1))
		}
		for id, v := range ids1 {
			if got, ok := ids2[id]; !ok || got != v {
				t.Errorf("cuts %v, max %d bytes: id %s has temp %v (present %v), want %v", redelivery.cuts, redelivery.maxBytes, id, got, ok, v)
			}
		}
		same := len(keys1) == len(keys2)
		for k := range keys1 {
			same = same && keys2[k]
		}
		if same {
			t.Errorf("cuts %v, max %d bytes: the message keys did not change (%v): the test does not move the boundaries", redelivery.cuts, redelivery.maxBytes, keys2)
		}
	}
}
