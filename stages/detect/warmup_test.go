package detect

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// withWarming is b with feature column j's every every-th record warming (a null whose value is
// kept, as ingest's builder writes a derived column still filling), its scores allocated; b is
// released.
func withWarming(t testing.TB, b *batch.Batch, j, every int) *batch.Batch {
	t.Helper()
	n := b.Len()
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = i%every != 0
	}
	bld := array.NewFloat32Builder(memory.NewGoAllocator())
	defer bld.Release()
	bld.AppendValues(b.Feature(j), valid)
	col := bld.NewArray()
	defer col.Release()
	cols := make([]arrow.Array, b.Record.NumCols())
	for c := range cols {
		cols[c] = b.Record.Column(c)
	}
	cols[j] = col
	rec := array.NewRecord(b.Record.Schema(), cols, int64(n))
	out, err := batch.New(b.Topic, b.Features, rec, b.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	out.Scores = make([]batch.Score, n)
	return out
}
