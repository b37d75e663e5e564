package detect

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestWindowRingMembers: the ring keeps the identities of the window's last records (as the
// window keeps their values), a resize keeps the newest, and the members are each partition's
// offset range of what is held; contains judges by topic, partition and offset.
func TestWindowRingMembers(t *testing.T) {
	r := newWindowRing(5)
	r.push("t", []int32{0, 1, 0, 1}, []int64{10, 20, 11, 21}, nil, nil)
	r.push("t", []int32{2, 0, 1}, []int64{7, 12, 22}, nil, nil) // holds 1/20 0/11 1/21 2/7 0/12 1/22 minus the oldest
	want := Members{Topic: "t", Ranges: []PartitionRange{{0, 11, 12}, {1, 21, 22}, {2, 7, 7}}}
	if got := r.members(); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %+v, want %+v", got, want)
	}
	small := r.resize(2) // the newest two: 0/12, 1/22
	if got := small.members(); !reflect.DeepEqual(got, Members{Topic: "t", Ranges: []PartitionRange{{0, 12, 12}, {1, 22, 22}}}) {
		t.Fatalf("after resize: %+v", got)
	}
	big := r.resize(8)
	big.push("t", []int32{2}, []int64{8}, nil, nil)
	if got := big.members(); !reflect.DeepEqual(got.Ranges, []PartitionRange{{0, 11, 12}, {1, 21, 22}, {2, 7, 8}}) {
		t.Fatalf("after growing: %+v", got)
	}
	for _, c := range []struct {
		topic string
		p     int32
		off   int64
		want  bool
	}{{"t", 0, 11, true}, {"t", 0, 13, false}, {"t", 2, 7, true}, {"t", 3, 7, false}, {"u", 0, 11, false}, {"t", 1, 20, false}} {
		if got := want.contains(c.topic, c.p, c.off); got != c.want {
			t.Errorf("contains(%s, %d, %d) = %v, want %v", c.topic, c.p, c.off, got, c.want)
		}
	}
}

// TestSignificanceSurvivesResize: a batch pushed before a window resize but scored after it (a
// batch held for the first model) marks its own records, not others: the ring addresses a
// record by its stream index, which a resize keeps.
func TestSignificanceSurvivesResize(t *testing.T) {
	r := newWindowRing(4)
	r.push("t", []int32{0, 0, 0, 0}, []int64{0, 1, 2, 3}, nil, nil)
	first := r.push("t", []int32{0, 0}, []int64{4, 5}, nil, nil) // records 4 and 5, not scored yet
	r = r.resize(4)                                              // holds records 2..5
	r.setSignificant(first)                                      // record 4 found significant
	if got, want := r.significant(4), []bool{false, false, true, false}; !reflect.DeepEqual(got, want) {
		t.Fatalf("marks after the resize %v, want %v (record 4 of 2..5)", got, want)
	}
	r = r.resize(8) // growing keeps them, and the numbering
	r.setSignificant(first + 1)
	if got, want := r.significant(4), []bool{false, false, true, true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("marks after growing %v, want %v", got, want)
	}
	if got := r.members(); !reflect.DeepEqual(got.Ranges, []PartitionRange{{0, 2, 5}}) {
		t.Fatalf("members after the resizes %+v, want offsets 2..5", got)
	}
	r.push("t", []int32{0, 0, 0, 0, 0, 0, 0, 0, 0}, []int64{6, 7, 8, 9, 10, 11, 12, 13, 14}, nil, nil) // more than it holds
	if got := r.significant(8); slices.Contains(got, true) || len(got) != 8 {
		t.Fatalf("marks after a batch larger than the ring %v, want 8 clear", got)
	}
	if got := r.members(); !reflect.DeepEqual(got.Ranges, []PartitionRange{{0, 7, 14}}) {
		t.Fatalf("members after a batch larger than the ring %+v, want offsets 7..14", got)
	}
}

// TestWindowRingRunsMatchModulo: members and significant read the ring's held records as two
// runs (runs); they give what a walk of every stream index modulo the capacity gives, for rings
// empty, part full, full and wrapped, and resized, with partitions in runs and interleaved.
func TestWindowRingRunsMatchModulo(t *testing.T) {
	r0 := rand.New(rand.NewPCG(8, 13))
	walk := func(r *windowRing, size int) (Members, []bool) {
		c := uint64(len(r.parts))
		lo, hi := map[int32]int64{}, map[int32]int64{}
		sig := []bool{}
		for i := r.pushed - uint64(r.held()); i < r.pushed; i++ {
			p, o := r.parts[i%c], r.offs[i%c]
			if l, ok := lo[p]; !ok || o < l {
				lo[p] = o
			}
			if h, ok := hi[p]; !ok || o > h {
				hi[p] = o
			}
		}
		for i := r.pushed - uint64(min(size, r.held())); i < r.pushed; i++ {
			sig = append(sig, r.sig[i%c])
		}
		m := Members{Topic: r.topic}
		for p, l := range lo {
			m.Ranges = append(m.Ranges, PartitionRange{Partition: p, Lo: l, Hi: hi[p]})
		}
		slices.SortFunc(m.Ranges, func(a, b PartitionRange) int { return cmp.Compare(a.Partition, b.Partition) })
		return m, sig
	}
	for round := range 200 {
		r := newWindowRing(1 + r0.IntN(300))
		var next [5]int64
		for range r0.IntN(8) {
			n := r0.IntN(400)
			parts, offs := make([]int32, n), make([]int64, n)
			run := r0.IntN(2) == 0 // a batch of partition runs, or interleaved
			p := int32(r0.IntN(5))
			for i := range n {
				if !run || r0.IntN(50) == 0 {
					p = int32(r0.IntN(5))
				}
				next[p] += 1 + int64(r0.IntN(3))
				parts[i], offs[i] = p, next[p]
			}
			r.push("t", parts, offs, nil, nil)
			for range r0.IntN(20) {
				r.setSignificant(r.pushed - 1 - uint64(r0.IntN(len(r.parts)+5)))
			}
			if r0.IntN(6) == 0 {
				r = r.resize(1 + r0.IntN(300))
			}
		}
		size := r0.IntN(len(r.parts) + 10)
		wantM, wantS := walk(r, size)
		if got := r.members(); !reflect.DeepEqual(got, wantM) {
			t.Fatalf("round %d (capacity %d, held %d, pushed %d): members %+v, want %+v", round, len(r.parts), r.held(), r.pushed, got, wantM)
		}
		if got := r.significant(size); !slices.Equal(got, wantS) {
			t.Fatalf("round %d (capacity %d, held %d, pushed %d): significant(%d) %v, want %v", round, len(r.parts), r.held(), r.pushed, size, got, wantS)
		}
	}
}

// BenchmarkWindowRingMembers: what a model's build reads of the ring on the stage's goroutine
// (reference, startRecalibration: every recalibrate_records, each batch at the defaults' W/4 and
// 20,000-record batches) at the default window of 50,000 records, its partitions in runs of 5,000
// (fetches), and wrapped.
func BenchmarkWindowRingMembers(b *testing.B) {
	r := newWindowRing(50000)
	parts, offs := make([]int32, 20000), make([]int64, 20000)
	for k := range 5 {
		for i := range parts {
			parts[i], offs[i] = int32(i/5000), int64(k*20000+i)
		}
		r.push("t", parts, offs, nil, nil)
	}
	b.Run("members", func(b *testing.B) {
		for range b.N {
			if m := r.members(); len(m.Ranges) != 4 {
				b.Fatalf("%d ranges", len(m.Ranges))
			}
		}
	})
	b.Run("significant", func(b *testing.B) {
		for range b.N {
			if s := r.significant(50000); len(s) != 50000 {
				b.Fatalf("%d marks", len(s))
			}
		}
	})
}
