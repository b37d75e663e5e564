package main

import (
	"strings"
	"testing"

	"github.com/outlierd/outlierd/stages/ingest"
)

// TestProduceKeyColumnDottedPath: the pipeline reads a record's key from a dotted path of a JSON
// message (ingest.key_field: sensor.id reaches {"sensor": {"id": ...}}), as it reads features;
// produce --key-column reads the same path. It read a field named "sensor.id" first, which the
// pipeline never reads (a key with a dot is reached by no path): a line holding both was keyed
// by one value and read by the pipeline with the other, and a flat line was keyed by a field
// its pipeline reports missing. A flat line is now refused, saying why.
func TestProduceKeyColumnDottedPath(t *testing.T) {
	in := ingest.Default()
	in.Features = []string{"temp"}
	text := `{"sensor": {"id": "pump-7", "site": 3}, "temp": 1}` + "\n" +
		`{"sensor": {"id": 12}, "temp": 2}` + "\n" +
		`{"sensor.id": "flat", "sensor": {"id": "nested"}, "temp": 3}` + "\n" +
		`{"sensor": {"site": 3}, "temp": 4}` + "\n" +
		`{"sensor.id": "flat", "temp": 5}` + "\n"
	r, err := newRecordReader(strings.NewReader(text), "f.jsonl", "json", in, ',', "sensor.id")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"pump-7", "12", "nested"} {
		key, _, err := r.next()
		if err != nil || string(key) != want {
			t.Errorf("line %d: key %q, %v; want %q", i+1, key, err, want)
		}
	}
	if _, _, err := r.next(); err == nil || !strings.Contains(err.Error(), `f.jsonl:4: no field "sensor.id" (--key-column)`) {
		t.Errorf("a line without the path: %v", err)
	}
	r, err = newRecordReader(strings.NewReader(text[strings.LastIndex(strings.TrimSpace(text), "\n")+1:]), "f.jsonl", "json", in, ',', "sensor.id")
	if err != nil {
		t.Fatal(err)
	}
	want := `f.jsonl:1: no field "sensor.id" (--key-column): the line has a key "sensor.id" with the dot in it, which is no path (ingest.key_field reads "sensor.id" as "id" in the object "sensor", as this does)`
	if key, _, err := r.next(); err == nil || err.Error() != want {
		t.Errorf("a flat line: key %q, %v; want %q", key, err, want)
	}
}
