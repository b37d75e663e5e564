package ingest

import "fmt"

// The CSV decoder reads one record per message: RFC 4180 fields separated by Config.CSVDelimiter,
// optionally double-quoted ("" inside quotes is a quote; quoted fields may contain the
// delimiter and newlines). One trailing "\n" or "\r\n" is ignored. A quote inside an unquoted
// field is an error, as in encoding/csv without LazyQuotes. Numbers are decimal (see
// parseDecimal); spaces and tabs around a value are ignored.

// span locates one field: data[start:end] of the message, or of the unescape buffer when
// quoted (quoted fields are copied so that "" can become ").
type span struct {
	start, end int
	inBuf      bool
}

type csvDecoder struct {
	plan    *plan
	cols    []int // column of each plan slot
	header  int   // number of columns a message must have; 0 = no header, any count
	delim   byte
	found   []bool
	fields  []span
	buf     []byte
	keyCopy []byte
	// missing holds Config.CSVMissing; maxMissing is its longest text (a longer field is not
	// looked up).
	missing    map[string]bool
	maxMissing int
}

func newCSVDecoder(c *Config, p *plan) *csvDecoder {
	d := &csvDecoder{plan: p, header: len(c.CSVHeader), delim: c.CSVDelimiter[0], found: make([]bool, len(p.slots)), missing: map[string]bool{}}
	for _, m := range c.CSVMissing {
		d.missing[m] = true
		d.maxMissing = max(d.maxMissing, len(m))
	}
	for _, s := range p.slots {
		col, err := c.csvColumn(s.field)
		if err != nil {
			// Only a suffixed uncertainty column absent from csv_header gets here (Validate
			// checked the rest): it always takes the default.
			col = -1
		}
		d.cols = append(d.cols, col)
	}
	return d
}

func (d *csvDecoder) syntax(off int, msg string) error {
	return &SyntaxError{Format: "CSV", Offset: off, Msg: msg}
}

// split parses line into d.fields.
func (d *csvDecoder) split(line []byte) error {
	d.fields, d.buf = d.fields[:0], d.buf[:0]
	p := 0
	for {
		if p < len(line) && line[p] == '"' {
			start := len(d.buf)
			q := p + 1
			for {
				if q >= len(line) {
					return d.syntax(p, "unterminated quoted field")
				}
				if line[q] == '"' {
					if q+1 < len(line) && line[q+1] == '"' {
						d.buf = append(d.buf, '"')
						q += 2
						continue
					}
					break
				}
				d.buf = append(d.buf, line[q])
				q++
			}
			d.fields = append(d.fields, span{start: start, end: len(d.buf), inBuf: true})
			p = q + 1
			if p < len(line) && line[p] != d.delim {
				return d.syntax(p, fmt.Sprintf("expected %q or the end of the line after a closing quote", d.delim))
			}
		} else {
			start := p
			for p < len(line) && line[p] != d.delim {
				if line[p] == '"' {
					return d.syntax(p, `bare " in an unquoted field`)
				}
				p++
			}
			d.fields = append(d.fields, span{start: start, end: p})
		}
		if p >= len(line) {
			return nil
		}
		p++ // delimiter
	}
}

// Decode implements Decoder.
func (d *csvDecoder) Decode(value []byte, out *Decoded) error {
	clear(d.found)
	out.HasKey, out.HasEventTime, out.Key = false, false, nil
	line := value
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	if err := d.split(line); err != nil {
		return err
	}
	if d.header > 0 && len(d.fields) != d.header {
		return d.syntax(0, fmt.Sprintf("%d columns, csv_header has %d", len(d.fields), d.header))
	}
	for i := range d.plan.slots {
		s := &d.plan.slots[i]
		col := d.cols[i]
		if col < 0 || col >= len(d.fields) {
			continue // reported missing by finish
		}
		f := d.fields[col]
		src := line
		if f.inBuf {
			src = d.buf
		}
		text := src[f.start:f.end]
		if t := trimSpace(text); len(t) == 0 {
			continue // an empty field is a missing value
		} else if (s.role == roleFeature || s.role == roleSD) && len(t) <= d.maxMissing && d.missing[string(t)] {
			continue // ingest.csv_missing: a missing value (plan.finish applies ingest.missing)
		}
		if s.role == roleKey {
			d.keyCopy = append(d.keyCopy[:0], text...)
			text = d.keyCopy
		}
		if err := setText(s, text, out); err != nil {
			return err
		}
		d.found[i] = true
	}
	return d.plan.finish(d.found, out)
}
