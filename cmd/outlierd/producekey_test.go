package main

import (
	"strings"
	"testing"

	"github.com/outlierd/outlierd/stages/ingest"
)

// TestProduceKeyColumnDottedPath: the pipeline reads a record's key from a dotted path of a JSON
// message (ingest.key_field: sensor.id reaches {"sensor": {"id": ...}}), as it reads features,
// but produce --key-column sensor.id refused the same lines, "no field \"sensor.id\"": a nested
// fleet could not be produced with its keys. The path reaches into the objects now; a field
// named with the dot itself still counts first, as before.
func TestProduceKeyColumnDottedPath(t *testing.T) {
	in := ingest.Default()
	in.Features = []string{"temp"}
	text := `{"sensor": {"id": "pump-7", "site": 3}, "temp": 1}` + "\n" +
		`{"sensor": {"id": 12}, "temp": 2}` + "\n" +
		`{"sensor.id": "flat", "temp": 3}` + "\n" +
		`{"sensor": {"site": 3}, "temp": 4}` + "\n"
	r, err := newRecordReader(strings.NewReader(text), "f.jsonl", "json", in, ',', "sensor.id")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"pump-7", "12", "flat"} {
		key, _, err := r.next()
		if err != nil || string(key) != want {
			t.Errorf("line %d: key %q, %v; want %q", i+1, key, err, want)
		}
	}
	if _, _, err := r.next(); err == nil || !strings.Contains(err.Error(), `f.jsonl:4: no field "sensor.id" (--key-column)`) {
		t.Errorf("a line without the path: %v", err)
	}
}
