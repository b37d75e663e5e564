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

// windowRing keeps what the stage knows of each record of the window beyond its values, in
// step with the window (the same capacity and order: the oldest fall out as they do there):
// its identity (partition, offset), from which a model's Members come, and whether it was found
// significant (alarm.go: left out of the next builds). One ring for both, pushed and resized
// together. A record is addressed by its stream index (the records pushed before it), which
// a resize keeps, so a batch pushed before a resize and scored after it (held for the first
// model) marks its own records.
type windowRing struct {
	topic  string
	parts  []int32
	offs   []int64
	sig    []bool
	pushed uint64 // records pushed so far; record n is at n mod capacity
	size   int    // records held: the newest, up to the capacity (fewer after growing)
	// warm marks the records that had a warming column (warmup.go), uncounted those the
	// hypercube's counts left out (hypercube_stage.go: warming ones, above the floor); warmHeld
	// counts the records held with warm set.
	warm, uncounted []bool
	warmHeld        int
	// times are the records' event times (ms, noTime: none), kept only where the stage has
	// cyclic columns (cycles.go: a model reads them once its window spans their period); nil
	// otherwise.
	times []int64
	// blind marks the significant records the global model marked while it left a cyclic pair
	// unread (cycles_rejudge.go), kept where times are; nil
	// otherwise.
	blind []bool
}

func newWindowRing(capacity int) *windowRing {
	return &windowRing{parts: make([]int32, capacity), offs: make([]int64, capacity), sig: make([]bool, capacity),
		warm: make([]bool, capacity), uncounted: make([]bool, capacity)}
}

// held is the number of records in the ring.
func (r *windowRing) held() int { return r.size }

// push appends a batch's identities, not significant (the oldest fall out, as in the window),
// with their warming and uncounted marks (nil: none), and returns the stream index of the
// batch's first record.
func (r *windowRing) push(topic string, parts []int32, offs []int64, warm, uncounted []bool) uint64 {
	first := r.pushed
	c := uint64(len(r.parts))
	r.topic = topic
	for i := max(0, len(parts)-len(r.parts)); i < len(parts); i++ {
		k := (first + uint64(i)) % c
		if r.warm[k] { // (the record it replaces: a slot not held reads false)
			r.warmHeld--
		}
		r.parts[k], r.offs[k], r.sig[k] = parts[i], offs[i], false
		if r.blind != nil {
			r.blind[k] = false
		}
		r.warm[k], r.uncounted[k] = warm != nil && warm[i], uncounted != nil && uncounted[i]
		if r.warm[k] {
			r.warmHeld++
		}
	}
	r.pushed += uint64(len(parts))
	r.size = min(r.size+len(parts), len(r.parts))
	return first
}

// setSignificant marks record n (a stream index), if it is still in the window.
func (r *windowRing) setSignificant(n uint64) {
	if n < r.pushed && r.pushed-n <= uint64(r.size) {
		r.sig[n%uint64(len(r.sig))] = true
	}
}

// significant returns the marks of the newest size records, oldest first (the window's
// Snapshot order).
func (r *windowRing) significant(size int) []bool { return r.marks(r.sig, size) }

// marks returns the bits of the newest size records, oldest first (the window's Snapshot
// order): bits is one of the ring's (sig, warm).
func (r *windowRing) marks(bits []bool, size int) []bool {
	size = min(size, r.held())
	out := make([]bool, size)
	lo, hi := r.runs(size)
	copy(out[copy(out, bits[lo[0]:lo[1]]):], bits[hi[0]:hi[1]])
	return out
}

// runs are the ring's positions of its newest size records, oldest first: lo's, then hi's
// (empty unless the records wrap around the ring's end). Copies of two runs, not an index
// modulo the capacity a record: a model's build reads the whole window's (50,000 records by
// default) on the stage's goroutine (docs/BENCHMARKS.md §13.1.15).
func (r *windowRing) runs(size int) (lo, hi [2]int) {
	c := uint64(len(r.sig))
	if size == 0 {
		return
	}
	first := int((r.pushed - uint64(size)) % c)
	if first+size <= int(c) {
		return [2]int{first, first + size}, [2]int{}
	}
	return [2]int{first, int(c)}, [2]int{0, first + size - int(c)}
}

// resize keeps the newest records (as many as fit) in a ring of the new capacity, under the
// same stream indices.
func (r *windowRing) resize(capacity int) *windowRing {
	n := newWindowRing(capacity)
	n.topic, n.pushed, n.size = r.topic, r.pushed, min(r.size, capacity)
	c, nc := uint64(len(r.parts)), uint64(capacity)
	for i := r.pushed - uint64(n.size); i < r.pushed; i++ {
		n.parts[i%nc], n.offs[i%nc], n.sig[i%nc] = r.parts[i%c], r.offs[i%c], r.sig[i%c]
		n.warm[i%nc], n.uncounted[i%nc] = r.warm[i%c], r.uncounted[i%c]
		if n.warm[i%nc] {
			n.warmHeld++
		}
	}
	if r.times != nil {
		n.times = make([]int64, capacity)
		for i := r.pushed - uint64(n.size); i < r.pushed; i++ {
			n.times[i%nc] = r.times[i%c]
		}
	}
	if r.blind != nil {
		n.blind = make([]bool, capacity)
		for i := r.pushed - uint64(n.size); i < r.pushed; i++ {
			n.blind[i%nc] = r.blind[i%c]
		}
	}
	return n
}

// members are the per-partition offset ranges of the identities held. A partition's records come
// in runs (a fetch is a partition's): the map is asked only where a record's partition is not
// the one before's (a map's lookups a record cost half a millisecond a build at 50,000, on the
// stage's goroutine: docs/BENCHMARKS.md §13.1.15).
func (r *windowRing) members() Members {
	m := Members{Topic: r.topic}
	at := map[int32]int{} // a partition's range in m.Ranges
	cur := -1
	lo, hi := r.runs(r.held())
	for _, run := range [2][2]int{lo, hi} {
		offs := r.offs[run[0]:run[1]]
		for i, p := range r.parts[run[0]:run[1]] {
			o := offs[i]
			if cur < 0 || m.Ranges[cur].Partition != p {
				k, ok := at[p]
				if !ok {
					k = len(m.Ranges)
					at[p] = k
					m.Ranges = append(m.Ranges, PartitionRange{Partition: p, Lo: o, Hi: o})
				}
				cur = k
			}
			pr := &m.Ranges[cur]
			pr.Lo, pr.Hi = min(pr.Lo, o), max(pr.Hi, o)
		}
	}
	slices.SortFunc(m.Ranges, func(a, b PartitionRange) int { return cmp.Compare(a.Partition, b.Partition) })
	return m
}
