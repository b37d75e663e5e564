package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// jsonOutput is the JSON output message, one per emitted record (format: json). Schema:
//
//	{
//	  "id":               "<topic>/<partition>/<offset>" of the source message. Deterministic, so
//	                      consumers de-duplicate the copies a producer retry can create; also in
//	                      the header outlierd-id.
//	  "topic":            source topic (string)
//	  "partition":        source partition (int)
//	  "offset":           source offset (int)
//	  "key":              source key: the key as a string when it is valid UTF-8, else its
//	                      standard base64 (then "key_encoding" is "base64"); null without a key
//	  "key_encoding":     "utf8" or "base64"; absent when "key" is null
//	  "timestamp":        the record's _timestamp, RFC 3339 with nanoseconds, UTC; null if unknown
//	  "payload":          the original message value: embedded as JSON when it is valid JSON in
//	                      valid UTF-8 (then re-emitted compactly, same value), else as a JSON
//	                      string when it is valid UTF-8, else as standard base64 (so a JSON
//	                      payload with invalid UTF-8 in a string is base64)
//	  "payload_encoding": "json", "string" or "base64", saying which of the three "payload" is
//	                      (a payload "42" and a payload "\"42\"" are different); "omitted"
//	                      (payload null) when the output with the payload would exceed
//	                      sink.max_message_bytes, so that the scores still go out
//	  "payload_bytes":    the original value's length; only with "omitted"
//	  "scores": {         null when the record was not scored (no model yet)
//	    "outlier":          the combined decision (bool)
//	    "density_outlier":  eta-probability below delta in some subspace (bool)
//	    "eta_probability":  the lowest eta-probability seen (float, see below)
//	    "distance_outlier": kNN weight >= w* (bool)
//	    "weight":           w_k(q, S) (float, see below)
//	    "w_star":           w* of the model (float, see below)
//	  }
//	  "explanation":      one human-readable line, e.g. "low density in subspace temp+pressure:
//	                      eta-probability 0.12 < delta; kNN weight 8.31 >= w* 6.02"
//	  "subspace":         feature names of the subspace of eta_probability ([] if none)
//	  "model_version":    the model that scored the batch (0 = none)
//	}
//
// Floats: a finite value is a JSON number (as encoding/json writes a float64); a non-finite one,
// which JSON has no number for, is the string "Infinity", "-Infinity" or "NaN" (the rule of the
// protobuf JSON mapping; strconv.ParseFloat, Python's float(), JavaScript's Number() and Java's
// Double.parseDouble read these strings back). A record far enough out gets a kNN weight of
// +Inf (its squared distances overflow float32): it is the worst outlier and must reach the
// output topic, not the dead-letter topic, so every float field follows this rule.
//
// Kafka message: key = the source key (so one key's outputs keep their order on one partition),
// header outlierd-id = id.
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
}

// Spellings of the non-finite floats in the JSON output.
const (
	JSONPosInf = "Infinity"
	JSONNegInf = "-Infinity"
	JSONNaN    = "NaN"
)

// finite reports whether v is neither NaN nor ±Inf.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// jsonFloat returns v as encoding/json must write it: the float64 itself when finite, else
// JSONPosInf, JSONNegInf or JSONNaN.
func jsonFloat(v float64) any {
	switch {
	case math.IsNaN(v):
		return JSONNaN
	case math.IsInf(v, 1):
		return JSONPosInf
	case math.IsInf(v, -1):
		return JSONNegInf
	}
	return v
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
	}
}

func hypercubeJSON(h *batch.HypercubeScore) *jsonHypercube {
	if h == nil {
		return nil
	}
	return &jsonHypercube{Score: h.Score, Neighbours: h.Neighbours, Outlier: h.Outlier}
}

// outputID is the deterministic id of the output of one source message.
func outputID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}

// encodeJSON returns the JSON output of row i of b.
func encodeJSON(b *batch.Batch, c *columns, i int) ([]byte, error) {
	return encodeJSONRow(b, c, i, false)
}

// encodeJSONOmitted returns the JSON output of row i of b without its payload.
func encodeJSONOmitted(b *batch.Batch, c *columns, i int) ([]byte, error) {
	return encodeJSONRow(b, c, i, true)
}

// encodeJSONRow returns the JSON output of row i of b, with the payload unless omitPayload.
func encodeJSONRow(b *batch.Batch, c *columns, i int, omitPayload bool) ([]byte, error) {
	out := jsonOutput{
		ID:           outputID(b.Topic, c.partition.Value(i), c.offset.Value(i)),
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
	out.Explanation = explain(sc)

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep payload and names byte-faithful ("<", ">", "&" unescaped)
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("encode output as JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// textOrBase64 returns b as a string when it is valid UTF-8 ("utf8"), else as standard base64
// ("base64").
func textOrBase64(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "utf8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// explain renders a score as one line. For an outlier it gives the tests that flagged it; for
// an inlier the result of each test. A test whose fields are all zero and that did not fire is
// taken as not run (e.g. the distance detector disabled) and left out.
func explain(s batch.Score) string {
	if !s.Scored {
		return "not scored: no model yet"
	}
	densityRan := s.DensityOutlier || s.EtaProbability != 0 || len(s.Subspace) > 0
	distanceRan := s.DistanceOutlier || s.Weight != 0 || s.WStar != 0
	eta := strconv.FormatFloat(s.EtaProbability, 'g', 3, 64)
	var density, distance string
	if s.DensityOutlier && strings.HasPrefix(s.SubspaceOf, "outside") {
		density = s.SubspaceOf + inSubspace(s.Subspace, "") // PROCLUS: off every cluster there
	} else if s.DensityOutlier {
		density = fmt.Sprintf("low density%s: eta-probability %s < delta", inSubspace(s.Subspace, s.SubspaceOf), eta)
	} else if densityRan {
		density = fmt.Sprintf("density normal%s: lowest eta-probability %s >= delta", inSubspace(s.Subspace, s.SubspaceOf), eta)
	}
	if s.DistanceOutlier {
		distance = fmt.Sprintf("kNN weight %.2f >= w* %.2f", s.Weight, s.WStar)
	} else if distanceRan {
		distance = fmt.Sprintf("kNN weight %.2f < w* %.2f", s.Weight, s.WStar)
	}
	var hcube string
	if h := s.Hypercube; h != nil && h.Outlier {
		hcube = fmt.Sprintf("sparse in the joint space: %d window records within one grid cell in every feature", h.Neighbours)
	} else if h != nil {
		hcube = fmt.Sprintf("hypercube neighbours %d", h.Neighbours)
	}
	var parts []string
	switch {
	case s.Outlier && s.Score > s.Threshold: // detect.flag_by rate: the combined score decided
		parts = append(parts, fmt.Sprintf("outlier score %.3g > threshold %.3g (detect.alarm_rate)", s.Score, s.Threshold))
	case s.Outlier && (s.DensityOutlier || s.DistanceOutlier || s.Hypercube != nil && s.Hypercube.Outlier):
		if s.DensityOutlier {
			parts = append(parts, density)
		}
		if s.DistanceOutlier {
			parts = append(parts, distance)
		}
		if s.Hypercube != nil && s.Hypercube.Outlier {
			parts = append(parts, hcube)
		}
		return strings.Join(parts, "; ")
	case s.Outlier:
		parts = append(parts, "outlier by the combined rule")
	default:
		parts = append(parts, "inlier")
	}
	for _, p := range []string{density, distance, hcube} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return parts[0] + ": " + strings.Join(parts[1:], "; ")
}

// inSubspace renders " in subspace a+b" (with its origin, " (PROCLUS cluster 3)", when a
// detector chose it), or "" for an empty subspace.
func inSubspace(sub []string, of string) string {
	if len(sub) == 0 {
		return ""
	}
	if of != "" {
		return " in subspace " + strings.Join(sub, "+") + " (" + of + ")"
	}
	return " in subspace " + strings.Join(sub, "+")
}
