package detect

import (
	"cmp"
	"slices"
)

// Members says which records a model was built from, by identity: per partition of one topic,
// the offset range of the window's records. A record scored by a model that was built from it
// must not count itself as its own neighbour (solvingset.KNNWeightsMembers); judging that by
// identity, not by a process's own count of records, gives a re-read record (after a crash, a
// rebalance, in a scorer that follows a builder) the same weight as its first delivery.
//
// A partition's records reach the window in offset order, so its records in the window are the
// offsets [Lo, Hi] (minus dead letters, which are never scored). After a partition moved away
// and back a range can cover offsets the window did not hold: such a record is then taken for a
// member and skips one point at distance 0, which only raises its weight (no outlier is missed).
type Members struct {
	// Topic is the records' topic ("" with no ranges).
	Topic string
	// Ranges are sorted by partition.
	Ranges []PartitionRange
}

// PartitionRange is the offset range [Lo, Hi] of one partition's records in a window.
type PartitionRange struct {
	Partition int32
	Lo, Hi    int64
}

// contains reports whether the record (topic, partition, offset) was in the window.
func (m *Members) contains(topic string, p int32, off int64) bool {
	if topic != m.Topic {
		return false
	}
	i, ok := slices.BinarySearchFunc(m.Ranges, p, func(r PartitionRange, p int32) int { return cmp.Compare(r.Partition, p) })
	return ok && off >= m.Ranges[i].Lo && off <= m.Ranges[i].Hi
}

// idRing keeps the identities (partition, offset) of the window's records, in step with the
// window (the same capacity and order), and the topic they come from.
type idRing struct {
	topic string
	parts []int32
	offs  []int64
	next  int
	size  int
}

func newIDRing(capacity int) *idRing {
	return &idRing{parts: make([]int32, capacity), offs: make([]int64, capacity)}
}

// push appends a batch's identities (the oldest fall out, as in the window).
func (r *idRing) push(topic string, parts []int32, offs []int64) {
	r.topic = topic
	c := len(r.parts)
	for i := max(0, len(parts)-c); i < len(parts); i++ {
		r.parts[r.next], r.offs[r.next] = parts[i], offs[i]
		r.next = (r.next + 1) % c
		r.size = min(r.size+1, c)
	}
}

// resize keeps the newest min(size, capacity) identities in a ring of the new capacity.
func (r *idRing) resize(capacity int) *idRing {
	n := newIDRing(capacity)
	n.topic = r.topic
	c := len(r.parts)
	keep := min(r.size, capacity)
	start := (r.next - keep + c) % c
	for i := range keep {
		n.parts[i], n.offs[i] = r.parts[(start+i)%c], r.offs[(start+i)%c]
	}
	n.size, n.next = keep, keep%capacity
	return n
}

// members are the per-partition offset ranges of the identities held.
func (r *idRing) members() Members {
	lo, hi := map[int32]int64{}, map[int32]int64{}
	c := len(r.parts)
	start := (r.next - r.size + c) % c
	for i := range r.size {
		p, o := r.parts[(start+i)%c], r.offs[(start+i)%c]
		if l, ok := lo[p]; !ok || o < l {
			lo[p] = o
		}
		if h, ok := hi[p]; !ok || o > h {
			hi[p] = o
		}
	}
	m := Members{Topic: r.topic}
	for p, l := range lo {
		m.Ranges = append(m.Ranges, PartitionRange{Partition: p, Lo: l, Hi: hi[p]})
	}
	slices.SortFunc(m.Ranges, func(a, b PartitionRange) int { return cmp.Compare(a.Partition, b.Partition) })
	return m
}
