package sink

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestEmptyKeyIsNotNull: a record whose key is present but empty (ingest: "a present key
// is never null, even empty") must give "key": "" whatever the other rows of its batch hold.
func TestEmptyKeyIsNotNull(t *testing.T) {
	mem := memory.NewGoAllocator()
	for _, keys := range [][][]byte{{{}, []byte("a")}, {{}}, {{}, {}}} {
		var rows []testbatch.Row
		for i, k := range keys {
			rows = append(rows, testbatch.Row{Offset: int64(i), Key: k, Time: time.Unix(1, 0), Features: []float32{1}, Payload: []byte(`{}`),
				Score: batch.Score{Scored: true}})
		}
		b := testbatch.New(t, mem, "in", []string{"x"}, false, true, rows)
		c, err := batchColumns(b)
		if err != nil {
			t.Fatal(err)
		}
		v, err := encodeJSON(b, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Key *string }
		if err := json.Unmarshal(v, &out); err != nil {
			t.Fatal(err)
		}
		if out.Key == nil || c.keyAt(0) == nil {
			t.Errorf("batch keys %q: row 0's empty key came out as null (Kafka key nil): %s", keys, v)
		}
		b.Release()
	}
}
