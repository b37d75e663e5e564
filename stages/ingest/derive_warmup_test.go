package ingest

import (
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestDeriveWarmingMarks: a mean's and a std's column is marked warming while its series holds
// fewer than `last` values (a key's first last-1 records, again after a partition is read again
// and after the key's series was evicted), a robust_z's while fewer than `last` values precede
// the record (its window is the previous values: a key's first `last` records), never a diff's
// or a feature's; the builder writes a warming value as a null whose value is kept.
func TestDeriveWarmingMarks(t *testing.T) {
	c := deriveConfig(t, "derive:\n  max_keys: 2\n  features: [{kind: diff, of: temp}, {kind: robust_z, of: temp, last: 3}, {kind: mean, of: temp, last: 4}, {kind: std, of: temp, last: 4}]\n")
	d := deriverOf(t, c, "temp,temp.diff,temp.rz3,temp.mean4,temp.std4")
	bld := NewBuilder(memory.NewGoAllocator(), "in", c.Columns(), false, 16)
	defer bld.Release()
	in := &Decoded{Values: make([]float32, 1)}
	type step struct {
		p    int32
		off  int64
		key  string
		warm bool // temp.rz3 (3 previous values: the 4th record on), temp.mean4 and temp.std4 (4 values, this one included) warming
	}
	steps := []step{
		{0, 0, "a", true}, {0, 1, "a", true}, {0, 2, "a", true}, {0, 3, "a", false}, {0, 4, "a", false}, // a's window fills at its 4th
		{0, 5, "b", true}, {0, 6, "b", true}, {0, 7, "b", true}, {0, 8, "b", false},
		{0, 9, "c", true},                                          // a third key evicts a (max_keys 2, the least recent)
		{0, 10, "a", true}, {0, 11, "a", true}, {0, 12, "a", true}, // a afresh
		{0, 13, "a", false},
		{0, 6, "b", true}, // partition 0 read again from offset 6: its series afresh
	}
	var stds []float32
	for i, s := range steps {
		in.Values[0] = float32(i * i)
		out := d.Apply(in, s.p, s.off, []byte(s.key), monday6)
		want := []bool{false, false, s.warm, s.warm, s.warm}
		if !slices.Equal(out.Warming, want) {
			t.Errorf("step %d (key %s, offset %d): warming %v, want %v", i, s.key, s.off, out.Warming, want)
		}
		stds = append(stds, out.Values[4])
		if err := bld.Append(out, s.p, s.off, []byte(s.key), monday6, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := bld.Build()
	defer b.Release()
	for j := range 2 {
		if b.Warming(j) != nil {
			t.Errorf("column %s: marked warming", b.Features[j])
		}
	}
	for _, j := range []int{2, 3, 4} {
		a := b.Warming(j)
		if a == nil {
			t.Fatalf("column %s: no warming record", b.Features[j])
		}
		for i, s := range steps {
			if a.IsNull(i) != s.warm {
				t.Errorf("column %s, row %d: null %v, want %v", b.Features[j], i, a.IsNull(i), s.warm)
			}
		}
	}
	if got := b.Feature(4); !slices.Equal(got, stds) { // the value kept under the null
		t.Errorf("temp.std4 in the batch %v, want the derived %v", got, stds)
	}
}
