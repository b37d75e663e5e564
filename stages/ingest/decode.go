package ingest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Decoder turns one message value into feature values. A Decoder keeps scratch buffers and is
// not safe for concurrent use; make one per goroutine with Checked.NewDecoder.
type Decoder interface {
	// Decode fills out from value, or returns a *FieldError or *SyntaxError saying precisely
	// what is wrong. out must come from Config.NewDecoded (its slices sized for the config).
	// On error out's contents are unspecified. out.Key may alias value or the decoder's
	// buffers: it is valid until the next Decode call.
	Decode(value []byte, out *Decoded) error
}

// Decoded is one decoded record.
type Decoded struct {
	// Values are the features, in Config.Features order; always finite.
	Values []float32
	// SD are the uncertainties, row-aligned with Values; nil without Config.Uncertainty.
	// Always finite and >= 0.
	SD []float32
	// Key is the value of Config.KeyField when configured (HasKey true).
	Key    []byte
	HasKey bool
	// EventTime is the value of Config.EventTimeField in Unix milliseconds, when configured
	// (HasEventTime true).
	EventTime    int64
	HasEventTime bool
	// EventTimeText: the time was written as a text that says its unit (RFC 3339, "2006-01-02
	// 15:04:05"), not as an epoch integer (the source's epoch-seconds check, under
	// ingest.event_time_unit ms, is for those). Set wherever HasEventTime is.
	EventTimeText bool
	// Warming marks the columns whose rolling window is still filling (ingest.derive's mean and
	// std with fewer than `last` values of the series seen: derive_warmup.go), column-aligned
	// with Values; nil when no column can be warming. The builder writes such a value with its
	// Arrow validity bit cleared (null: "no value yet", the value kept in the buffer).
	Warming []bool
}

// NewDecoded returns a Decoded sized for the configuration.
func (c *Config) NewDecoded() *Decoded {
	d := &Decoded{Values: make([]float32, len(c.Features))}
	if c.Uncertainty != nil {
		d.SD = make([]float32, len(c.Features))
	}
	return d
}

// FieldError is a problem with one field of a record.
type FieldError struct {
	Field   string // the field as configured (a JSON path, CSV column, logfmt key)
	Reason  Reason // what kind of problem: what a caller acts on
	Problem string // for people, e.g. `missing`, `not a number: "abc"`, `NaN/Inf not allowed`
}

// Reason is the kind of problem a FieldError reports. Code that acts on a record's problem
// tests it (replay's hint that a text column is a key: ReasonNotNumber), not Problem, whose
// wording is for people and may change.
type Reason uint8

// The decoders' reasons; every FieldError they return has one (0 is none).
const (
	ReasonMissing      Reason = iota + 1 // absent (or empty), and nothing stands in for it
	ReasonNotNumber                      // a feature's or uncertainty's value is not a number: text, blank, a JSON object, null
	ReasonNotFinite                      // NaN or Inf, spelled out
	ReasonOutOfRange                     // a number beyond float64's range, or a feature's beyond float32's
	ReasonNegative                       // an uncertainty below 0
	ReasonBadTime                        // the event time is not a time the decoders read, or out of range
	ReasonBadKey                         // the key is neither a string nor a number (JSON)
	ReasonDuplicateKey                   // a configured key (or an object on a configured JSON path) repeated in one object or logfmt message
)

// reasonNames are the reasons' words, as a dead letter's Code (the header outlierd-reason)
// carries them: kept, for the programs that act on them.
var reasonNames = [...]string{"", "missing", "not_a_number", "not_finite", "out_of_range", "negative_uncertainty", "bad_event_time", "bad_key", "duplicate_key"}

// String names the reason ("not_a_number"); "reason(N)" for one the decoders do not give.
func (r Reason) String() string {
	if r == 0 || int(r) >= len(reasonNames) {
		return fmt.Sprintf("reason(%d)", r)
	}
	return reasonNames[r]
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Problem) }

// SyntaxError is a malformed message.
type SyntaxError struct {
	Format string // "JSON", "CSV" or "logfmt"
	Offset int    // 0-based byte offset in the message value
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid %s at byte %d: %s", e.Format, e.Offset, e.Msg)
}

// NewDecoder returns the decoder for the checked config's format, reading event times in the
// event_time_zone that Check loaded.
func (k *Checked) NewDecoder(opts ...DecoderOption) Decoder {
	p := newPlan(&k.cfg, k.zone)
	for _, o := range opts {
		o(p)
	}
	switch k.cfg.Format {
	case FormatCSV:
		return newCSVDecoder(&k.cfg, p)
	case FormatLogfmt:
		return newLogfmtDecoder(p)
	}
	return newJSONDecoder(p) // Check lets json, csv and logfmt through
}

// A DecoderOption widens what a decoder reads beyond its configuration.
type DecoderOption func(*plan)

// Label reads field too, after the features: Decoded.Values[len(Features)] (the Decoded must
// have that room). Its value is a number or a boolean, read as 1 (true) or 0 (false): a JSON
// true or false (not the string "true"), or in CSV and logfmt the word in any case (pandas
// writes True). For replay's label column, as exports write it; the pipeline's features stay
// numbers (a boolean there is a schema problem worth a dead letter). The label has no
// uncertainty and no fill value: a record without it is refused, and it adds no other way for
// a record to fail. Missing fields are reported in plan order: the label's after the features'
// and before the key's. "" reads nothing more.
func Label(field string) DecoderOption {
	return func(p *plan) {
		if field == "" {
			return
		}
		at, idx := len(p.slots), 0
		for i, s := range p.slots {
			switch s.role {
			case roleFeature:
				idx++
			case roleKey, roleTime:
				at = min(at, i)
			}
		}
		p.slots = slices.Insert(p.slots, at, slot{field: field, role: roleFeature, boolean: true, idx: idx})
		if p.fill != nil {
			p.fill = append(p.fill, float32(math.NaN()))
		}
	}
}

// A Field is one field the decoder reads from each record.
type Field struct {
	// Key is the config key that asks for it, as Validate names keys: "ingest.features[0]",
	// `ingest.uncertainty.fields["temp"]`, "ingest.uncertainty.suffix", "ingest.key_field" or
	// "ingest.event_time_field".
	Key string
	// Name is the field as the decoder looks it up (a JSON path, CSV column, logfmt key).
	Name string
	// Feature is the feature whose value or uncertainty it is; "" for the key and event time.
	Feature string
	// Required: a record without it is refused (a dead letter, `missing`); else the feature's
	// fill value (missing: fill) or uncertainty.default stands in.
	Required bool
	role     role // what it is read for (Feature is "" for an empty feature's name too)
}

// Fields lists the fields the decoder reads, in the order it reports missing ones (each feature
// then its uncertainty field, the key, the event time). It is the decoder's own plan, so that
// the checks of a file's columns before any record is decoded (produce, replay) say what the
// decoder will do.
func (c *Config) Fields() []Field {
	p := newPlan(c, nil)
	out := make([]Field, len(p.slots))
	for i := range p.slots {
		s := &p.slots[i]
		_, stands := p.fallback(s)
		out[i] = Field{Key: s.key, Name: s.field, Required: !stands, role: s.role}
		if s.role == roleFeature || s.role == roleSD {
			out[i].Feature = c.Features[s.idx]
		}
	}
	return out
}

// role is what a field is read for.
type role uint8

const (
	roleFeature role = iota
	roleSD
	roleKey
	roleTime
)

// slot is one field the decoder reads.
type slot struct {
	field   string // as configured
	role    role
	boolean bool   // a value that may be true or false too (Label)
	idx     int    // feature index for roleFeature and roleSD
	key     string // the config key that names it (Field.Key)
	// zone is the wall clock of a roleTime text without an offset (nil: UTC); the decoder's
	// own (it keeps the last zone period it looked up).
	zone *eventZone
	// seconds: a roleTime epoch number is seconds (ingest.event_time_unit: s), else milliseconds.
	seconds bool
}

// plan lists the fields a decoder reads, in the order missing fields are reported: each feature
// followed by its uncertainty field, then the key, then the event time.
type plan struct {
	slots []slot
	// sdDefault[i] is the uncertainty of feature i when its field is missing or not configured;
	// NaN when there is none (then a missing field is an error). Nil without uncertainty.
	sdDefault []float32
	// constSD lists the features whose uncertainty has no field: always the default.
	constSD []int
	// fill[i] is feature i's value when it is missing (ingest.missing: fill); NaN when it has
	// none (the record is then a dead letter). Nil without missing: fill.
	fill []float32
}

// newPlan is the plan of c; zone is c.EventTimeZone loaded (Validate loads it: nil reads UTC).
func newPlan(c *Config, zone *time.Location) *plan {
	p := &plan{}
	if c.Missing == MissingFill {
		p.fill = make([]float32, len(c.Features))
		for i, f := range c.Features {
			p.fill[i] = float32(math.NaN())
			if v, ok := c.Fill[f]; ok {
				p.fill[i] = float32(v)
			}
		}
	}
	if u := c.Uncertainty; u != nil {
		def := float32(math.NaN())
		if u.Default != nil {
			def = float32(*u.Default)
		}
		p.sdDefault = make([]float32, len(c.Features))
		for i := range p.sdDefault {
			p.sdDefault[i] = def
		}
	}
	for i, f := range c.Features {
		p.slots = append(p.slots, slot{field: f, role: roleFeature, idx: i, key: fmt.Sprintf("ingest.features[%d]", i)})
		if u := c.Uncertainty; u != nil {
			if sd, ok := u.Fields[f]; ok {
				p.slots = append(p.slots, slot{field: sd, role: roleSD, idx: i, key: fmt.Sprintf("ingest.uncertainty.fields[%q]", f)})
			} else if u.Suffix != "" {
				p.slots = append(p.slots, slot{field: f + u.Suffix, role: roleSD, idx: i, key: "ingest.uncertainty.suffix"})
			} else {
				p.constSD = append(p.constSD, i)
			}
		}
	}
	if c.KeyField != "" {
		p.slots = append(p.slots, slot{field: c.KeyField, role: roleKey, key: "ingest.key_field"})
	}
	if c.EventTimeField != "" {
		p.slots = append(p.slots, slot{field: c.EventTimeField, role: roleTime, key: "ingest.event_time_field",
			zone: newEventZone(zone), seconds: c.EventTimeUnit == EventTimeSeconds})
	}
	return p
}

// fallback is what stands in for slot s when its field is missing: the feature's fill value or
// the uncertainty default. ok is false where nothing does: the record is refused.
func (p *plan) fallback(s *slot) (v float32, ok bool) {
	switch {
	case s.role == roleSD:
		v = p.sdDefault[s.idx]
	case s.role == roleFeature && p.fill != nil:
		v = p.fill[s.idx]
	default:
		return 0, false
	}
	return v, !math.IsNaN(float64(v))
}

// finish fills defaults for the slots not found and reports the first missing field. found is
// indexed like p.slots.
func (p *plan) finish(found []bool, out *Decoded) error {
	for _, i := range p.constSD {
		out.SD[i] = p.sdDefault[i] // Validate made sure a default exists
	}
	for i := range p.slots {
		if found[i] {
			continue
		}
		s := &p.slots[i]
		v, ok := p.fallback(s)
		switch {
		case !ok:
			return &FieldError{Field: s.field, Reason: ReasonMissing, Problem: "missing"}
		case s.role == roleSD:
			out.SD[s.idx] = v
		default:
			out.Values[s.idx] = v
		}
	}
	return nil
}

// setNumber stores a parsed number for slot s, checking the float32 range and, for an
// uncertainty, the sign. raw is the text shown in messages.
func setNumber(s *slot, v float64, out *Decoded) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return &FieldError{Field: s.field, Reason: ReasonNotFinite, Problem: "NaN/Inf not allowed"}
	}
	// Out of range is what rounds to infinity as a float32, not what exceeds FLT_MAX as a
	// float64: FLT_MAX's own shortest spelling, 3.4028235e38 (how producers print it, often as
	// a "no reading" sentinel), is a little above it and rounds to it.
	f := float32(v)
	if math.IsInf(float64(f), 0) {
		return &FieldError{Field: s.field, Reason: ReasonOutOfRange, Problem: fmt.Sprintf("out of float32 range: %g", v)}
	}
	switch s.role {
	case roleFeature:
		out.Values[s.idx] = f
	case roleSD:
		if v < 0 {
			return &FieldError{Field: s.field, Reason: ReasonNegative, Problem: fmt.Sprintf("uncertainty must be >= 0: %g", v)}
		}
		out.SD[s.idx] = f
	}
	return nil
}

// setText stores a field given as text (CSV, logfmt, or a JSON string for key and time) for
// slot s. For features and uncertainties the text must be a decimal number.
func setText(s *slot, text []byte, out *Decoded) error {
	switch s.role {
	case roleKey:
		out.Key, out.HasKey = text, true
		return nil
	case roleTime:
		ms, err := parseEventTime(text, s.zone)
		asText := !epochDigits(trimSpace(text))
		if s.seconds {
			if v, ok, serr := parseEpochSeconds(text); ok {
				ms, err, asText = v, serr, false
			}
		}
		if err != nil {
			return &FieldError{Field: s.field, Reason: ReasonBadTime, Problem: err.Error()}
		}
		out.EventTime, out.HasEventTime, out.EventTimeText = ms, true, asText
		return nil
	}
	if s.boolean {
		if v, ok := boolValue(trimSpace(text)); ok {
			return setNumber(s, v, out)
		}
	}
	v, fe := parseDecimal(text)
	if fe != nil {
		fe.Field = s.field
		return fe
	}
	return setNumber(s, v, out)
}

// boolValue reads a Label's words, true and false in any case (ASCII letters), as 1
// and 0.
func boolValue(text []byte) (v float64, ok bool) {
	is := func(word string) bool {
		if len(text) != len(word) {
			return false
		}
		for i := range text {
			if text[i]|0x20 != word[i] { // (word is lower case: only its upper case ORs to it)
				return false
			}
		}
		return true
	}
	switch {
	case is("true"):
		return 1, true
	case is("false"):
		return 0, true
	}
	return 0, false
}

// parseDecimal parses a decimal floating-point number: optional sign, digits with an optional
// fraction, optional exponent. strconv.ParseFloat alone would also take hex floats ("0x1p3"),
// underscores and "infinity", which no producer of sensor data means; NaN and Inf spelled out
// get their own message because they are a common producer bug. The error is the field's but
// for its name.
func parseDecimal(text []byte) (float64, *FieldError) {
	text = trimSpace(text)
	notNumber := func() (float64, *FieldError) {
		return 0, &FieldError{Reason: ReasonNotNumber, Problem: "not a number: " + quoteShort(text)}
	}
	if len(text) == 0 {
		return 0, &FieldError{Reason: ReasonNotNumber, Problem: "not a number: empty"}
	}
	digits := false
	for i, c := range text {
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == 'e' || c == 'E':
		case (c == '+' || c == '-') && (i == 0 || text[i-1] == 'e' || text[i-1] == 'E'):
		default:
			if isNaNOrInf(text) {
				return 0, &FieldError{Reason: ReasonNotFinite, Problem: "NaN/Inf not allowed"}
			}
			return notNumber()
		}
	}
	if !digits {
		return notNumber()
	}
	if v, ok := fastDecimal(text); ok {
		return v, nil
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, &FieldError{Reason: ReasonOutOfRange, Problem: "out of range: " + quoteShort(text)}
		}
		return notNumber()
	}
	return v, nil
}

// fastDecimal parses the plain decimals sensors send ("-12.375": an optional '-', digits, an
// optional '.' and digits; at most 15 significant digits) as the integer of their digits
// divided by a power of ten: both exact in float64 (below 2^53 and 10^22), so the one division
// is correctly rounded, as strconv.ParseFloat's result is: the same float64. ok is false for
// anything else (an exponent, more digits, a '+'), which strconv.ParseFloat then parses.
func fastDecimal(text []byte) (v float64, ok bool) {
	i, n := 0, len(text)
	neg := n > 0 && text[0] == '-'
	if neg {
		i++
	}
	var m uint64
	digits, frac := 0, -1 // frac: digits after the '.', -1 before it
	for ; i < n; i++ {
		c := text[i]
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0 && digits > 0:
			frac = 0
		default:
			return 0, false
		}
	}
	if digits == 0 || digits > maxFastDigits || frac == 0 {
		return 0, false
	}
	return plainDecimal(m, max(frac, 0), neg), true
}

// maxFastDigits is the most significant digits fastDecimal takes: their integer is below 2^53.
const maxFastDigits = 15

// plainDecimal is m / 10^frac, negated when neg: exact operands (m < 2^53, frac <= 15), so the
// one division is correctly rounded.
func plainDecimal(m uint64, frac int, neg bool) float64 {
	v := float64(m)
	if frac > 0 {
		v /= pow10[frac]
	}
	if neg {
		v = -v
	}
	return v
}

// pow10 are the powers of ten that float64 holds exactly (fastDecimal needs up to 10^15).
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// isNaNOrInf reports whether text spells NaN or an infinity the way producers print them.
func isNaNOrInf(text []byte) bool {
	s := string(text)
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	switch len(s) {
	case 3, 8:
		v, err := strconv.ParseFloat(s, 64)
		return err == nil && (math.IsNaN(v) || math.IsInf(v, 0))
	}
	return false
}

// quoteShort quotes b for an error message, cut to 40 bytes so a huge field cannot flood the
// logs or the dead-letter reason.
func quoteShort(b []byte) string {
	const max = 40
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
