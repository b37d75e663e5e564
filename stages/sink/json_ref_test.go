package sink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// jsonOutput is the JSON output message as encoding/json declares it (the schema is documented
// in json.go).
type jsonOutput struct {
	ID              string          `json:"id"`
	Topic           string          `json:"topic"`
	Partition       int32           `json:"partition"`
	Offset          int64           `json:"offset"`
	Key             *string         `json:"key"`
	KeyEncoding     string          `json:"key_encoding,omitempty"`
	Timestamp       *string         `json:"timestamp"`
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding"`
	PayloadBytes    int             `json:"payload_bytes,omitempty"`
	Scores          any             `json:"scores"` // nil, *jsonScores or *jsonScoresNonFinite
	Explanation     string          `json:"explanation"`
	Subspace        []string        `json:"subspace"`
	ModelVersion    uint64          `json:"model_version"`
}

// jsonScores is the "scores" object of jsonOutput.
type jsonScores struct {
	Outlier         bool    `json:"outlier"`
	DensityOutlier  bool    `json:"density_outlier"`
	EtaProbability  float64 `json:"eta_probability"`
	DistanceOutlier bool    `json:"distance_outlier"`
	Weight          float64 `json:"weight"`
	WStar           float64 `json:"w_star"`
	// Hypercube is present only when the hypercube detector ran (detect.hypercube.enabled).
	Hypercube *jsonHypercube `json:"hypercube,omitempty"`
	// Score is the combined outlier score, higher = more outlying (batch.Score.Score).
	Score float64 `json:"score"`
	// Recent is batch.Score.Recent: nil (absent) when NaN, a float64, or jsonFloat's string.
	Recent any `json:"recent,omitempty"`
	// KeyModelVersion is the builder's version of the key's model that scored it (scorers
	// with detect.key_by; absent otherwise).
	KeyModelVersion uint64 `json:"key_model_version,omitempty"`
	jsonAlert
}

// jsonAlert is what "scores" says of the alarm cap and the alert groups, each absent when false
// or 0: Suppressed, Grouped (with the time of the alert it joined, a string or null) and Folded.
type jsonAlert struct {
	Suppressed              bool            `json:"suppressed,omitempty"`
	Folded                  bool            `json:"folded,omitempty"`
	AlertTimestamp          json.RawMessage `json:"alert_timestamp,omitempty"`
	FoldedIntoPreviousAlert int             `json:"folded_into_previous_alert,omitempty"`
}

// alertJSON is sc's jsonAlert.
func alertJSON(sc *batch.Score) jsonAlert {
	a := jsonAlert{Suppressed: sc.Suppressed, Folded: sc.Grouped, FoldedIntoPreviousAlert: sc.Folded}
	if sc.Grouped {
		a.AlertTimestamp = json.RawMessage("null")
		if sc.AlertTimed {
			a.AlertTimestamp, _ = json.Marshal(time.UnixMilli(sc.AlertAt).UTC().Format(time.RFC3339Nano))
		}
	}
	return a
}

// jsonHypercube is the hypercube detector's result in "scores" (batch.HypercubeScore): always
// finite (O is in [0, 1], w a count).
type jsonHypercube struct {
	Score      float64 `json:"score"`
	Neighbours int64   `json:"neighbours"`
	Outlier    bool    `json:"outlier"`
}

// jsonScoresNonFinite is jsonScores for a record with a non-finite float: each float field is
// a float64 or, when not finite, its string (see jsonFloat). A type of its own so that the
// common, all-finite case keeps encoding/json's direct float64 encoding.
type jsonScoresNonFinite struct {
	Outlier         bool           `json:"outlier"`
	DensityOutlier  bool           `json:"density_outlier"`
	EtaProbability  any            `json:"eta_probability"`
	DistanceOutlier bool           `json:"distance_outlier"`
	Weight          any            `json:"weight"`
	WStar           any            `json:"w_star"`
	Hypercube       *jsonHypercube `json:"hypercube,omitempty"`
	Score           any            `json:"score"`
	Recent          any            `json:"recent,omitempty"`
	KeyModelVersion uint64         `json:"key_model_version,omitempty"`
	jsonAlert
}

// scoresJSON returns the "scores" object of a scored record.
func scoresJSON(sc *batch.Score) any {
	if finite(sc.EtaProbability) && finite(sc.Weight) && finite(sc.WStar) && finite(sc.Score) {
		return &jsonScores{
			Outlier:         sc.Outlier,
			DensityOutlier:  sc.DensityOutlier,
			EtaProbability:  sc.EtaProbability,
			DistanceOutlier: sc.DistanceOutlier,
			Weight:          sc.Weight,
			WStar:           sc.WStar,
			Hypercube:       hypercubeJSON(sc.Hypercube),
			Score:           sc.Score,
			Recent:          recentJSON(sc.Recent),
			KeyModelVersion: sc.KeyModelVersion,
			jsonAlert:       alertJSON(sc),
		}
	}
	return &jsonScoresNonFinite{
		Outlier:         sc.Outlier,
		DensityOutlier:  sc.DensityOutlier,
		EtaProbability:  jsonFloat(sc.EtaProbability),
		DistanceOutlier: sc.DistanceOutlier,
		Weight:          jsonFloat(sc.Weight),
		WStar:           jsonFloat(sc.WStar),
		Hypercube:       hypercubeJSON(sc.Hypercube),
		Score:           jsonFloat(sc.Score),
		Recent:          recentJSON(sc.Recent),
		KeyModelVersion: sc.KeyModelVersion,
		jsonAlert:       alertJSON(sc),
	}
}

// recentJSON is the "recent" field: absent when NaN (detect.recent_scores off), else as the
// other floats.
func recentJSON(v float64) any {
	if math.IsNaN(v) {
		return nil
	}
	return jsonFloat(v)
}

func hypercubeJSON(h *batch.HypercubeScore) *jsonHypercube {
	if h == nil {
		return nil
	}
	return &jsonHypercube{Score: h.Score, Neighbours: h.Neighbours, Outlier: h.Outlier}
}

// encodeJSONRowRef is encodeJSONRow as it was before the hand-written encoder: encoding/json on
// jsonOutput. It pins encodeJSONRow byte for byte.
func encodeJSONRowRef(b *batch.Batch, c *columns, i int, omitPayload bool) ([]byte, error) {
	out := jsonOutput{
		ID:           OutputID(b.Topic, c.partition.Value(i), c.offset.Value(i)),
		Topic:        b.Topic,
		Partition:    c.partition.Value(i),
		Offset:       c.offset.Value(i),
		Subspace:     []string{},
		ModelVersion: b.ModelVersion,
	}
	if k := c.keyAt(i); k != nil {
		s, enc := textOrBase64(k)
		out.Key, out.KeyEncoding = &s, enc
	}
	if t, ok := c.timeAt(i); ok {
		s := t.Format(time.RFC3339Nano)
		out.Timestamp = &s
	}
	p := b.Payloads[i]
	if omitPayload {
		out.Payload, out.PayloadEncoding, out.PayloadBytes = json.RawMessage("null"), "omitted", len(p)
	} else if utf8.Valid(p) && json.Valid(p) {
		// json.Valid does not check UTF-8 (as encoding/json's decoder, it takes invalid bytes in
		// strings): embedded raw they would make the output invalid JSON, so such a payload
		// falls through to base64.
		out.Payload, out.PayloadEncoding = p, "json"
	} else {
		s, enc := textOrBase64(p)
		q, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("encode payload: %w", err)
		}
		out.Payload, out.PayloadEncoding = q, enc
		if enc == "utf8" {
			out.PayloadEncoding = "string"
		}
	}
	var sc batch.Score
	if b.Scores != nil {
		sc = b.Scores[i]
	}
	if sc.Scored {
		out.Scores = scoresJSON(&sc)
		if sc.Subspace != nil {
			out.Subspace = sc.Subspace
		}
	}
	out.Explanation = Explain(sc)

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep payload and names byte-faithful ("<", ">", "&" unescaped)
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("encode output as JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// TestEncodeJSONMatchesEncodingJSON: the hand-written encoder writes, byte for byte, what
// encoding/json writes for jsonOutput, for random rows that mix every case of the schema: null,
// text, escaped and invalid-UTF-8 keys; JSON payloads with whitespace, escapes, HTML characters,
// U+2028 and invalid UTF-8; text and binary payloads; payloads omitted; unscored batches;
// scores finite, non-finite, tiny, huge and -0; hypercube results (a non-finite one is an
// error either way); subspaces nil, empty and named; suppressed, folded and alert records.
func TestEncodeJSONMatchesEncodingJSON(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(5, 6))
	pick := func(v ...string) string { return v[r.IntN(len(v))] }
	floats := []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 9.99e-7, 0.12, 6.02, 123456.789, 1e20, 1e21, 5e-324,
		math.MaxFloat64, -2.5, math.Inf(1), math.Inf(-1), math.NaN()}
	f := func() float64 {
		if r.IntN(3) == 0 {
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
		}
		return floats[r.IntN(len(floats))]
	}
	for _, scored := range []bool{true, false} {
		var rows []testbatch.Row
		for i := range 3000 {
			row := testbatch.Row{Partition: int32(r.IntN(5)), Offset: r.Int64N(1 << 40), Features: []float32{1, 2}}
			if r.IntN(4) > 0 {
				row.Time = time.Unix(0, r.Int64N(1<<62)).UTC()
			}
			switch r.IntN(4) {
			case 1:
				row.Key = []byte(pick("dev-1", `a"b\c`, "<&>", "tab\there\x01", "\u2028\u2029é", ""))
			case 2:
				row.Key = []byte{0xff, 'a', 0xc3}
			}
			row.Payload = []byte(pick(`{"temp": 21.5, "s" : "x<y>&z\u2028"}`, ` [1, 2 ,{"a":null}] `, `"str"`, `42`,
				"{\"bad\":\"\xff\"}", "plain <text> & more\n", "\x00\x01\xfe", "", `{"a":1}{"b":2}`, "é\u2028"))
			sc := batch.Score{Scored: true, Outlier: r.IntN(2) == 0, DensityOutlier: r.IntN(2) == 0, DistanceOutlier: r.IntN(2) == 0,
				EtaProbability: f(), Weight: f(), WStar: f(), Score: f(), Threshold: f()}
			if r.IntN(3) == 0 { // a scorer's record scored by its key's published model
				sc.ByKey, sc.KeyModelVersion = true, r.Uint64()
			}
			switch r.IntN(6) { // the alarm cap and the alert groups
			case 1:
				sc.Outlier, sc.Suppressed = false, true
			case 2:
				sc.Outlier, sc.Grouped, sc.AlertTimed, sc.AlertAt = true, true, true, r.Int64N(1<<42)
			case 3:
				sc.Outlier, sc.Grouped = true, true // the alert had no timestamp
			case 5:
				sc.Outlier, sc.Grouped, sc.AlertTimed = true, true, true // the alert at 1970-01-01T00:00:00Z
			case 4:
				sc.Outlier, sc.Folded = true, 1+r.IntN(1000)
			}
			switch r.IntN(3) {
			case 1:
				sc.Subspace = []string{}
			case 2:
				sc.Subspace = []string{"temp", pick("pressure", `q"x`, "é<", "bad\xffname")}
				sc.SubspaceOf = pick("", "PROCLUS cluster 3", "outside every cluster")
			}
			if r.IntN(4) == 0 {
				sc.Hypercube = &batch.HypercubeScore{Score: r.Float64(), Neighbours: r.Int64N(100), Outlier: r.IntN(2) == 0}
				if i%50 == 0 {
					sc.Hypercube.Score = math.NaN()
				}
			}
			row.Score = sc
			rows = append(rows, row)
		}
		b := testbatch.New(t, mem, pick("sensors", `t"<op>ic`), features, false, scored, rows)
		b.ModelVersion = r.Uint64()
		c, err := batchColumns(b)
		if err != nil {
			b.Record.Release()
			t.Fatal(err)
		}
		for i := range rows {
			for _, omit := range []bool{false, true} {
				want, errW := encodeJSONRowRef(b, c, i, omit)
				got, errG := encodeJSONRow(b, c, i, omit)
				if (errW != nil) != (errG != nil) || !bytes.Equal(got, want) {
					b.Record.Release()
					t.Fatalf("scored=%v row %d omit=%v:\nencoding/json %s (%v)\nencoder       %s (%v)", scored, i, omit, want, errW, got, errG)
				}
			}
		}
		b.Record.Release()
	}
}
