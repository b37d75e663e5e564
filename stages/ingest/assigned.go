package ingest

import "sync"

// The partitions a Source is assigned (detect.key_by on a scorer: it keeps the models of its
// partitions' keys only; pipeline/modelkeys.go): the consumer group's generation says which,
// when it starts (fetch.go startGeneration), before any of them is fetched.

// assignment is the Source's view of its assigned partitions.
type assignment struct {
	mu   sync.Mutex
	on   func(partitions []int32)
	last []int32 // the latest assignment (nil: none yet)
}

// set takes a generation's partitions (ascending; empty when it has none) and passes them on.
func (a *assignment) set(parts []int32) {
	a.mu.Lock()
	defer a.mu.Unlock() // (held while on runs: assignments reach it one at a time, in order)
	a.last = parts
	if a.on != nil {
		a.on(parts)
	}
}

// OnAssigned makes f hear the Source's partitions of its topic at every new assignment (a
// rebalance; empty when it has none), on the group's goroutine, one at a time and in order; an
// assignment heard before OnAssigned reaches f at once (the group is joined as soon as the
// Source is made).
func (s *Source) OnAssigned(f func(partitions []int32)) {
	a := s.assigned
	a.mu.Lock()
	defer a.mu.Unlock()
	a.on = f
	if a.last != nil {
		f(a.last)
	}
}
