package ingest

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

func TestBuilder(t *testing.T) {
	t.Parallel()
	for _, withSD := range []bool{false, true} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		func() {
			defer mem.AssertSize(t, 0)
			features := []string{"a", "b"}
			b := NewBuilder(mem, "in", features, withSD, 4)
			defer b.Release()
			if got := b.Build(); got != nil {
				t.Fatalf("empty Build() = %v, want nil", got)
			}
			t0 := time.UnixMilli(1_700_000_000_000).UTC()
			d := &Decoded{Values: make([]float32, 2)}
			if withSD {
				d.SD = make([]float32, 2)
			}
			for i := range 6 { // more than the reserved capacity
				d.Values[0], d.Values[1] = float32(i), float32(10*i)
				if withSD {
					d.SD[0], d.SD[1] = float32(i)/10, float32(i)/100
				}
				var key []byte
				if i%2 == 0 {
					key = []byte{byte('k'), byte('0' + i)}
				}
				if err := b.Append(d, int32(i%3), int64(100+i), key, t0.Add(time.Duration(i)*time.Millisecond), []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			bt := b.Build()
			defer bt.Record.Release()
			if bt.Len() != 6 || b.Len() != 0 || bt.Topic != "in" || !slices.Equal(bt.Features, features) || len(bt.Payloads) != 6 || bt.Payloads[5][0] != 5 {
				t.Fatalf("batch len %d, builder len %d, topic %q, features %v, payloads %d", bt.Len(), b.Len(), bt.Topic, bt.Features, len(bt.Payloads))
			}
			wantCols := []string{"a", "b"}
			if withSD {
				wantCols = append(wantCols, "a_sd", "b_sd")
			}
			wantCols = append(wantCols, batch.ColPartition, batch.ColOffset, batch.ColKey, batch.ColTimestamp)
			var gotCols []string
			for _, f := range bt.Record.Schema().Fields() {
				gotCols = append(gotCols, f.Name)
			}
			if !slices.Equal(gotCols, wantCols) {
				t.Fatalf("columns %v, want %v", gotCols, wantCols)
			}
			rec := bt.Record
			nf := 2
			if withSD {
				nf = 4
				if got := rec.Column(3).(*array.Float32).Float32Values(); !slices.Equal(got, []float32{0, 0.01, 0.02, 0.03, 0.04, 0.05}) {
					t.Errorf("b_sd = %v", got)
				}
			}
			if got := rec.Column(1).(*array.Float32).Float32Values(); !slices.Equal(got, []float32{0, 10, 20, 30, 40, 50}) {
				t.Errorf("b = %v", got)
			}
			if got := rec.Column(nf).(*array.Int32).Int32Values(); !slices.Equal(got, []int32{0, 1, 2, 0, 1, 2}) {
				t.Errorf("_partition = %v", got)
			}
			if got := rec.Column(nf + 1).(*array.Int64).Int64Values(); !slices.Equal(got, []int64{100, 101, 102, 103, 104, 105}) {
				t.Errorf("_offset = %v", got)
			}
			keys := rec.Column(nf + 2).(*array.Binary)
			for i := range 6 {
				if (i%2 == 1) != keys.IsNull(i) {
					t.Errorf("_key[%d] null = %v", i, keys.IsNull(i))
				}
			}
			if string(keys.Value(4)) != "k4" {
				t.Errorf("_key[4] = %q", keys.Value(4))
			}
			ts := rec.Column(nf + 3).(*array.Timestamp)
			if tt := ts.DataType().(*arrow.TimestampType); tt.Unit != arrow.Millisecond || tt.TimeZone != "UTC" {
				t.Errorf("_timestamp type %v", tt)
			}
			if got := int64(ts.Value(5)); got != t0.UnixMilli()+5 {
				t.Errorf("_timestamp[5] = %d", got)
			}
			// The builder is reusable after Build.
			if err := b.Append(d, 0, 1, nil, t0, nil); err != nil {
				t.Fatal(err)
			}
			bt2 := b.Build()
			if bt2.Len() != 1 {
				t.Errorf("second batch len %d", bt2.Len())
			}
			bt2.Record.Release()
			// A record of the wrong shape is refused and appends nothing.
			if err := b.Append(&Decoded{Values: make([]float32, 3)}, 0, 1, nil, t0, nil); err == nil || b.Len() != 0 {
				t.Errorf("wrong-shape Append: err %v, len %d", err, b.Len())
			}
			// Appended and never built: Release frees it (checked by AssertSize).
			if err := b.Append(d, 0, 2, []byte("k"), t0, nil); err != nil {
				t.Fatal(err)
			}
		}()
	}
}
