package sink

import (
	"fmt"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestArrowWarmingColumn: the Arrow output names, per row, the feature columns that were still
// warming (batch.Batch.Warming: a derived mean or std whose window held fewer than `last`
// values), whose value it writes as derived (a std of one value is 0). Without the column a
// consumer read that 0 as a stuck sensor, the very reading the detect stage declines to score
// (warm26b: the value had no mark left in the output). Rows without one: an empty list.
func TestArrowWarmingColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	feats := []string{"temp", "temp.std32"}
	rows := []testbatch.Row{
		{Partition: 0, Offset: 1, Time: ts0, Features: []float32{20, 0}, Payload: []byte(`{"temp":20}`), Score: batch.Score{Scored: true, Score: 0.1}},
		{Partition: 0, Offset: 2, Time: ts0, Features: []float32{21, 0.7}, Payload: []byte(`{"temp":21}`), Score: batch.Score{Scored: true, Score: 0.2}},
		{Partition: 0, Offset: 3, Time: ts0, Features: []float32{22, 0.8}, Payload: []byte(`{"temp":22}`)}, // not scored
	}
	plain := testbatch.New(t, mem, "sensors", feats, false, true, rows)
	// Row 0's std warming (and row 2's): validity cleared, value kept, as ingest's builder writes it.
	bld := array.NewFloat32Builder(mem)
	bld.AppendValues(plain.Feature(1), []bool{false, true, false})
	std := bld.NewArray()
	bld.Release()
	cols := make([]arrow.Array, plain.Record.NumCols())
	for c := range cols {
		cols[c] = plain.Record.Column(c)
	}
	idx := plain.Record.Schema().FieldIndices("temp.std32")
	if len(idx) != 1 {
		t.Fatalf("column temp.std32: %v", idx)
	}
	cols[idx[0]] = std
	rec := array.NewRecord(plain.Record.Schema(), cols, int64(len(rows)))
	std.Release()
	b, err := batch.New(plain.Topic, plain.Features, rec, plain.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	b.Scores = plain.Scores
	plain.Record.Release()
	defer b.Record.Release()
	if b.Warming(1) == nil {
		t.Fatal("the batch holds no warming record: the case misses its point")
	}
	want := map[int64]string{1: "[temp.std32] 0", 2: "[] 0.7", 3: "[temp.std32] 0.8"}
	seen := 0
	for _, m := range arrowOutputs(t, mem, b, 1<<20) {
		forEachArrowRow(t, mem, m.Value, func(get func(string) any) {
			seen++
			off := get("_offset").(int64)
			if got := fmt.Sprint(get(ColWarming), " ", get("temp.std32")); got != want[off] {
				t.Errorf("offset %d: warming, value %s; want %s", off, got, want[off])
			}
		})
	}
	if seen != len(rows) {
		t.Errorf("%d rows in the Arrow output, want %d", seen, len(rows))
	}
}
