package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var ts0 = time.Date(2026, 11, 3, 10, 0, 0, 123_000_000, time.UTC)

// sampleRows covers the cases of the JSON schema: key kinds, payload kinds, each verdict.
func sampleRows() []testbatch.Row {
	return []testbatch.Row{
		{Partition: 0, Offset: 10, Key: []byte("sensor-1"), Time: ts0, Features: []float32{21.5, 1013}, SD: []float32{0.1, 2},
			Payload: []byte(`{"temp": 21.5, "pressure": 1013, "note": "<ok> & fine"}`),
			Score: batch.Score{Scored: true, Outlier: true, DensityOutlier: true, EtaProbability: 0.12,
				Subspace: []string{"temp", "pressure"}, Weight: 3.5, WStar: 6.02, Recent: 2.5}},
		{Partition: 0, Offset: 11, Key: []byte("sensor-2"), Time: ts0.Add(time.Millisecond), Features: []float32{20, 1000}, SD: []float32{0.1, 2},
			Payload: []byte(`{"temp":20,"pressure":1000}`),
			Score:   batch.Score{Scored: true, EtaProbability: 0.83, Subspace: []string{"temp"}, Weight: 2.104, WStar: 6.02, Recent: math.NaN()}},
		{Partition: 1, Offset: 7, Key: []byte{0xff, 0x00, 0xfe}, Time: ts0.Add(2 * time.Millisecond), Features: []float32{99, 2000}, SD: []float32{0.5, 3},
			Payload: []byte("temp=99 pressure=2000"),
			Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, EtaProbability: 0.9,
				Subspace: []string{"pressure"}, Weight: 8.3149, WStar: 6.02}},
		{Partition: 1, Offset: 8, Key: nil, Time: ts0.Add(3 * time.Millisecond), Features: []float32{-40, 500}, SD: []float32{1, 1},
			Payload: []byte{0xc3, 0x28, 0x01},
			Score: batch.Score{Scored: true, Outlier: true, DensityOutlier: true, DistanceOutlier: true, EtaProbability: 0.004,
				Subspace: []string{"temp"}, Weight: 12, WStar: 6.02}},
		{Partition: 2, Offset: 0, Key: []byte("sensor-3"), Time: ts0.Add(4 * time.Millisecond), Features: []float32{22, 1012}, SD: []float32{0.1, 2},
			Payload: []byte(`"just a string"`),
			Score:   batch.Score{}},
	}
}

var features = []string{"temp", "pressure"}

// TestJSONGolden pins the JSON output schema: every sample row and alert row with emit: all.
func TestJSONGolden(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	alerts, _ := alertRows()
	for i := range alerts {
		alerts[i].SD = []float32{0.1, 2}
	}
	b := testbatch.New(t, mem, "sensors", features, true, true, append(sampleRows(), alerts...))
	defer b.Record.Release()
	b.ModelVersion = 3
	c, err := batchColumns(b)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for i := 0; i < c.rows; i++ {
		v, err := encodeJSON(b, c, i)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if !json.Valid(v) {
			t.Fatalf("row %d: invalid JSON %s", i, v)
		}
		got.Write(v)
		got.WriteByte('\n')
	}
	path := filepath.Join("testdata", "json_output.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("JSON output differs from %s (run go test -update after an intended change):\ngot:\n%s\nwant:\n%s", path, got.Bytes(), want)
	}
}

func TestExplain(t *testing.T) {
	tests := []struct {
		s    batch.Score
		want string
	}{
		{batch.Score{}, "not scored: no model yet"},
		{batch.Score{Scored: true, Outlier: true, DensityOutlier: true, EtaProbability: 0.12, Subspace: []string{"temp", "pressure"}},
			"low density in subspace temp+pressure: eta-probability 0.12 < delta"},
		{batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, Weight: 8.314, WStar: 6.02},
			"kNN weight 8.31 >= w* 6.02"},
		{batch.Score{Scored: true, Outlier: true, DensityOutlier: true, DistanceOutlier: true, EtaProbability: 0.5, Weight: 7, WStar: 6},
			"low density: eta-probability 0.5 < delta; kNN weight 7.00 >= w* 6.00"},
		{batch.Score{Scored: true, EtaProbability: 0.9, Subspace: []string{"a"}, Weight: 1, WStar: 2},
			"inlier: density normal in subspace a: lowest eta-probability 0.9 >= delta; kNN weight 1.00 < w* 2.00"},
		{batch.Score{Scored: true, EtaProbability: 0.9}, "inlier: density normal: lowest eta-probability 0.9 >= delta"},
		{batch.Score{Scored: true}, "inlier"},
		// Flagged, yet no test fired (the hypercube under combine all, say): the normal tests
		// are not listed as if they explained the flag.
		{batch.Score{Scored: true, Outlier: true, EtaProbability: 0.6, Weight: 5, WStar: 6},
			"outlier by the combined rule"},
		// detect.flag_by significance or rate: the combined score decided; the tests that fired
		// follow as evidence, never those that found the record normal (issue 20: "density
		// normal; kNN weight < w*" read as a contradiction of the flag).
		{batch.Score{Scored: true, Outlier: true, DensityOutlier: true, EtaProbability: 0.1, Subspace: []string{"temp"}, Weight: 5, WStar: 6, Score: 3.5, Threshold: 2.1},
			"outlier: score 3.5 >= threshold 2.1; low density in subspace temp: eta-probability 0.1 < delta"},
		{batch.Score{Scored: true, Outlier: true, Weight: 5, WStar: 6, EtaProbability: 0.7, Score: 12.5, Threshold: 5,
			Deviations: []batch.Deviation{{Feature: "temp", RobustSD: 23.41}, {Feature: "humidity", RobustSD: -12}}},
			"outlier: score 12.5 >= threshold 5 (temp +23.4 robust sd, humidity -12 robust sd from the window's median)"},
		// detect.key_by: a record its key's model scored is measured against its key's window
		// (it read "from the window's median", the global window's words); a warming key's
		// record against the global window, and said so.
		{batch.Score{Scored: true, Outlier: true, ByKey: true, Score: 9, Threshold: 5, Deviations: []batch.Deviation{{Feature: "value", RobustSD: 8.2}}},
			"outlier: score 9 >= threshold 5 (value +8.2 robust sd from its key's window's median)"},
		{batch.Score{Scored: true, Outlier: true, Warming: true, Score: 9, Threshold: 5, Deviations: []batch.Deviation{{Feature: "value", RobustSD: 8.2}}},
			"outlier: score 9 >= threshold 5 (value +8.2 robust sd from the window's median); " + batch.WarmingReason},
		// Held by the alarm's deadband (detect.flag_clear): below the threshold, flagged because
		// the series' previous record was; said so, with how far out it is.
		{batch.Score{Scored: true, Outlier: true, Held: true, Weight: 5, WStar: 6, EtaProbability: 0.7, Score: 4.2, Threshold: 5,
			Deviations: []batch.Deviation{{Feature: "temp", RobustSD: 5.6}}},
			"outlier: held: score 4.2 < threshold 5 continues the alarm of its series' previous record (detect.flag_clear) (temp +5.6 robust sd from the window's median)"},
		// detect.alert_cooldown: a flagged record folded into its key's open alert, and the
		// key's next alert with the count it folded (replay's reason says the same: batch.AlertReason).
		{batch.Score{Scored: true, Outlier: true, Grouped: true, Score: 9, Threshold: 5},
			"outlier: score 9 >= threshold 5; folded into this key's open alert (detect.alert_cooldown)"},
		{batch.Score{Scored: true, Outlier: true, Folded: 3, Score: 9, Threshold: 5},
			"outlier: score 9 >= threshold 5; 3 more flagged records of this key were folded into its previous alert (detect.alert_cooldown)"},
		// Over the threshold with the cap spent: said so, not called an inlier.
		{batch.Score{Scored: true, Suppressed: true, Score: 6, Threshold: 5, Deviations: []batch.Deviation{{Feature: "temp", RobustSD: 9}}},
			"not flagged, the alarm cap is spent (detect.alarm_rate): score 6 >= threshold 5 (temp +9 robust sd from the window's median)"},
		// An inlier by the score whose density test fired alone: the fired test is not listed
		// (issue 20: "inlier: low density ... < delta").
		{batch.Score{Scored: true, DensityOutlier: true, EtaProbability: 0, Subspace: []string{"temp"}, Weight: 1, WStar: 2, Score: 1.2, Threshold: 5},
			"inlier: score 1.2 < threshold 5; kNN weight 1.00 < w* 2.00"},
	}
	for _, tc := range tests {
		if got := Explain(tc.s); got != tc.want {
			t.Errorf("Explain(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	valid := Default()
	valid.Brokers = []string{"localhost:9092"}
	valid.Topic, valid.DeadLetterTopic = "out", "out.dlq"
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want []string // substrings, one per expected problem
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, []string{"sink.brokers: at least one"}},
		{"bad broker", func(c *Config) { c.Brokers = []string{"localhost", "h:0"} }, []string{"sink.brokers[0]", "sink.brokers[1]"}},
		{"topics", func(c *Config) { c.Topic, c.DeadLetterTopic = "", "bad topic" }, []string{"sink.topic: required", "sink.dead_letter_topic: \"bad topic\""}},
		{"same topics", func(c *Config) { c.DeadLetterTopic = c.Topic }, []string{"must differ"}},
		{"emit and format", func(c *Config) { c.Emit, c.Format = "some", "xml" }, []string{"sink.emit", "sink.format"}},
		{"acks", func(c *Config) { c.RequiredAcks = "1" }, []string{"sink.required_acks: \"1\", only \"all\""}},
		{"writer knobs", func(c *Config) {
			c.BatchSize, c.BatchTimeout, c.MaxMessageBytes, c.Compression, c.WriteTimeout, c.MaxAttempts = 0, 0, 10, "brotli", 0, 0
		}, []string{"sink.batch_size", "sink.batch_timeout", "sink.max_message_bytes", "sink.compression", "sink.write_timeout", "sink.max_attempts"}},
		// 1ns: every produce timed out, and the sink waited for the broker as if it were down.
		{"write timeout below its floor", func(c *Config) { c.WriteTimeout = time.Nanosecond },
			[]string{"sink.write_timeout: 1ns, want >= 10ms (an acks=all produce waits for the replicas: shorter timed every write out, retried as for a broker outage without end)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q, want %q in it", i, lines[i], w)
				}
			}
		})
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted the zero config")
	}
}

// with returns a copy of b changed by f (the copy shares b's record: never released itself).
func with(b *batch.Batch, f func(*batch.Batch)) *batch.Batch {
	c := *b
	f(&c)
	return &c
}

// TestBatchContractErrors: a batch that breaks the contract is an error of Write, before any
// network I/O (the columns themselves are checked by batch.New: internal/core/batch's tests).
func TestBatchContractErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	good := testbatch.New(t, mem, "in", features, false, true, sampleRows())
	defer good.Record.Release()
	tests := []struct {
		name string
		b    *batch.Batch
		want string
	}{
		{"nil batch", nil, "no record made by batch.New"},
		{"not made by batch.New", &batch.Batch{Topic: "in", Features: features, Record: good.Record, Payloads: good.Payloads, Scores: good.Scores}, "no record made by batch.New"},
		{"payloads", with(good, func(b *batch.Batch) { b.Payloads = b.Payloads[:1] }), "5 rows but 1 payloads"},
		{"scores", with(good, func(b *batch.Batch) { b.Scores = b.Scores[:2] }), "5 rows but 2 scores"},
	}
	cfg := Default()
	cfg.Brokers, cfg.Topic, cfg.DeadLetterTopic = []string{"127.0.0.1:1"}, "out", "dlq"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range tests {
		err := s.Write(context.Background(), tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestWriteJSON writes outliers and all records, checks every output's key, headers and value,
// and that a record with a non-finite score reaches the output topic (its NaN written as the
// string "NaN"), not the dead-letter topic.
func TestWriteJSON(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		for _, emit := range []Emit{EmitOutliers, EmitAll} {
			t.Run(string(emit), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				cfg := testConfig(t, br)
				cfg.Emit = emit
				s := openSink(t, cfg)

				rows := sampleRows()
				// A NaN weight has no JSON number: it is written as "NaN" and the record goes out.
				rows = append(rows, testbatch.Row{Partition: 2, Offset: 1, Key: []byte("sensor-nan"), Time: ts0, Features: []float32{1, 2},
					Payload: []byte(`{"temp":1}`),
					Score:   batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, Weight: math.NaN(), WStar: 1}})
				b := testbatch.New(t, mem, "sensors", features, false, true, rows)
				defer b.Record.Release()
				b.ModelVersion = 7
				if err := s.Write(context.Background(), b); err != nil {
					t.Fatalf("Write: %v", err)
				}

				var wantIDs []string
				for _, r := range rows {
					if emit == EmitAll || r.Score.Outlier {
						wantIDs = append(wantIDs, OutputID("sensors", r.Partition, r.Offset))
					}
				}
				recs := testsupport.ConsumeExactly(t, br, cfg.Topic, len(wantIDs))
				var gotIDs []string
				c, _ := batchColumns(b)
				for _, r := range recs {
					id, ok := testsupport.Header(r, HeaderID)
					if !ok {
						t.Fatalf("output without %s header", HeaderID)
					}
					gotIDs = append(gotIDs, id)
					var out jsonOutput
					if err := json.Unmarshal(r.Value, &out); err != nil {
						t.Fatalf("output %s: %v", id, err)
					}
					if out.ID != id || out.ModelVersion != 7 || out.Topic != "sensors" {
						t.Errorf("output %s: id %q, model %d, topic %q", id, out.ID, out.ModelVersion, out.Topic)
					}
					if sc, _ := out.Scores.(map[string]any); id == "sensors/2/1" && (sc == nil || sc["weight"] != JSONNaN) {
						t.Errorf("output %s: scores %v, want weight %q", id, out.Scores, JSONNaN)
					}
					// Find the source row and compare key and the whole encoding.
					for i := 0; i < c.rows; i++ {
						if OutputID("sensors", c.partition.Value(i), c.offset.Value(i)) != id {
							continue
						}
						if !bytes.Equal(r.Key, c.keyAt(i)) {
							t.Errorf("output %s: key %q, want the source key %q", id, r.Key, c.keyAt(i))
						}
						want, _ := encodeJSON(b, c, i)
						if !bytes.Equal(r.Value, want) {
							t.Errorf("output %s: value\n%s\nwant\n%s", id, r.Value, want)
						}
					}
				}
				if !sameSet(gotIDs, wantIDs) {
					t.Errorf("output ids %v, want %v", gotIDs, wantIDs)
				}

				testsupport.ConsumeExactly(t, br, cfg.DeadLetterTopic, 0) // nothing there
				if st := s.Stats(); st.Outputs != int64(len(wantIDs)) || st.DeadLetters != 0 || st.Batches != 1 {
					t.Errorf("stats %+v", st)
				}
			})
		}
	})
}

// TestWriteArrow reads the outputs back with arrow's IPC reader.
func TestWriteArrow(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		cfg := testConfig(t, br)
		cfg.Format, cfg.Emit = FormatArrow, EmitAll
		s, err := New(cfg, WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rows := sampleRows()
		b := testbatch.New(t, mem, "sensors", features, true, true, rows)
		defer b.Record.Release()
		b.ModelVersion = 3
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatalf("Write: %v", err)
		}
		// Rows cover partitions 0 (offsets 10-11), 1 (7-8) and 2 (0): three messages.
		recs := testsupport.ConsumeExactly(t, br, cfg.Topic, 3)
		wantKeys := map[string][]int{"sensors/0/10-11": {0, 1}, "sensors/1/7-8": {2, 3}, "sensors/2/0-0": {4}}
		for _, r := range recs {
			idx, ok := wantKeys[string(r.Key)]
			if !ok {
				t.Fatalf("unexpected key %q", r.Key)
			}
			delete(wantKeys, string(r.Key))
			if id, _ := testsupport.Header(r, HeaderID); id != string(r.Key) {
				t.Errorf("header %s = %q, want the key", HeaderID, id)
			}
			checkArrowMessage(t, mem, r.Value, rows, idx)
		}
	})
}

// checkArrowMessage decodes one Arrow output and compares it with rows[idx...].
func checkArrowMessage(t *testing.T, mem memory.Allocator, value []byte, rows []testbatch.Row, idx []int) {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(value), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("ipc reader: %v", err)
	}
	defer rd.Release()
	sch := rd.Schema()
	wantNames := []string{"temp", "pressure", "temp_sd", "pressure_sd", "_partition", "_offset", "_key", "_timestamp",
		ColID, ColScored, ColOutlier, ColDensityOutlier, ColEtaProbability, ColDistanceOutlier, ColWeight, ColWStar, ColSubspace, ColExplanation, ColHypercubeScore, ColHypercubeNeighbours, ColHypercubeOutlier, ColScore, ColRecent,
		ColSuppressed, ColFolded, ColAlertTimestamp, ColFoldedIntoPrevious, ColKeyModelVersion, ColWarming}
	var names []string
	for _, f := range sch.Fields() {
		names = append(names, f.Name)
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("columns %v, want %v", names, wantNames)
	}
	if v, _ := sch.Metadata().GetValue("outlierd.model_version"); v != "3" {
		t.Errorf("model_version metadata %q", v)
	}
	if !rd.Next() {
		t.Fatalf("no record in stream: %v", rd.Err())
	}
	rec := rd.Record()
	if int(rec.NumRows()) != len(idx) {
		t.Fatalf("%d rows, want %d", rec.NumRows(), len(idx))
	}
	for k, i := range idx {
		r := rows[i]
		if got := rec.Column(0).(*array.Float32).Value(k); got != r.Features[0] {
			t.Errorf("row %d temp %v, want %v", i, got, r.Features[0])
		}
		if got := rec.Column(3).(*array.Float32).Value(k); got != r.SD[1] {
			t.Errorf("row %d pressure_sd %v, want %v", i, got, r.SD[1])
		}
		if got := rec.Column(5).(*array.Int64).Value(k); got != r.Offset {
			t.Errorf("row %d offset %v, want %v", i, got, r.Offset)
		}
		keys := rec.Column(6).(*array.Binary)
		if (r.Key == nil) != keys.IsNull(k) || (r.Key != nil && !bytes.Equal(keys.Value(k), r.Key)) {
			t.Errorf("row %d key mismatch", i)
		}
		if got := rec.Column(7).(*array.Timestamp).Value(k); got != arrow.Timestamp(r.Time.UnixMilli()) {
			t.Errorf("row %d timestamp %v", i, got)
		}
		if got, want := rec.Column(8).(*array.String).Value(k), OutputID("sensors", r.Partition, r.Offset); got != want {
			t.Errorf("row %d %s %q, want %q", i, ColID, got, want)
		}
		scored := rec.Column(9).(*array.Boolean).Value(k)
		if scored != r.Score.Scored {
			t.Errorf("row %d scored %v", i, scored)
		}
		eta := rec.Column(12).(*array.Float64)
		if r.Score.Scored && eta.Value(k) != r.Score.EtaProbability || !r.Score.Scored && !eta.IsNull(k) {
			t.Errorf("row %d eta-probability %v (null %v)", i, eta.Value(k), eta.IsNull(k))
		}
		if got := rec.Column(14).(*array.Float64).Value(k); r.Score.Scored && got != r.Score.Weight {
			t.Errorf("row %d weight %v", i, got)
		}
		sub := rec.Column(16).(*array.List)
		if r.Score.Scored {
			start, end := sub.ValueOffsets(k)
			names := sub.ListValues().(*array.String)
			var got []string
			for j := start; j < end; j++ {
				got = append(got, names.Value(int(j)))
			}
			if !reflect.DeepEqual(got, r.Score.Subspace) {
				t.Errorf("row %d subspace %v, want %v", i, got, r.Score.Subspace)
			}
		}
		if got := rec.Column(17).(*array.String).Value(k); got != Explain(r.Score) {
			t.Errorf("row %d explanation %q", i, got)
		}
		// recent: null when not scored or NaN (detect.recent_scores 0), else the value.
		recent := rec.Column(22).(*array.Float64)
		if wantNull := !r.Score.Scored || math.IsNaN(r.Score.Recent); recent.IsNull(k) != wantNull || !wantNull && recent.Value(k) != r.Score.Recent {
			t.Errorf("row %d recent %v (null %v), want %v", i, recent.Value(k), recent.IsNull(k), r.Score.Recent)
		}
	}
	if rd.Next() {
		t.Error("more than one record in the stream")
	}
}

// TestArrowSplit checks that a stream above max_message_bytes is split by rows, every emitted
// row arriving exactly once, and that emit: outliers keeps only outliers.
func TestArrowSplit(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		cfg := testConfig(t, br)
		cfg.Format = FormatArrow
		cfg.MaxMessageBytes = 4096 // a 300-outlier stream is ~20 KB: forces several splits
		s, err := New(cfg, WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var rows []testbatch.Row
		outliers := map[int64]bool{}
		for i := 0; i < 600; i++ {
			r := testbatch.Row{Partition: 0, Offset: int64(i), Key: []byte("k"), Time: ts0, Features: []float32{float32(i), 0}, Payload: []byte("{}"),
				Score: batch.Score{Scored: true, Outlier: i%2 == 0, DistanceOutlier: i%2 == 0, Weight: float64(i), WStar: 1}}
			if r.Score.Outlier {
				outliers[r.Offset] = true
			}
			rows = append(rows, r)
		}
		b := testbatch.New(t, mem, "big", features, false, true, rows)
		defer b.Record.Release()
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatalf("Write: %v", err)
		}
		st := s.Stats()
		if st.Outputs < 2 || st.DeadLetters != 0 {
			t.Fatalf("stats %+v: want the stream split into several messages, no dead letters", st)
		}
		recs := testsupport.ConsumeExactly(t, br, cfg.Topic, int(st.Outputs))
		seen := map[int64]int{}
		for _, r := range recs {
			if len(r.Value) > cfg.MaxMessageBytes {
				t.Errorf("message of %d bytes > %d", len(r.Value), cfg.MaxMessageBytes)
			}
			rd, err := ipc.NewReader(bytes.NewReader(r.Value), ipc.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			for rd.Next() {
				offs := rd.Record().Column(3).(*array.Int64) // temp, pressure, _partition, _offset
				first, last := offs.Value(0), offs.Value(offs.Len()-1)
				if want := arrowKey("big", 0, first, last); string(r.Key) != want {
					t.Errorf("key %q, want %q", r.Key, want)
				}
				for k := 0; k < offs.Len(); k++ {
					seen[offs.Value(k)]++
				}
			}
			rd.Release()
		}
		if len(seen) != len(outliers) {
			t.Errorf("%d distinct rows arrived, want %d", len(seen), len(outliers))
		}
		for off, n := range seen {
			if !outliers[off] || n != 1 {
				t.Errorf("offset %d arrived %d times (outlier %v)", off, n, outliers[off])
			}
		}
	})
}

func TestWriteDeadLetters(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		cfg := testConfig(t, br)
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		dls := []batch.DeadLetter{
			{Topic: "in", Partition: 2, Offset: 41, Key: []byte("k1"), Value: []byte(`{"temp":"abc"}`), Time: ts0,
				Reason: `field "temp": not a number: "abc"`, Code: "not_a_number", Field: "temp"},
			{Topic: "in", Partition: 0, Offset: 5, Key: nil, Value: []byte{0, 1, 2}, Time: ts0.Add(time.Second),
				Reason: "not JSON"},
			// No time (a Kafka timestamp of -1 or 0): no outlierd-time, not year 1.
			{Topic: "in", Partition: 1, Offset: 7, Value: []byte(`{"temp":1}`), Reason: `derived feature "tod": missing`,
				Code: "missing", Field: "tod"},
		}
		if err := s.WriteDeadLetters(context.Background(), dls); err != nil {
			t.Fatalf("WriteDeadLetters: %v", err)
		}
		recs := testsupport.ConsumeExactly(t, br, cfg.DeadLetterTopic, len(dls))
		for _, d := range dls {
			src := OutputID(d.Topic, int32(d.Partition), d.Offset)
			found := false
			for _, r := range recs {
				if h, _ := testsupport.Header(r, HeaderSource); h != src {
					continue
				}
				found = true
				if !bytes.Equal(r.Value, d.Value) || !bytes.Equal(r.Key, d.Key) {
					t.Errorf("%s: key %q value %q", src, r.Key, r.Value)
				}
				if h, _ := testsupport.Header(r, HeaderError); h != d.Reason {
					t.Errorf("%s: reason %q", src, h)
				}
				if h, ok := testsupport.Header(r, HeaderReason); h != d.Code || ok != (d.Code != "") {
					t.Errorf("%s: %s %q (%v), want %q (none when empty)", src, HeaderReason, h, ok, d.Code)
				}
				if h, ok := testsupport.Header(r, HeaderField); h != d.Field || ok != (d.Field != "") {
					t.Errorf("%s: %s %q (%v), want %q (none when empty)", src, HeaderField, h, ok, d.Field)
				}
				if h, ok := testsupport.Header(r, HeaderTime); ok == d.Time.IsZero() || ok && h != d.Time.Format(time.RFC3339Nano) {
					t.Errorf("%s: time %q (%v), want %v (none when zero)", src, h, ok, d.Time)
				}
			}
			if !found {
				t.Errorf("dead letter %s not found", src)
			}
		}
		if err := s.WriteDeadLetters(context.Background(), nil); err != nil {
			t.Errorf("empty WriteDeadLetters: %v", err)
		}
	})
}

// TestWriteWaitsForAck holds the broker's produce responses and checks that Write has not
// returned while they are held, and returns once they are released.
func TestWriteWaitsForAck(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	br := testsupport.KfakeBroker(t)
	c := br.Kfake
	cfg := testConfig(t, br)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	seen := make(chan struct{}, 16)
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		seen <- struct{}{}
		c.SleepControl(func() { <-release })
		return nil, nil, false // then let the cluster handle (and acknowledge) it
	})

	b := testbatch.New(t, mem, "in", features, false, true, sampleRows())
	defer b.Record.Release()
	done := make(chan error, 1)
	go func() { done <- s.Write(context.Background(), b) }()
	select {
	case <-seen:
	case err := <-done:
		t.Fatalf("Write returned (%v) before the broker saw a produce request", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no produce request reached the broker")
	}
	// The broker holds the acknowledgement; Write must still be waiting. 300 ms is ample for an
	// asynchronous writer to return early, and cannot make a correct one fail.
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) while the acknowledgement was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Write did not return after the acknowledgement")
	}
	testsupport.ConsumeExactly(t, br, cfg.Topic, 3) // rows 0, 2 and 3 are outliers
}

// TestWriteFailsWithoutAck makes the broker answer every produce with NOT_ENOUGH_REPLICAS (what
// acks=all yields when the in-sync replicas are too few): Write must fail, not return nil.
func TestWriteFailsWithoutAck(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	br := testsupport.KfakeBroker(t)
	c := br.Kfake
	cfg := testConfig(t, br)
	cfg.MaxAttempts = 2
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var acks []int16
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		mu.Lock()
		acks = append(acks, req.Acks)
		mu.Unlock()
		return testsupport.FailProduce(req, kerr.NotEnoughReplicas), nil, true
	})
	b := testbatch.New(t, mem, "in", features, false, true, sampleRows())
	defer b.Record.Release()
	err = s.Write(context.Background(), b)
	if err == nil {
		t.Fatal("Write returned nil although no produce was acknowledged")
	}
	if !strings.Contains(err.Error(), "Not Enough Replicas") {
		t.Errorf("error %v does not name the broker's error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		if a != -1 {
			t.Errorf("produce request with acks=%d, want -1 (all)", a)
		}
	}
	if len(acks) == 0 {
		t.Error("no produce request seen")
	}
	if st := s.Stats(); st != (Stats{}) {
		t.Errorf("stats after a failed write: %+v", st)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestWriteOrder writes 1000 outputs encoded by 3 workers and checks that each partition's
// outputs arrive in source-offset order (same key, same partition, same order).
func TestWriteOrder(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		cfg := testConfig(t, br)
		s, err := New(cfg, WithWorkers(3))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rows := make([]testbatch.Row, 1000)
		for i := range rows {
			rows[i] = testbatch.Row{Partition: 0, Offset: int64(i), Key: []byte{byte('a' + i%7)}, Time: ts0, Features: []float32{1, 2},
				Payload: []byte("{}"), Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, Weight: 2, WStar: 1}}
		}
		b := testbatch.New(t, mem, "in", features, false, true, rows)
		defer b.Record.Release()
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		last := map[string]int64{}
		part := map[string]int32{}
		for _, r := range testsupport.ConsumeExactly(t, br, cfg.Topic, len(rows)) {
			var out jsonOutput
			if err := json.Unmarshal(r.Value, &out); err != nil {
				t.Fatal(err)
			}
			k := string(r.Key)
			if p, ok := part[k]; ok && p != r.Partition {
				t.Fatalf("key %q on partitions %d and %d", k, p, r.Partition)
			}
			part[k] = r.Partition
			if l, ok := last[k]; ok && out.Offset <= l {
				t.Fatalf("key %q: offset %d after %d", k, out.Offset, l)
			}
			last[k] = out.Offset
		}
	})
}

// TestCompression writes through every codec and reads the outputs back.
func TestCompression(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
			t.Run(codec, func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				cfg := testConfig(t, br)
				cfg.Compression = Compression(codec)
				s, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				b := testbatch.New(t, mem, "in", features, false, true, sampleRows())
				defer b.Record.Release()
				if err := s.Write(context.Background(), b); err != nil {
					t.Fatalf("Write: %v", err)
				}
				for _, r := range testsupport.ConsumeExactly(t, br, cfg.Topic, 3) {
					var out struct{ Scores jsonScores }
					if err := json.Unmarshal(r.Value, &out); err != nil || !out.Scores.Outlier {
						t.Errorf("output %s: %v", r.Value, err)
					}
				}
			})
		}
	})
}
