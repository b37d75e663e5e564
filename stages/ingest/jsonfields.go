package ingest

import (
	"fmt"
	"strconv"
	"strings"
)

// The JSON decoder's fields: the trie of the configured paths in which its scanner (json.go)
// looks up each object key, and what the value found at a path becomes.
//
// Value rules (a decision, documented in Config.Features): features and uncertainties must be
// JSON numbers. Numeric strings ("12.5"), booleans and null are refused with `not a number`:
// a producer that quotes numbers is a schema problem worth seeing in the dead-letter topic, and
// accepting strings would hide "12,5" style locale bugs until they fail differently. The key
// field may be a string or a number (its text); the event time a number (epoch milliseconds,
// an integer) or a string (RFC 3339, or "2006-01-02 15:04:05": parseEventTime).
//
// A key repeated in one object on a configured path (a feature, an uncertainty, the key field,
// the event-time field, or an object on such a path, "sensor" of "sensor.temp") makes the record a
// dead letter naming the path (ReasonDuplicateKey), whatever the values: which one is meant is
// unknown, and taking the last (encoding/json's rule, which this decoder followed until
// 2026-11-28) scored a producer's bug with one of its two values, silently. RFC 8259 leaves
// such an object's meaning to the reader ("names SHOULD be unique"), I-JSON (RFC 7493) forbids
// it, encoding/json/v2 and Elasticsearch refuse it; the encoders producers use (Jackson, Python's
// json, encoding/json, Kafka Connect's JsonConverter) write maps and structs, and never repeat a
// key: a repeat comes from JSON built as text (templates, concatenation, log shippers' merges). A
// key the pipeline does not read may repeat (it changes nothing scored; the output's payload
// carries the message compacted, repeats and all). The message must still be valid JSON throughout: a syntax error comes
// first.

// jsonNode is one level of the path trie: "sensor.temp" is root -> "sensor" -> "temp".
type jsonNode struct {
	children map[string]*jsonNode
	slots    []int // indices into plan.slots of the fields at exactly this path
	path     string
	met      uint64 // the jsonDecoder.gen of the message that met this path last: a repeat when it is the current one

	// seen[i] is the key met at position i of this object in earlier messages and its child
	// (nil: not wanted), the key's bytes in seenKeys. A producer writes its messages with the
	// same keys in the same order, so one comparison replaces the map lookup (a hash per key
	// was 250 ns of a sensor message's 730 in the drain's profile); a different key at that
	// position is looked up and replaces the entry.
	seen     []seenKey
	seenKeys []byte
}

// seenKey is one entry of jsonNode.seen.
type seenKey struct {
	off, len int32
	child    *jsonNode
}

// Bounds of the key-order memo per node: positions beyond maxSeenKeys are always looked up,
// and the key bytes are dropped (and relearnt) when a layout that keeps changing has added
// maxSeenBytes of them.
const (
	maxSeenKeys  = 256
	maxSeenBytes = 16 << 10
)

// lookup returns the child of key, the object's i-th key (nil: not wanted).
func (n *jsonNode) lookup(i int, key []byte) *jsonNode {
	if i < len(n.seen) {
		e := n.seen[i]
		if string(n.seenKeys[e.off:e.off+e.len]) == string(key) {
			return e.child
		}
	}
	child := n.children[string(key)] // no allocation: the compiler special-cases map[string(b)]
	if i > len(n.seen) || i >= maxSeenKeys {
		return child
	}
	if len(n.seenKeys)+len(key) > maxSeenBytes {
		n.seen, n.seenKeys = n.seen[:0], n.seenKeys[:0]
		if i > 0 {
			return child
		}
	}
	e := seenKey{off: int32(len(n.seenKeys)), len: int32(len(key)), child: child}
	n.seenKeys = append(n.seenKeys, key...)
	if i == len(n.seen) {
		n.seen = append(n.seen, e)
	} else {
		n.seen[i] = e
	}
	return child
}

// newJSONTrie is the path trie of p's fields.
func newJSONTrie(p *plan) *jsonNode {
	root := &jsonNode{}
	for i, s := range p.slots {
		n := root
		segs := strings.Split(s.field, ".")
		for k, seg := range segs {
			if n.children == nil {
				n.children = map[string]*jsonNode{}
			}
			c := n.children[seg]
			if c == nil {
				c = &jsonNode{path: strings.Join(segs[:k+1], ".")}
				n.children[seg] = c
			}
			n = c
		}
		n.slots = append(n.slots, i)
	}
	return root
}

// target parses the value at a configured path and stores it in every slot there. A value that
// does not fit a slot is that slot's pending field error (see errs), not a failure yet.
func (d *jsonDecoder) target(n *jsonNode) error {
	if d.pos >= len(d.data) {
		return d.syntax("expected a value")
	}
	start := d.pos
	c := d.data[d.pos]
	var (
		num, text     []byte
		isNum, isText bool
		err           error
	)
	switch {
	case c == '-' || c >= '0' && c <= '9':
		num, err = d.number()
		isNum = true
	case c == '"':
		text, err = d.str(&d.strBuf)
		isText = true
	default:
		err = d.skipValue(1)
	}
	if err != nil {
		return err
	}
	for _, si := range n.slots {
		d.found[si] = true
		d.errs[si] = d.store(&d.plan.slots[si], num, text, isNum, isText, d.data[start:d.pos])
	}
	return nil
}

// store stores the value at slot s's path (a number, a string, or raw of another kind) and
// returns the field error when it does not fit the slot's role.
func (d *jsonDecoder) store(s *slot, num, text []byte, isNum, isText bool, raw []byte) error {
	switch {
	case isNum && (s.role == roleFeature || s.role == roleSD):
		var v float64
		if d.numPlain {
			v = plainDecimal(d.numM, d.numFrac, d.numNeg)
		} else {
			var perr error
			v, perr = strconv.ParseFloat(string(num), 64)
			if perr != nil { // only a range error is possible after the grammar check
				return &FieldError{Field: s.field, Reason: ReasonOutOfRange, Problem: "out of range: " + quoteShort(num)}
			}
		}
		return setNumber(s, v, d.out)
	case isNum && s.role == roleKey:
		d.keyCopy = append(d.keyCopy[:0], num...)
		d.out.Key, d.out.HasKey = d.keyCopy, true
	case isNum && s.role == roleTime && s.seconds:
		ms, ok, err := parseEpochSeconds(num)
		if !ok {
			err = fmt.Errorf("epoch seconds must be digits with an optional fraction and exponent: %s", quoteShort(num))
		}
		if err != nil {
			return &FieldError{Field: s.field, Reason: ReasonBadTime, Problem: err.Error()}
		}
		d.out.EventTime, d.out.HasEventTime, d.out.EventTimeText = ms, true, false
	case isNum && s.role == roleTime:
		ms, perr := strconv.ParseInt(string(num), 10, 64)
		if perr != nil {
			return &FieldError{Field: s.field, Reason: ReasonBadTime, Problem: "epoch milliseconds must be an integer: " + quoteShort(num)}
		}
		if err := checkEpochMS(ms, num); err != nil {
			return &FieldError{Field: s.field, Reason: ReasonBadTime, Problem: err.Error()}
		}
		d.out.EventTime, d.out.HasEventTime, d.out.EventTimeText = ms, true, false
	case isText && s.role == roleKey:
		d.keyCopy = append(d.keyCopy[:0], text...)
		d.out.Key, d.out.HasKey = d.keyCopy, true
	case isText && s.role == roleTime:
		return setText(s, text, d.out)
	case s.role == roleFeature || s.role == roleSD:
		if s.boolean && !isText { // (true, not "true")
			if v, ok := boolValue(raw); ok {
				return setNumber(s, v, d.out)
			}
		}
		return &FieldError{Field: s.field, Reason: ReasonNotNumber, Problem: "not a number: " + describeJSON(raw)}
	case s.role == roleKey:
		return &FieldError{Field: s.field, Reason: ReasonBadKey, Problem: "key must be a string or a number, got " + describeJSON(raw)}
	default:
		return &FieldError{Field: s.field, Reason: ReasonBadTime, Problem: "event time must be a string or a number, got " + describeJSON(raw)}
	}
	return nil
}

// describeJSON names a raw JSON value for a message: scalars as written (strings with their
// quotes), containers by kind.
func describeJSON(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	const max = 40
	if len(raw) > max {
		return fmt.Sprintf("%s...", raw[:max])
	}
	return string(raw)
}
