package ingest

// The logfmt decoder reads `key=value` pairs separated by spaces or tabs. A value is bare (up to
// the next space; it may not contain '"' or '=') or double-quoted with the escapes \" \\ \n \r
// \t (an unknown escape keeps its backslash). A key without '=' is a flag with an empty value.
// The configured features are looked up by key and their values, quoted or not, must be
// decimal numbers; other keys are skipped. A configured key repeated in a message makes the
// record a dead letter naming it (ReasonDuplicateKey: which value is meant is unknown), as in
// the JSON decoder (jsonfields.go); other keys may repeat.

type logfmtDecoder struct {
	plan    *plan
	keys    map[string][]int // key -> indices into plan.slots
	found   []bool
	met     []bool  // per slot: its key was met in this message (a repeat is a dead letter)
	errs    []error // the field error of each slot (see jsonDecoder.errs)
	buf     []byte
	keyCopy []byte
}

func newLogfmtDecoder(p *plan) *logfmtDecoder {
	d := &logfmtDecoder{plan: p, keys: map[string][]int{}, found: make([]bool, len(p.slots)), met: make([]bool, len(p.slots)), errs: make([]error, len(p.slots))}
	for i, s := range p.slots {
		d.keys[s.field] = append(d.keys[s.field], i)
	}
	return d
}

func logfmtSyntax(off int, msg string) error {
	return &SyntaxError{Format: "logfmt", Offset: off, Msg: msg}
}

// Decode implements Decoder.
func (d *logfmtDecoder) Decode(value []byte, out *Decoded) error {
	clear(d.found)
	clear(d.met)
	clear(d.errs)
	out.HasKey, out.HasEventTime, out.Key = false, false, nil
	var dup error
	p, n := 0, len(value)
	for {
		for p < n && (value[p] == ' ' || value[p] == '\t' || value[p] == '\n' || value[p] == '\r') {
			p++
		}
		if p >= n {
			break
		}
		kstart := p
		for p < n && value[p] > ' ' && value[p] != '=' && value[p] != '"' {
			p++
		}
		key := value[kstart:p]
		if len(key) == 0 {
			if value[p] == '=' {
				return logfmtSyntax(p, "'=' without a key")
			}
			if value[p] == '"' {
				return logfmtSyntax(p, "unexpected '\"' where a key was expected")
			}
			return logfmtSyntax(p, "unexpected control character")
		}
		var val []byte
		if p < n && value[p] == '"' {
			return logfmtSyntax(p, "unexpected '\"' in a key")
		}
		if p < n && value[p] == '=' {
			p++
			if p < n && value[p] == '"' {
				v, next, err := d.quoted(value, p)
				if err != nil {
					return err
				}
				val, p = v, next
				if p < n && value[p] != ' ' && value[p] != '\t' && value[p] != '\n' && value[p] != '\r' {
					return logfmtSyntax(p, "expected a space after a closing quote")
				}
			} else {
				vstart := p
				for p < n && value[p] > ' ' {
					if value[p] == '"' || value[p] == '=' {
						return logfmtSyntax(p, "unexpected '"+string(value[p])+"' in an unquoted value")
					}
					p++
				}
				val = value[vstart:p]
			}
		} else if p < n && value[p] != ' ' && value[p] != '\t' && value[p] != '\n' && value[p] != '\r' {
			return logfmtSyntax(p, "unexpected control character")
		}
		slots, ok := d.keys[string(key)]
		if !ok {
			continue
		}
		if d.met[slots[0]] && dup == nil {
			dup = &FieldError{Field: d.plan.slots[slots[0]].field, Reason: ReasonDuplicateKey, Problem: "repeated in one message (which of its values is meant is unknown)"}
		}
		d.met[slots[0]] = true
		for _, si := range slots {
			s := &d.plan.slots[si]
			text := val
			if len(trimSpace(text)) == 0 {
				if s.role != roleKey {
					// An empty value counts as missing, even over an earlier one.
					d.found[si], d.errs[si] = false, nil
					continue
				}
			}
			if s.role == roleKey {
				d.keyCopy = append(d.keyCopy[:0], text...)
				text = d.keyCopy
			}
			d.errs[si] = setText(s, text, out)
			d.found[si] = true
		}
	}
	if dup != nil {
		return dup
	}
	for _, err := range d.errs {
		if err != nil {
			return err
		}
	}
	return d.plan.finish(d.found, out)
}

// quoted parses a quoted value starting at value[p] == '"' and returns its unescaped text (in
// d.buf, or a slice of value when it has no escapes) and the position after the closing quote.
func (d *logfmtDecoder) quoted(value []byte, p int) ([]byte, int, error) {
	start := p + 1
	q := start
	for q < len(value) && value[q] != '"' && value[q] != '\\' {
		q++
	}
	if q < len(value) && value[q] == '"' {
		return value[start:q], q + 1, nil
	}
	d.buf = append(d.buf[:0], value[start:q]...)
	for q < len(value) {
		c := value[q]
		switch c {
		case '"':
			return d.buf, q + 1, nil
		case '\\':
			if q+1 >= len(value) {
				return nil, 0, logfmtSyntax(p, "unterminated quoted value")
			}
			switch e := value[q+1]; e {
			case '"', '\\':
				d.buf = append(d.buf, e)
			case 'n':
				d.buf = append(d.buf, '\n')
			case 'r':
				d.buf = append(d.buf, '\r')
			case 't':
				d.buf = append(d.buf, '\t')
			default:
				d.buf = append(d.buf, '\\', e)
			}
			q += 2
		default:
			d.buf = append(d.buf, c)
			q++
		}
	}
	return nil, 0, logfmtSyntax(p, "unterminated quoted value")
}
