package batch

import (
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// record builds a record of sch with rows rows (zero values, null keys).
func record(mem memory.Allocator, sch *arrow.Schema, rows int) arrow.Record {
	rb := array.NewRecordBuilder(mem, sch)
	defer rb.Release()
	for _, f := range rb.Fields() {
		for i := range rows {
			switch f := f.(type) {
			case *array.Float32Builder:
				f.Append(float32(i))
			case *array.Float64Builder:
				f.Append(float64(i))
			case *array.Int32Builder:
				f.Append(int32(i % 2))
			case *array.Int64Builder:
				f.Append(int64(100 + i))
			case *array.BinaryBuilder:
				f.AppendNull()
			case *array.TimestampBuilder:
				f.Append(arrow.Timestamp(i))
			}
		}
	}
	return rb.NewRecord()
}

// acks counts Done calls.
type acks map[[2]int64]int

func (a acks) Done(p int, o int64) bool { a[[2]int64{int64(p), o}]++; return true }

func TestNewResolvesAndAcksOnce(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, withSD := range []bool{false, true} {
		b, err := New("t", []string{"a", "b"}, record(mem, Schema([]string{"a", "b"}, withSD), 3), [][]byte{nil, nil, nil})
		if err != nil {
			t.Fatal(err)
		}
		if b.HasUncertainty() != withSD || b.Feature(1)[2] != 2 || (b.Uncertainty(0) != nil) != withSD ||
			b.Partitions()[1] != 1 || b.Offsets()[2] != 102 || !b.Keys().IsNull(0) {
			t.Fatalf("withSD %v: accessors wrong", withSD)
		}
		a := acks{}
		b.SetAck(a)
		b.Ack()
		b.Ack() // resolved once
		if len(a) != 3 || a[[2]int64{1, 101}] != 1 || a[[2]int64{0, 102}] != 1 {
			t.Fatalf("acks %v, want each of the 3 records once", a)
		}
		b.Release()
		b.Release()
		if b.Resolved() || b.Partitions() != nil {
			t.Fatal("accessors valid after Release")
		}
	}
	d := NewDeadLetters([]DeadLetter{{Partition: 2, Offset: 7}}, acks{})
	a := d.ack.(acks)
	d.Ack()
	d.Ack()
	if a[[2]int64{2, 7}] != 1 {
		t.Fatalf("dead-letter acks %v", a)
	}
}

func TestNewRejectsOtherSchemas(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f := []string{"a", "b"}
	swapped := Schema([]string{"b", "a"}, false)
	wrongType := arrow.NewSchema(append([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Float64}}, Schema(f, false).Fields()[1:]...), nil)
	for _, tc := range []struct {
		name     string
		sch      *arrow.Schema
		payloads int
		want     string
	}{
		{"column order", swapped, 2, `column 0 is "b"`},
		{"type", wrongType, 2, `column 0 is "a" (float64), want "a" (float32)`},
		{"columns", Schema([]string{"a"}, false), 2, "5 columns, want 6 or 8"},
		{"payloads", Schema(f, false), 1, "2 rows but 1 payloads"},
	} {
		rec := record(mem, tc.sch, 2)
		_, err := New("t", f, rec, make([][]byte, tc.payloads))
		rec.Release()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
