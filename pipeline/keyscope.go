package pipeline

import (
	"sync"

	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// keyScope is a scorer's share of the keys: the partitions its consumer group assigned it
// (ingest.Source.OnAssigned). Before the first assignment it keeps no key; from then on the
// keys of its partitions (at each rebalance the detect goroutine drops the keys of the
// partitions moved away when changed signals). Every role that flags has one, for its alert
// groups (alertScope): a group goes with its partition, and at a generation of the consumer
// group missed (stayed).
type keyScope struct {
	mu      sync.Mutex
	known   bool
	all     bool // a source that reports no assignment: every key (each scorer reads every partition)
	parts   map[int32]bool
	changed chan struct{} // capacity 1
	// left are the partitions that left an assignment since the detect goroutine last took
	// them (stayed): one that left and came back between two of its reads (a signal on
	// changed stands for both) was another instance's meanwhile.
	left map[int32]bool
	// gen is the latest assignment's consumer group generation. heard says an assignment came
	// since the detect goroutine's last turn (stayed), first is the generation of the first
	// one, and skipped whether one of the others did not follow the one before it (gen + 1):
	// a generation missed between them (ingest.Assignment).
	gen     int32
	heard   bool
	first   int32
	skipped bool
	// firstAt are the committed offsets of the first assignment since the detect goroutine's
	// last turn, by partition (ingest.Assignment.Offsets; none negative).
	firstAt map[int32]int64
	// via and broken are, since the detect goroutine's last turn, the partitions of the
	// assignments that did not follow the one before them in this process (a generation
	// missed) whose committed offset was (via: the least of them) or was not (broken) the one
	// this member had committed as it left them (ingest.Assignment.Own): no member committed a
	// record of it in between, or perhaps one did.
	via    map[int32]int64
	broken map[int32]bool
	// firstRun says the first assignment since the last turn had one before it in this process
	// (a gap before it was checked: offsetsAfterGap).
	firstRun bool
}

func newKeyScope() *keyScope { return &keyScope{changed: make(chan struct{}, 1)} }

// keep says whether the scorer keeps the keys of partition p now.
func (s *keyScope) keep(p int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all || s.known && s.parts[p]
}

// owns says whether the instance owns partition p now (keep), and the generation of the
// assignment that says so, read together (detect.Stage.OwnPartitions).
func (s *keyScope) owns(p int32) (bool, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all || s.known && s.parts[p], s.gen
}

// set takes an assignment and returns the partitions it adds.
func (s *keyScope) set(a ingest.Assignment) (added []int32) {
	parts := a.Partitions
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.heard:
		s.heard, s.first, s.firstRun = true, a.Generation, s.known
		s.firstAt = make(map[int32]int64, len(a.Offsets))
		for i, off := range a.Offsets {
			if i < len(parts) && off >= 0 {
				s.firstAt[parts[i]] = off
			}
		}
	case a.Generation != s.gen+1:
		s.skipped = true
	}
	if s.known && a.Generation != s.gen+1 {
		s.offsetsAfterGap(a)
	}
	s.gen = a.Generation
	next := make(map[int32]bool, len(parts))
	for _, q := range parts {
		next[q] = true
		if !s.parts[q] {
			added = append(added, q)
		}
	}
	for q := range s.parts {
		if !next[q] {
			if s.left == nil {
				s.left = map[int32]bool{}
			}
			s.left[q] = true
		}
	}
	s.known, s.parts = true, next
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return added
}

// pending says an assignment came since the detect goroutine's last turn (stayed).
func (s *keyScope) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard
}

// offsetsAfterGap checks, at an assignment that does not follow this process's previous one,
// each partition's committed offset against the one this member had committed as it left it
// (via, broken). mu must be held.
func (s *keyScope) offsetsAfterGap(a ingest.Assignment) {
	if s.via == nil {
		s.via, s.broken = map[int32]int64{}, map[int32]bool{}
	}
	for i, p := range a.Partitions {
		if i < len(a.Offsets) && i < len(a.Own) && a.Own[i] >= 0 && a.Offsets[i] == a.Own[i] {
			if v, ok := s.via[p]; !ok || a.Own[i] < v {
				s.via[p] = a.Own[i]
			}
		} else {
			s.broken[p] = true
		}
	}
}

// stayed says which partitions were the instance's throughout since the consumer group
// generation from (the one of its last call, or restored with the alert groups from the alarm
// state; fromKnown false: none), and the generation they are of now: none unless the
// generations since followed one another from it (from + 1, + 2, ...: none missed, in which
// another member may have owned them; ingest.Assignment), and of those the partitions it
// keeps now that did not leave an assignment in between. Without an assignment since, those
// it keeps (from stands).
//
// A generation missed while running (no restart between) keeps a partition by the offsets
// instead: where the assignment after the gap finds the partition's committed offset where
// this member had committed it as it left it (ingest.Assignment.Own), no member committed a
// record of it in between, and where the groups took no record of it past that offset (taken:
// detect.Stage.AlertsTaken), every record whose effects they hold was written, acknowledged
// and committed here: the clean stop's case below, with the same bound (at most another
// member's extra alerts). Each gap since from must pass so; records taken and not committed
// (read again after the gap, an alert among them would fold into its own group) fail it.
//
// After a restart from must be the generation the alert groups saved were checked against: a
// crash leaves the group without a LeaveGroup, and the group's next generation (which drops
// the old member, whose session no one renews) may be the restarted instance's first, when
// nothing was another's in between; a stop leaves the group, whose next generation is one
// without this instance (another member's, or an empty one when it ran alone), so a clean
// restart keeps none by the generations.
//
// at (restored with the groups: detect.Stage.AlertsRestored; else nil) says where the groups
// stand on each partition, checked against the committed offsets of the first assignment since
// (and the generations after it following one another). Committed at a clean stop and still
// there: the groups stand for exactly the records below it, each one's output written, and no
// member committed a later record meanwhile: they stay whatever the generations (one that read
// some without committing them, crashed or its commit refused, wrote its alerts for them: read
// again here they fold into this instance's groups, whose alerts were written too; no page is
// lost, at most that member's extra alerts, as any re-read gives). Otherwise the generations
// decide, and only where the committed offset is at or past the one saved (or none was, no
// record of the partition taken): below it, the records read again include some whose effects
// the groups hold, saved before their outputs were written (a crash), and an alert among them
// would fold into its own group, never emitted.
func (s *keyScope) stayed(from int32, fromKnown bool, at *detect.AlertsAt, taken func(p int32) (int64, bool)) (gen int32, keep func(p int32) bool) {
	s.mu.Lock()
	left, heard, firstFollows := s.left, s.heard, fromKnown && s.first == from+1
	firstAt, later, via, broken, firstRun := s.firstAt, !s.skipped, s.via, s.broken, s.firstRun
	s.left, s.heard, s.skipped, s.firstAt, s.via, s.broken = nil, false, false, nil, nil, nil
	gen = s.gen
	s.mu.Unlock()
	if !heard { // (a signal of an assignment an earlier turn took)
		return from, s.keep
	}
	// byOffsets: at every gap checked (offsetsAfterGap) p's committed offset was where this
	// member had committed it, and the groups took no record of p past it (t: the offset after
	// the furthest; ok false: none taken).
	byOffsets := func(p int32, t int64, ok bool) bool {
		v, checked := via[p]
		return checked && !broken[p] && (!ok || t <= v)
	}
	stays := func(p int32) bool {
		if at == nil {
			if firstFollows && later {
				return true
			}
			// Running (firstRun), every gap since from was checked, the first one's too; at
			// the process's first assignment the link to from is the generations' alone.
			t, ok := taken(p)
			return (firstRun || firstFollows) && byOffsets(p, t, ok)
		}
		t, ok := at.Taken[p]
		if !ok {
			return firstFollows && later
		}
		c, got := firstAt[p]
		since := later || byOffsets(p, t, true) // (the gaps after the first assignment)
		return got && since && (at.Committed[p] && c == t || firstFollows && c >= t)
	}
	return gen, func(p int32) bool { return stays(p) && !left[p] && s.keep(p) }
}

// alertScope gives a role that flags without a scorer's keys (role all, a scorer under
// key_by: none) its partitions' scope, for its alert groups: a source that reports its
// assignment (a consumer group) makes changed signal at every rebalance; one that does not
// leaves the scope unknown, and no group is dropped.
func (p *Pipeline) alertScope() {
	if p.scope != nil || p.role == detect.RoleBuilder {
		return
	}
	if src, ok := p.src.(Assigning); ok {
		p.scope = newKeyScope()
		src.OnAssigned(func(a ingest.Assignment) { p.scope.set(a) })
	}
}
