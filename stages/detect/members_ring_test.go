package detect

import (
	"reflect"
	"slices"
	"testing"
)

// TestWindowRingMembers: the ring keeps the identities of the window's last records (as the
// window keeps their values), a resize keeps the newest, and the members are each partition's
// offset range of what is held; contains judges by topic, partition and offset.
func TestWindowRingMembers(t *testing.T) {
	r := newWindowRing(5)
	r.push("t", []int32{0, 1, 0, 1}, []int64{10, 20, 11, 21})
	r.push("t", []int32{2, 0, 1}, []int64{7, 12, 22}) // holds 1/20 0/11 1/21 2/7 0/12 1/22 minus the oldest
	want := Members{Topic: "t", Ranges: []PartitionRange{{0, 11, 12}, {1, 21, 22}, {2, 7, 7}}}
	if got := r.members(); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %+v, want %+v", got, want)
	}
	small := r.resize(2) // the newest two: 0/12, 1/22
	if got := small.members(); !reflect.DeepEqual(got, Members{Topic: "t", Ranges: []PartitionRange{{0, 12, 12}, {1, 22, 22}}}) {
		t.Fatalf("after resize: %+v", got)
	}
	big := r.resize(8)
	big.push("t", []int32{2}, []int64{8})
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
	r.push("t", []int32{0, 0, 0, 0}, []int64{0, 1, 2, 3})
	first := r.push("t", []int32{0, 0}, []int64{4, 5}) // records 4 and 5, not scored yet
	r = r.resize(4)                                    // holds records 2..5
	r.setSignificant(first)                            // record 4 found significant
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
	r.push("t", []int32{0, 0, 0, 0, 0, 0, 0, 0, 0}, []int64{6, 7, 8, 9, 10, 11, 12, 13, 14}) // more than it holds
	if got := r.significant(8); slices.Contains(got, true) || len(got) != 8 {
		t.Fatalf("marks after a batch larger than the ring %v, want 8 clear", got)
	}
	if got := r.members(); !reflect.DeepEqual(got.Ranges, []PartitionRange{{0, 7, 14}}) {
		t.Fatalf("members after a batch larger than the ring %+v, want offsets 7..14", got)
	}
}
