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

// The JSON output message, one per emitted record (format: json), written by encodeJSONRow.
// Schema:
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
//	                        (under detect.key_by, a record its key's model scored has
//	                        density_outlier and distance_outlier false and eta_probability,
//	                        weight and w_star 0: the global model's tests, not run for it)
//	    "hypercube":        {score, neighbours, outlier} when the hypercube detector ran
//	    "score":            the combined outlier score (float, see below)
//	    "recent":           the score ranked among its series' recent scores
//	                        (detect.recent_scores; absent when off)
//	    "key_model_version": with detect.key_by on a scorer, the builder's version of the key's
//	                        model that scored the record (absent otherwise)
//	    "suppressed":       true: over the threshold, not flagged: the alarm cap is spent
//	                        (detect.alarm_rate); absent otherwise
//	    "folded":           true: flagged, folded into its key's open alert
//	                        (detect.alert_cooldown); absent otherwise
//	    "alert_timestamp":  with "folded": the timestamp of that alert (as "timestamp"; with the
//	                        key it names the alert), null when it had none
//	    "folded_into_previous_alert": on an alert, how many flagged records of its key were
//	                        folded into the key's previous alert (absent when 0)
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
//
// jsonOutput (json_ref_test.go) declares the same fields for encoding/json, the reference the
// tests compare encodeJSONRow with and decode outputs into.

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

// OutputID is the deterministic id of the output of one source message ("id" in the JSON
// output, the header outlierd-id, the live view's alerts).
func OutputID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}

// JSONFloat is a float of the output contract for encoding/json, written as the sink writes
// it (a number when finite, else JSONPosInf, JSONNegInf or JSONNaN) and read back from either
// (the live view writes its floats with it, outlierd tail reads the outputs' with it).
type JSONFloat float64

// MarshalJSON implements json.Marshaler.
func (f JSONFloat) MarshalJSON() ([]byte, error) { return appendJSONFloatOrName(nil, float64(f)), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (f *JSONFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case JSONPosInf:
			*f = JSONFloat(math.Inf(1))
		case JSONNegInf:
			*f = JSONFloat(math.Inf(-1))
		case JSONNaN:
			*f = JSONFloat(math.NaN())
		default:
			return fmt.Errorf("%q is not a number, %q, %q or %q", s, JSONPosInf, JSONNegInf, JSONNaN)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = JSONFloat(v)
	return nil
}

// encodeJSON returns the JSON output of row i of b.
func encodeJSON(b *batch.Batch, c *columns, i int) ([]byte, error) {
	return encodeJSONRow(b, c, i, false)
}

// encodeJSONOmitted returns the JSON output of row i of b without its payload.
func encodeJSONOmitted(b *batch.Batch, c *columns, i int) ([]byte, error) {
	return encodeJSONRow(b, c, i, true)
}

// encodeJSONRow returns the JSON output of row i of b, with the payload unless omitPayload:
// appended by hand in jsonOutput's field order, byte for byte what encoding/json writes for
// it (SetEscapeHTML(false), without the trailing newline). encoding/json's reflection was
// most of the 10 us per flagged record that the sink spent (the drain's profile, 2026-11-23);
// TestEncodeJSONMatchesEncodingJSON pins this encoder to it.
func encodeJSONRow(b *batch.Batch, c *columns, i int, omitPayload bool) ([]byte, error) {
	part, off := c.partition.Value(i), c.offset.Value(i)
	p := b.Payloads[i]
	dst := make([]byte, 0, 384+len(b.Topic)+len(p))
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, OutputID(b.Topic, part, off), false)
	dst = append(dst, `,"topic":`...)
	dst = appendJSONString(dst, b.Topic, false)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(part), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, off, 10)
	dst = append(dst, `,"key":`...)
	if k := c.keyAt(i); k != nil {
		s, enc := textOrBase64(k)
		dst = appendJSONString(dst, s, false)
		dst = append(dst, `,"key_encoding":`...)
		dst = appendJSONString(dst, enc, false)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"timestamp":`...)
	if t, ok := c.timeAt(i); ok {
		dst = appendJSONString(dst, t.Format(time.RFC3339Nano), false)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"payload":`...)
	var payloadEncoding string
	buf := bytes.NewBuffer(dst)
	switch {
	case omitPayload:
		dst, payloadEncoding = append(dst, "null"...), "omitted"
	case utf8.Valid(p) && json.Compact(buf, p) == nil:
		// Valid JSON (Compact validates as json.Valid does, and writes nothing when it fails),
		// embedded compactly as encoding/json writes a RawMessage. Neither checks UTF-8 (as
		// encoding/json's decoder, they take invalid bytes in strings): embedded raw they would
		// make the output invalid JSON, so such a payload falls through to base64.
		dst, payloadEncoding = buf.Bytes(), "json"
	default:
		s, enc := textOrBase64(p)
		dst = appendJSONString(dst, s, true) // json.Marshal's escaping: HTML characters too
		payloadEncoding = enc
		if enc == "utf8" {
			payloadEncoding = "string"
		}
	}
	dst = append(dst, `,"payload_encoding":`...)
	dst = appendJSONString(dst, payloadEncoding, false)
	if omitPayload && len(p) != 0 { // omitempty
		dst = append(dst, `,"payload_bytes":`...)
		dst = strconv.AppendInt(dst, int64(len(p)), 10)
	}
	var sc batch.Score
	if b.Scores != nil {
		sc = b.Scores[i]
	}
	dst = append(dst, `,"scores":`...)
	subspace := []string{}
	if sc.Scored {
		var err error
		if dst, err = appendScoresJSON(dst, &sc); err != nil {
			return nil, err
		}
		if sc.Subspace != nil {
			subspace = sc.Subspace
		}
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"explanation":`...)
	dst = appendJSONString(dst, Explain(sc), false)
	dst = append(dst, `,"subspace":[`...)
	for j, f := range subspace {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, f, false)
	}
	dst = append(dst, `],"model_version":`...)
	dst = strconv.AppendUint(dst, b.ModelVersion, 10)
	return append(dst, '}'), nil
}

// appendScoresJSON appends the "scores" object of a scored record: jsonScores, or with a
// non-finite float jsonScoresNonFinite (each such field a string, see jsonFloat).
func appendScoresJSON(dst []byte, sc *batch.Score) ([]byte, error) {
	dst = append(dst, `{"outlier":`...)
	dst = strconv.AppendBool(dst, sc.Outlier)
	dst = append(dst, `,"density_outlier":`...)
	dst = strconv.AppendBool(dst, sc.DensityOutlier)
	dst = append(dst, `,"eta_probability":`...)
	dst = appendJSONFloatOrName(dst, sc.EtaProbability)
	dst = append(dst, `,"distance_outlier":`...)
	dst = strconv.AppendBool(dst, sc.DistanceOutlier)
	dst = append(dst, `,"weight":`...)
	dst = appendJSONFloatOrName(dst, sc.Weight)
	dst = append(dst, `,"w_star":`...)
	dst = appendJSONFloatOrName(dst, sc.WStar)
	if h := sc.Hypercube; h != nil {
		if !finite(h.Score) { // encoding/json refuses it
			return nil, fmt.Errorf("encode output as JSON: json: unsupported value: %s", strconv.FormatFloat(h.Score, 'g', -1, 64))
		}
		dst = append(dst, `,"hypercube":{"score":`...)
		dst = appendJSONFloat(dst, h.Score)
		dst = append(dst, `,"neighbours":`...)
		dst = strconv.AppendInt(dst, h.Neighbours, 10)
		dst = append(dst, `,"outlier":`...)
		dst = strconv.AppendBool(dst, h.Outlier)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"score":`...)
	dst = appendJSONFloatOrName(dst, sc.Score)
	if !math.IsNaN(sc.Recent) { // absent when detect.recent_scores is 0
		dst = append(dst, `,"recent":`...)
		dst = appendJSONFloatOrName(dst, sc.Recent)
	}
	if sc.KeyModelVersion != 0 {
		dst = append(dst, `,"key_model_version":`...)
		dst = strconv.AppendUint(dst, sc.KeyModelVersion, 10)
	}
	// What the explanation says of the alarm cap and the alert groups, for programs; each
	// absent when false or 0 (batch.Score's Suppressed, Grouped with AlertAt, Folded).
	if sc.Suppressed {
		dst = append(dst, `,"suppressed":true`...)
	}
	if sc.Grouped {
		dst = append(dst, `,"folded":true,"alert_timestamp":`...)
		if sc.AlertTimed {
			dst = appendJSONString(dst, time.UnixMilli(sc.AlertAt).UTC().Format(time.RFC3339Nano), false)
		} else {
			dst = append(dst, "null"...)
		}
	}
	if sc.Folded != 0 {
		dst = append(dst, `,"folded_into_previous_alert":`...)
		dst = strconv.AppendInt(dst, int64(sc.Folded), 10)
	}
	return append(dst, '}'), nil
}

// appendJSONFloatOrName appends v as a JSON number when finite, else as the string of
// jsonFloat.
func appendJSONFloatOrName(dst []byte, v float64) []byte {
	if s, ok := jsonFloat(v).(string); ok {
		return appendJSONString(dst, s, false)
	}
	return appendJSONFloat(dst, v)
}

// appendJSONFloat appends finite v as encoding/json writes a float64: the shortest decimal
// that reads back to v, in exponent form below 1e-6 and from 1e21 on (as ES6 does), exponents
// without a leading zero.
func appendJSONFloat(dst []byte, v float64) []byte {
	abs := math.Abs(v)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1] // e-09 -> e-9
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendJSONString appends s as encoding/json writes a string: '"' and '\\' and the control
// characters escaped (\b \f \n \r \t, else \u00XX), invalid UTF-8 as \ufffd, U+2028 and
// U+2029 escaped, and with escapeHTML also '<', '>' and '&' (\u003c ...).
func appendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || b != '<' && b != '>' && b != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// textOrBase64 returns b as a string when it is valid UTF-8 ("utf8"), else as standard base64
// ("base64").
func textOrBase64(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "utf8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// Explain renders a score as one line: the "explanation" of its JSON output (and the line the
// live view shows for each alert). For an outlier it gives the tests that flagged it; for
// an inlier the result of each test. A test whose fields are all zero and that did not fire is
// taken as not run (e.g. the distance detector disabled) and left out.
func Explain(s batch.Score) string {
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
	// What decided: the combined score (flag_by significance or rate) when it reached the
	// threshold, else the paper's verdicts. The explanation never contradicts the flag: an
	// outlier by the score lists the tests that fired beside it, not those that found the record
	// normal; an inlier lists the tests that found it normal, not one that fired alone.
	// A model without a ranking part leaves Score NaN and Threshold +Inf (a threshold of 0
	// is none either: every calibrated threshold is positive).
	ranked := !math.IsNaN(s.Score) && s.Threshold > 0 && !math.IsInf(s.Threshold, 0)
	score := ""
	switch {
	case ranked && s.Outlier && s.Held: // the alarm's deadband (detect.flag_clear)
		score = fmt.Sprintf("held: score %.3g < threshold %.3g %s", s.Score, s.Threshold, batch.HeldReason)
	case ranked && s.Score >= s.Threshold:
		score = fmt.Sprintf("score %.3g >= threshold %.3g", s.Score, s.Threshold)
	}
	if d := batch.DeviationsText(&s); score != "" && d != "" {
		score += " (" + d + ")"
	}
	fired := func() []string {
		var out []string
		if s.DensityOutlier {
			out = append(out, density)
		}
		if s.DistanceOutlier {
			out = append(out, distance)
		}
		if s.Hypercube != nil && s.Hypercube.Outlier {
			out = append(out, hcube)
		}
		return out
	}
	normal := func() []string {
		var out []string
		if !s.DensityOutlier && density != "" {
			out = append(out, density)
		}
		if !s.DistanceOutlier && distance != "" {
			out = append(out, distance)
		}
		if s.Hypercube != nil && !s.Hypercube.Outlier {
			out = append(out, hcube)
		}
		return out
	}
	if score != "" && s.Warming {
		score += "; " + batch.WarmingReason
	}
	if a := batch.AlertReason(&s); a != "" {
		score += "; " + a
	}
	if s.Outlier {
		f := fired()
		switch {
		case score != "":
			return strings.Join(append([]string{"outlier: " + score}, f...), "; ")
		case len(f) > 0:
			return strings.Join(f, "; ")
		}
		return "outlier by the combined rule"
	}
	if s.Suppressed && score != "" {
		return batch.SuppressedReason + ": " + score
	}
	head := "inlier"
	if ranked {
		head = fmt.Sprintf("inlier: score %.3g < threshold %.3g", s.Score, s.Threshold)
	}
	if parts := normal(); len(parts) > 0 {
		sep := ": "
		if head != "inlier" {
			sep = "; "
		}
		return head + sep + strings.Join(parts, "; ")
	}
	return head
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
