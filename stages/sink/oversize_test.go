package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// Regression tests for inputs near the broker's message limit (found by the pipeline's
// TestMalformedInputRealBroker): a dead letter of a 1 MB input used to exceed
// max_message_bytes with its headers, the writer refused it, and the failed write stopped the
// pipeline; a valid 1 MB record's output (payload embedded) became a dead letter, so its scores
// were never written.

// TestOversizeDeadLetter: a dead letter too large for max_message_bytes is written with its
// value (then key) cut to fit and the original length in outlierd-truncated; a small one is
// untouched.
func TestOversizeDeadLetter(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		cfg := testConfig(t, br)
		cfg.MaxMessageBytes = 4096 // the same arithmetic as the default 1,000,000, at test size
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		big := bytes.Repeat([]byte("0123456789"), 1000) // 10,000 bytes
		bigKey := bytes.Repeat([]byte("k"), 8000)
		dls := []batch.DeadLetter{
			{Topic: "in", Partition: 0, Offset: 1, Key: []byte("k1"), Value: big, Time: ts0, Reason: "not JSON"},
			{Topic: "in", Partition: 0, Offset: 2, Key: bigKey, Value: big, Time: ts0, Reason: "not JSON"},
			{Topic: "in", Partition: 0, Offset: 3, Key: []byte("k3"), Value: []byte("small"), Time: ts0, Reason: "not JSON"},
		}
		if err := s.WriteDeadLetters(context.Background(), dls); err != nil {
			t.Fatalf("WriteDeadLetters: %v (an oversized dead letter must be cut to fit, not fail the write)", err)
		}
		recs := testsupport.ConsumeExactly(t, br, cfg.DeadLetterTopic, len(dls))
		for _, r := range recs {
			src, _ := testsupport.Header(r, HeaderSource)
			trunc, hasTrunc := testsupport.Header(r, HeaderTruncated)
			size := len(r.Key) + len(r.Value)
			for _, h := range r.Headers {
				size += len(h.Key) + len(h.Value)
			}
			if size > cfg.MaxMessageBytes {
				t.Errorf("%s: %d bytes of key, value and headers, more than max_message_bytes %d", src, size, cfg.MaxMessageBytes)
			}
			switch src {
			case "in/0/1":
				if !hasTrunc || trunc != strconv.Itoa(len(big)) || !bytes.HasPrefix(big, r.Value) || len(r.Value) < cfg.MaxMessageBytes/2 || string(r.Key) != "k1" {
					t.Errorf("%s: %s %q (%v), key %q, %d value bytes: want the value cut to fit, the key kept", src, HeaderTruncated, trunc, hasTrunc, r.Key, len(r.Value))
				}
			case "in/0/2":
				if !hasTrunc || len(r.Value) != 0 || !bytes.HasPrefix(bigKey, r.Key) || len(r.Key) < cfg.MaxMessageBytes/2 {
					t.Errorf("%s: %s %q, %d key bytes, %d value bytes: want the value emptied, then the key cut", src, HeaderTruncated, trunc, len(r.Key), len(r.Value))
				}
			case "in/0/3":
				if hasTrunc || string(r.Value) != "small" || string(r.Key) != "k3" {
					t.Errorf("%s: %s %q, key %q, value %q: want it untouched", src, HeaderTruncated, trunc, r.Key, r.Value)
				}
			default:
				t.Errorf("unexpected dead letter %q", src)
			}
			if reason, _ := testsupport.Header(r, HeaderError); reason != "not JSON" {
				t.Errorf("%s: reason %q", src, reason)
			}
		}
	})
}

// TestOversizeOutput: with emit all, a record whose JSON output would exceed max_message_bytes
// only because of its payload is output without it (payload null, payload_encoding "omitted",
// payload_bytes), scores included; the others keep their payloads. Nothing goes to the
// dead-letter topic.
func TestOversizeOutput(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		cfg := testConfig(t, br)
		cfg.MaxMessageBytes = 4096
		cfg.Emit = EmitAll
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		bigPayload := []byte(`{"temp":21.5,"pressure":1013,"pad":"` + strings.Repeat("x", 8000) + `"}`)
		sc := batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, Weight: 9, WStar: 6}
		rows := []testbatch.Row{
			{Partition: 0, Offset: 1, Key: []byte("a"), Time: ts0, Features: []float32{21.5, 1013}, Payload: bigPayload, Score: sc},
			{Partition: 0, Offset: 2, Key: []byte("b"), Time: ts0.Add(time.Millisecond), Features: []float32{20, 1000}, Payload: []byte(`{"temp":20}`), Score: sc},
		}
		b := testbatch.New(t, mem, "in", features, false, true, rows)
		defer b.Record.Release()
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if st := s.Stats(); st.Outputs != 2 || st.DeadLetters != 0 {
			t.Fatalf("stats %+v: want 2 outputs, no dead letters", st)
		}
		for _, r := range testsupport.ConsumeExactly(t, br, cfg.Topic, 2) {
			var o struct {
				ID              string          `json:"id"`
				Payload         json.RawMessage `json:"payload"`
				PayloadEncoding string          `json:"payload_encoding"`
				PayloadBytes    int             `json:"payload_bytes"`
				Scores          *jsonScores     `json:"scores"`
			}
			if err := json.Unmarshal(r.Value, &o); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			if o.Scores == nil || !o.Scores.Outlier || o.Scores.Weight != 9 {
				t.Errorf("%s: scores %+v, want the record's", o.ID, o.Scores)
			}
			switch o.ID {
			case "in/0/1":
				if o.PayloadEncoding != "omitted" || string(o.Payload) != "null" || o.PayloadBytes != len(bigPayload) {
					t.Errorf("%s: payload %.40s (%s, payload_bytes %d), want null, omitted, %d", o.ID, o.Payload, o.PayloadEncoding, o.PayloadBytes, len(bigPayload))
				}
			case "in/0/2":
				if o.PayloadEncoding != "json" || string(o.Payload) != `{"temp":20}` || o.PayloadBytes != 0 {
					t.Errorf("%s: payload %s (%s, payload_bytes %d), want it embedded", o.ID, o.Payload, o.PayloadEncoding, o.PayloadBytes)
				}
			default:
				t.Errorf("unexpected output %q", o.ID)
			}
		}
	})
}

// TestOversizeOutputDeadLetterCode: an output too large even without its payload (a key near
// max_message_bytes) is a dead letter whose Code (outlierd-reason) is output_too_large, with no
// Field (outlierd-field): no input field is at fault.
func TestOversizeOutputDeadLetterCode(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := Default()
	cfg.Brokers, cfg.Topic, cfg.DeadLetterTopic = []string{"127.0.0.1:1"}, "out", "dlq" // never dialled
	cfg.Emit, cfg.MaxMessageBytes = EmitAll, 4096
	s, err := New(cfg, WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows := []testbatch.Row{{Partition: 0, Offset: 1, Key: bytes.Repeat([]byte("k"), 8000), Time: ts0,
		Features: []float32{21.5, 1013}, Payload: []byte(`{"temp":21.5}`), Score: batch.Score{Scored: true}}}
	b := testbatch.New(t, mem, "in", features, false, true, rows)
	defer b.Record.Release()
	c, err := batchColumns(b)
	if err != nil {
		t.Fatal(err)
	}
	c.emit = EmitAll
	msgs, dead := s.jsonRows(b, c, 0, b.Len())
	if len(msgs) != 0 || len(dead) != 1 {
		t.Fatalf("%d outputs, %d dead letters: want one dead letter", len(msgs), len(dead))
	}
	if dead[0].Code != "output_too_large" || dead[0].Field != "" || !strings.HasPrefix(dead[0].Reason, "sink: JSON output is ") {
		t.Fatalf("dead letter code %q, field %q, reason %q: want output_too_large, no field", dead[0].Code, dead[0].Field, dead[0].Reason)
	}
}
