package ingest

import (
	"sync"
	"sync/atomic"
)

// The partitions a Source is assigned (detect.key_by on a scorer: it keeps the models of its
// partitions' keys only; pipeline/modelkeys.go; every role that flags: its alert groups go with
// their partitions): the consumer group's generation says which, when it starts (fetch.go
// startGeneration), before any of them is fetched.

// Assignment is one generation of the consumer group as this member has it.
//
// Whether a partition stayed this member's: a partition in two of its assignments in a row was
// its own throughout, no other member's in between, only when the second's Generation is the
// first's + 1. The group's coordinator numbers every generation it completes, one more each,
// with this member or without it; each has one owner per partition (kafka-go's protocol is the
// eager one: every member gives its partitions up before the next generation starts), and a
// member that does not rejoin in time (its session expired, it was paused or cut off, it left
// and came back, restarted) is not in the next. So a generation between two of this member's
// assignments (one it missed) may have given the partition to another member, which fetched
// it and acted on its records meanwhile. A gap proves no such loss (the missed generation may
// be one whose SyncGroup failed, or an empty one while the member restarted alone), and
// consecutive ids prove none happened: a user that must not take another member's work for its
// own (pipeline keyScope.stayed: the alert groups) takes every gap as a loss of every
// partition, unless its offsets say no member committed a record of it in between (Own). The ids of one process's assignments grow; after a restart the first one is
// compared with the last one saved (detect's alarm state format 4).
type Assignment struct {
	// Generation is the consumer group's generation id (Kafka's: kafka-go's Generation.ID).
	Generation int32
	// Partitions are the member's partitions of the topic in it, ascending (empty: none).
	Partitions []int32
	// Offsets are the group's committed offsets of Partitions (each one's), as the generation
	// started, the next record to read: where the generation fetches them from; negative: none
	// committed. A partition's offset that equals the offset after the last record this member
	// took of it, all of them acknowledged and committed, says no member committed any later
	// record in between (pipeline keyScope.stayed: the alert groups stay).
	Offsets []int64
	// Own are this member's committed offsets of Partitions (each one's) as its previous
	// assignment in this process ended (Source.Committed's then: its last successful commit of
	// the partition, else the offset that assignment started it from); negative where the
	// partition was not in it, none was known, or there was none. A partition's Offsets equal
	// to its Own says no member committed a record of it between the two assignments, a
	// generation missed or not (pipeline keyScope.stayed).
	Own []int64
}

// assignment is the Source's view of its assigned partitions.
type assignment struct {
	mu    sync.Mutex
	on    func(Assignment)
	last  Assignment
	heard bool // last is one (an assignment was heard)
	// any is heard, read without mu (AssignmentHeard: /readyz must not wait while on runs,
	// a scorer's read of its keys' models at a rebalance taking seconds).
	any atomic.Bool
}

// set takes a generation's assignment and passes it on.
func (a *assignment) set(as Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock() // (held while on runs: assignments reach it one at a time, in order)
	a.last, a.heard = as, true
	a.any.Store(true)
	if a.on != nil {
		a.on(as)
	}
}

// OnAssigned makes f hear the Source's assignment at every new generation (a rebalance; its
// partitions empty when it has none), on the group's goroutine, one at a time and in order; an
// assignment heard before OnAssigned reaches f at once (the group is joined as soon as the
// Source is made). f runs before the generation's partitions are fetched: the generation's
// fetch waits for it.
func (s *Source) OnAssigned(f func(Assignment)) {
	a := s.assigned
	a.mu.Lock()
	defer a.mu.Unlock()
	a.on = f
	if a.heard {
		f(a.last)
	}
}

// AssignmentHeard says whether the consumer group has given this Source an assignment yet
// (its partitions may be none). Until then nothing is fetched: a member that stopped without
// leaving the group (killed, crashed) holds its partitions until its session expires
// (ingest.session_timeout), and the join waits for that (pipeline: /readyz says so).
func (s *Source) AssignmentHeard() bool { return s.assigned.any.Load() }

// Committed is the group's committed offset of each partition of the generation in progress,
// as this member knows it: its own last successful commit, else the offset the generation
// started from (no member commits a partition's offsets while this one holds it); partitions
// with none committed left out. Read after the final commit of a stop: the offsets the alert
// groups saved are checked against (pipeline: a clean stop's groups stay when the restart
// finds them unmoved).
func (s *Source) Committed() map[int32]int64 {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	out := make(map[int32]int64, len(s.started))
	for p, off := range s.started {
		if c, ok := s.committed[p]; ok {
			off = c
		}
		if off >= 0 {
			out[int32(p)] = off
		}
	}
	return out
}
