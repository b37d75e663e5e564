package ingest

import (
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON decoder is a hand-written single-pass scanner. It validates the whole message (RFC
// 8259 grammar; like encoding/json it does not reject invalid UTF-8 inside strings) and, while
// walking it, looks up each object key in a trie of the configured paths (jsonfields.go, with the
// rules for the values found there), so that only the
// wanted values are converted and nothing is allocated per message. encoding/json into a
// map[string]any allocates every key and value of the message; see BenchmarkDecodeJSON.

// maxJSONDepth bounds nesting so a hostile message cannot exhaust the stack.
const maxJSONDepth = 1000

type jsonDecoder struct {
	plan  *plan
	root  *jsonNode
	found []bool
	// errs[i] is the field error of slot i, nil when it was good: kept rather than returned at
	// once so that a syntax error later in the message is reported instead.
	errs []error
	// gen numbers the messages (jsonNode.met); dup is the message's first repeated path.
	gen uint64
	dup error

	// per Decode
	data    []byte
	pos     int
	out     *Decoded
	keyBuf  []byte // unescaped object key (only keys with escapes)
	strBuf  []byte // unescaped string value at a target path
	keyCopy []byte // the record key, kept apart from strBuf

	// the last number() read: numPlain when it is a plain decimal (no exponent, at most
	// maxFastDigits digits), then its value is plainDecimal(numM, numFrac, numNeg)
	numM     uint64
	numFrac  int
	numNeg   bool
	numPlain bool
}

func newJSONDecoder(p *plan) *jsonDecoder {
	return &jsonDecoder{plan: p, root: newJSONTrie(p), found: make([]bool, len(p.slots)), errs: make([]error, len(p.slots))}
}

// Decode implements Decoder.
func (d *jsonDecoder) Decode(value []byte, out *Decoded) error {
	d.data, d.pos, d.out = value, 0, out
	defer func() { d.data, d.out = nil, nil }()
	clear(d.found)
	clear(d.errs)
	d.gen, d.dup = d.gen+1, nil
	out.HasKey, out.HasEventTime, out.Key = false, false, nil
	d.skipWS()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return d.syntax("expected a JSON object")
	}
	if err := d.object(d.root, 1); err != nil {
		return err
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return d.syntax("unexpected data after the top-level object")
	}
	if d.dup != nil {
		return d.dup
	}
	for _, err := range d.errs {
		if err != nil {
			return err
		}
	}
	return d.plan.finish(d.found, out)
}

func (d *jsonDecoder) syntax(msg string) error {
	return &SyntaxError{Format: "JSON", Offset: d.pos, Msg: msg}
}

func (d *jsonDecoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// object parses an object starting at '{'. node is the trie node of this object's path, nil
// when no configured field lies below it.
func (d *jsonDecoder) object(node *jsonNode, depth int) error {
	if depth > maxJSONDepth {
		return d.syntax("nesting too deep")
	}
	d.pos++ // '{'
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return nil
	}
	for i := 0; ; i++ {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return d.syntax("expected a string key")
		}
		var child *jsonNode
		if node != nil && node.children != nil {
			key, err := d.str(&d.keyBuf)
			if err != nil {
				return err
			}
			child = node.lookup(i, key)
		} else if err := d.skipString(); err != nil {
			return err
		}
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return d.syntax("expected ':' after an object key")
		}
		d.pos++
		d.skipWS()
		if child != nil {
			if child.met == d.gen && d.dup == nil { // (a dead letter: jsonfields.go)
				d.dup = &FieldError{Field: child.path, Reason: ReasonDuplicateKey, Problem: "repeated in one object (which of its values is meant is unknown)"}
			}
			child.met = d.gen
		}
		var err error
		switch {
		case child != nil && len(child.slots) > 0:
			err = d.target(child)
		case child != nil && d.pos < len(d.data) && d.data[d.pos] == '{':
			err = d.object(child, depth+1)
		default:
			// Not wanted, or wanted below but not an object here (its fields are then
			// reported missing).
			err = d.skipValue(depth + 1)
		}
		if err != nil {
			return err
		}
		d.skipWS()
		if d.pos >= len(d.data) {
			return d.syntax("expected ',' or '}' after an object value")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipWS()
		case '}':
			d.pos++
			return nil
		default:
			return d.syntax("expected ',' or '}' after an object value")
		}
	}
}

func (d *jsonDecoder) array(depth int) error {
	if depth > maxJSONDepth {
		return d.syntax("nesting too deep")
	}
	d.pos++ // '['
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return nil
	}
	for {
		if err := d.skipValue(depth + 1); err != nil {
			return err
		}
		d.skipWS()
		if d.pos >= len(d.data) {
			return d.syntax("expected ',' or ']' after an array element")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipWS()
		case ']':
			d.pos++
			return nil
		default:
			return d.syntax("expected ',' or ']' after an array element")
		}
	}
}

// skipValue validates and skips one value.
func (d *jsonDecoder) skipValue(depth int) error {
	if d.pos >= len(d.data) {
		return d.syntax("expected a value")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(nil, depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.skipString()
	case c == '-' || c >= '0' && c <= '9':
		_, err := d.number()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	}
	return d.syntax("expected a value")
}

func (d *jsonDecoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return d.syntax("expected a value")
	}
	d.pos += len(lit)
	return nil
}

// number validates a number per the JSON grammar and returns its text.
func (d *jsonDecoder) number() ([]byte, error) {
	start := d.pos
	p := d.pos
	n := len(d.data)
	neg := p < n && d.data[p] == '-'
	if neg {
		p++
	}
	// The digits' integer and the count after the '.', gathered while checking the grammar:
	// for a plain decimal they are fastDecimal's, without a second pass over the text.
	var m uint64
	digits, frac := 0, 0
	switch {
	case p < n && d.data[p] == '0':
		p++
		digits = 1
	case p < n && d.data[p] >= '1' && d.data[p] <= '9':
		for p < n && d.data[p] >= '0' && d.data[p] <= '9' {
			m = m*10 + uint64(d.data[p]-'0')
			digits++
			p++
		}
	default:
		d.pos = p
		return nil, d.syntax("invalid number")
	}
	if p < n && d.data[p] == '.' {
		p++
		if p >= n || d.data[p] < '0' || d.data[p] > '9' {
			d.pos = p
			return nil, d.syntax("invalid number: digit expected after '.'")
		}
		for p < n && d.data[p] >= '0' && d.data[p] <= '9' {
			m = m*10 + uint64(d.data[p]-'0')
			digits++
			frac++
			p++
		}
	}
	d.numPlain = digits <= maxFastDigits
	d.numM, d.numFrac, d.numNeg = m, frac, neg
	if p < n && (d.data[p] == 'e' || d.data[p] == 'E') {
		d.numPlain = false
		p++
		if p < n && (d.data[p] == '+' || d.data[p] == '-') {
			p++
		}
		if p >= n || d.data[p] < '0' || d.data[p] > '9' {
			d.pos = p
			return nil, d.syntax("invalid number: digit expected in exponent")
		}
		for p < n && d.data[p] >= '0' && d.data[p] <= '9' {
			p++
		}
	}
	d.pos = p
	return d.data[start:p], nil
}

// skipString validates and skips a string starting at '"'.
func (d *jsonDecoder) skipString() error {
	p := d.pos + 1
	for p < len(d.data) {
		switch c := d.data[p]; {
		case c == '"':
			d.pos = p + 1
			return nil
		case c == '\\':
			if p+1 >= len(d.data) {
				d.pos = p
				return d.syntax("unterminated string")
			}
			switch d.data[p+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p += 2
			case 'u':
				if !isHex4(d.data[p+2:]) {
					d.pos = p
					return d.syntax(`invalid \u escape`)
				}
				p += 6
			default:
				d.pos = p
				return d.syntax("invalid escape in string")
			}
		case c < 0x20:
			d.pos = p
			return d.syntax("control character in string")
		default:
			p++
		}
	}
	d.pos = p
	return d.syntax("unterminated string")
}

// str parses a string starting at '"' and returns its content: a slice of the message when it
// has no escapes, else the unescaped text in *buf.
func (d *jsonDecoder) str(buf *[]byte) ([]byte, error) {
	start := d.pos + 1
	p := start
	for p < len(d.data) {
		c := d.data[p]
		if c == '"' {
			d.pos = p + 1
			return d.data[start:p], nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p++
	}
	// Slow path: validate, then unescape.
	d.pos = start - 1
	if err := d.skipString(); err != nil {
		return nil, err
	}
	raw := d.data[start : d.pos-1]
	b := (*buf)[:0]
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := rune(hex4(raw[i+2:]))
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, rune(hex4(raw[i+2:]))); r2 != utf8.RuneError {
						r = r2
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // '"', '\\', '/'
			b = append(b, raw[i+1])
		}
		i += 2
	}
	*buf = b
	return b, nil
}

func isHex4(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b[:4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		default:
			v |= uint16(c - 'A' + 10)
		}
	}
	return v
}
