package detect

import (
	"reflect"
	"testing"
)

// TestIDRingMembers: the ring keeps the identities of the window's last records (as the window
// keeps their values), a resize keeps the newest, and the members are each partition's offset
// range of what is held; contains judges by topic, partition and offset.
func TestIDRingMembers(t *testing.T) {
	r := newIDRing(5)
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
