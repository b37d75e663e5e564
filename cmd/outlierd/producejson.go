package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/outlierd/outlierd/stages/ingest"
)

// csvObject is how produce writes a CSV row as a JSON object: the header's columns as keys, in
// header order, but a column named by a dotted path the config reads (ingest.features'
// sensor.temp, a key_field, an uncertainty field) nested as that path reaches it, {"sensor":
// {"temp": 71.2}}: written flat, {"sensor.temp": 71.2}, the decoder's path found nothing, and
// every record went to the dead-letter topic ("missing") without a word from produce.
type csvObject struct {
	key  []byte       // the key, a JSON string (none at the root)
	col  int          // a leaf's column; -1 for an object
	kids []*csvObject // an object's members, in header order
}

// newCSVObject plans the object of header's columns for the dotted paths ingest reads (in's
// fields); a column that would be both a value and an object of such a path (sensor and
// sensor.temp) is an error (name: the file, for the message).
func newCSVObject(name string, header []string, in ingest.Config) (*csvObject, error) {
	nested := map[string]bool{}
	for _, f := range in.Fields() {
		if strings.Contains(f.Name, ".") {
			nested[f.Name] = true
		}
	}
	root := &csvObject{col: -1}
	for i, h := range header {
		segs := []string{h}
		if nested[h] {
			segs = strings.Split(h, ".")
		}
		at := root
		for j, seg := range segs {
			key := []byte(quoteJSON(seg))
			var had *csvObject
			for _, k := range at.kids {
				if bytes.Equal(k.key, key) {
					had = k
				}
			}
			leaf := j == len(segs)-1
			if had != nil && (had.col < 0) == leaf { // a value where an object is, or the reverse
				return nil, fmt.Errorf("%s:1: column %q and the path %s that ingest reads both need the JSON key %q at one level: rename the column",
					name, h, strings.Join(segs[:j+1], "."), seg)
			}
			switch {
			case leaf:
				at.kids = append(at.kids, &csvObject{key: key, col: i})
			case had == nil:
				had = &csvObject{key: key, col: -1}
				at.kids = append(at.kids, had)
			}
			at = had
		}
	}
	return root, nil
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// write writes o's members of row into buf, an empty field left out (a missing value), and an
// object none of whose fields is there left out with them; it reports whether it wrote one.
func (o *csvObject) write(buf *bytes.Buffer, row []string) bool {
	n := 0
	for _, k := range o.kids {
		if k.col >= 0 && row[k.col] == "" {
			continue
		}
		mark := buf.Len()
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(k.key)
		buf.WriteByte(':')
		if k.col >= 0 {
			buf.Write(jsonValue(row[k.col]))
		} else {
			buf.WriteByte('{')
			if !k.write(buf, row) {
				buf.Truncate(mark) // nothing in it: left out
				continue
			}
			buf.WriteByte('}')
		}
		n++
	}
	return n > 0
}
