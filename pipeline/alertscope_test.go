package pipeline

import (
	"testing"

	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// assigningSource is a Source that reports its assignments (as ingest.Source does in a
// consumer group).
type assigningSource struct {
	*fakeSource
	on func(ingest.Assignment)
}

func (s *assigningSource) OnAssigned(f func(ingest.Assignment)) { s.on = f }

// TestAlertScopeAtRebalance: every role that flags follows its source's assignment for its
// alert groups (role all here: before, only a scorer under key_by: key did, for its keys), and
// a partition that left and came back between two of the detect goroutine's reads (one signal
// for both rebalances) counts as moved away: another instance owned it meanwhile, so its
// groups go (detect.Stage.DropAlertsOutside). Read again, it is kept. A builder, which flags
// nothing, follows no assignment.
func TestAlertScopeAtRebalance(t *testing.T) {
	src := &assigningSource{}
	p := &Pipeline{role: detect.RoleAll, src: src}
	p.alertScope()
	if p.scope == nil || src.on == nil {
		t.Fatal("role all: no scope for the alert groups, or the source's assignment not followed")
	}
	src.on(ingest.Assignment{Generation: 5, Partitions: []int32{0, 1}})
	<-p.scope.changed
	gen, keep := p.scope.stayed(4, true, nil, noneTaken)
	if gen != 5 || !keep(0) || !keep(1) || keep(2) || keep(-1) {
		t.Errorf("first assignment {0, 1} after generation 4: generation %d, keeps 0 %v, 1 %v, 2 %v, an unknown partition %v; want 5, true, true, false, false",
			gen, keep(0), keep(1), keep(2), keep(-1))
	}
	src.on(ingest.Assignment{Generation: 6, Partitions: []int32{1}})    // 0 moves away,
	src.on(ingest.Assignment{Generation: 7, Partitions: []int32{0, 1}}) // and back before the detect goroutine reads the signal
	<-p.scope.changed
	select {
	case <-p.scope.changed:
		t.Fatal("two signals for two rebalances: the channel holds one")
	default:
	}
	if gen, keep := p.scope.stayed(5, true, nil, noneTaken); gen != 7 || keep(0) || !keep(1) {
		t.Errorf("0 left and came back: generation %d, stayed 0 %v, 1 %v; want 7, false (another instance's meanwhile), true", gen, keep(0), keep(1))
	}
	if gen, keep := p.scope.stayed(7, true, nil, noneTaken); gen != 7 || !keep(0) || !keep(1) {
		t.Errorf("read again: generation %d, stayed 0 %v, 1 %v; want 7, both", gen, keep(0), keep(1))
	}
	b := &Pipeline{role: detect.RoleBuilder, src: &assigningSource{}}
	if b.alertScope(); b.scope != nil {
		t.Error("a builder follows an assignment for alert groups it has not")
	}
}

// TestAlertScopeMissedGeneration: a partition is the instance's throughout only while its
// assignments' generations follow one another (ingest.Assignment): with one missed between two
// of them (its session expired and the group went on without it, or it restarted while others
// ran: another member may have owned the partition and alerted for its keys), no partition
// stayed, though the assignments name the same ones (their committed offsets not known here:
// TestAlertScopeMissedGenerationOffsets keeps them by those); after a restart, the first assignment
// follows the generation saved with the alert groups or none stayed (none saved: a state of
// format 3 or before). Before, only the partitions were compared: all stayed.
func TestAlertScopeMissedGeneration(t *testing.T) {
	both := []int32{0, 1}
	for _, c := range []struct {
		name      string
		from      int32
		fromKnown bool
		gens      []int32 // the assignments heard between two turns, each of partitions 0 and 1
		stays     bool
	}{
		{"the next generation", 7, true, []int32{8}, true},
		{"the next two", 7, true, []int32{8, 9}, true},
		{"one missed", 7, true, []int32{9}, false},
		{"one missed after the next", 7, true, []int32{8, 10}, false},
		{"a lower one (the group made again)", 7, true, []int32{3}, false},
		{"after a restart, the generation after the one saved", 20, true, []int32{21}, true},
		{"after a restart, one missed (the stop left the group)", 20, true, []int32{22}, false},
		{"after a restart, none saved", 0, false, []int32{1}, false},
	} {
		s := newKeyScope()
		for _, g := range c.gens {
			s.set(ingest.Assignment{Generation: g, Partitions: both})
		}
		gen, keep := s.stayed(c.from, c.fromKnown, nil, noneTaken)
		if last := c.gens[len(c.gens)-1]; gen != last || keep(0) != c.stays || keep(1) != c.stays || keep(2) {
			t.Errorf("%s: generation %d, stayed 0 %v, 1 %v, 2 %v; want %d, %v, %v, false", c.name, gen, keep(0), keep(1), keep(2), last, c.stays, c.stays)
		}
	}
}

// TestAlertScopeCommittedOffsets: after a clean stop's restart (the groups saved with the
// committed offsets they stand for: alarm state format 4), a partition stays whatever the
// generations when the first assignment finds its committed offset unmoved; not when it moved
// (another member committed records of it), when none was saved for it or none is committed,
// when it left an assignment since, or when a later assignment missed a generation (another
// member may have committed it then).
func TestAlertScopeCommittedOffsets(t *testing.T) {
	saved := &detect.AlertsAt{Taken: map[int32]int64{0: 100, 1: 200}, Committed: map[int32]bool{0: true, 1: true}}
	for _, c := range []struct {
		name   string
		as     []ingest.Assignment
		stays0 bool
		stays1 bool
	}{
		{"unmoved, a generation missed", []ingest.Assignment{{Generation: 22, Partitions: []int32{0, 1}, Offsets: []int64{100, 200}}}, true, true},
		{"1 moved", []ingest.Assignment{{Generation: 22, Partitions: []int32{0, 1}, Offsets: []int64{100, 205}}}, true, false},
		{"none committed for 0", []ingest.Assignment{{Generation: 22, Partitions: []int32{0, 1}, Offsets: []int64{-2, 200}}}, false, true},
		{"0 only", []ingest.Assignment{{Generation: 22, Partitions: []int32{0}, Offsets: []int64{100}}}, true, false},
		{"0 left and back", []ingest.Assignment{
			{Generation: 22, Partitions: []int32{0, 1}, Offsets: []int64{100, 200}},
			{Generation: 23, Partitions: []int32{1}, Offsets: []int64{200}},
			{Generation: 24, Partitions: []int32{0, 1}, Offsets: []int64{100, 200}}}, false, true},
		{"a later generation missed", []ingest.Assignment{
			{Generation: 22, Partitions: []int32{0, 1}, Offsets: []int64{100, 200}},
			{Generation: 24, Partitions: []int32{0, 1}, Offsets: []int64{100, 200}}}, false, false},
	} {
		s := newKeyScope()
		for _, a := range c.as {
			s.set(a)
		}
		if _, keep := s.stayed(20, true, saved, noneTaken); keep(0) != c.stays0 || keep(1) != c.stays1 || keep(2) {
			t.Errorf("%s: stayed 0 %v, 1 %v, 2 %v; want %v, %v, false", c.name, keep(0), keep(1), keep(2), c.stays0, c.stays1)
		}
		// The offsets are for the first turn after the restore only: the next one, without them,
		// keeps by the generations alone.
		s.set(ingest.Assignment{Generation: 30, Partitions: []int32{0, 1}, Offsets: []int64{100, 200}})
		if _, keep := s.stayed(28, true, nil, noneTaken); keep(0) || keep(1) {
			t.Errorf("%s: a later turn without committed offsets kept a partition after a missed generation", c.name)
		}
	}
}

// noneTaken is a stage whose alert groups took no record (detect.Stage.AlertsTaken).
func noneTaken(int32) (int64, bool) { return 0, false }

// TestAlertScopeMissedGenerationOffsets: running, a partition stays at a missed generation
// when the next assignment's committed offset is the one this member had committed as it left
// it (ingest.Assignment.Own: no member committed a record of it in between) and the groups
// took no record of it past that offset (all of theirs committed); not when another member
// committed (the offset moved), when this member had committed none, when the groups took a
// record past it (not committed: read again, an alert among them would fold into its own
// group), or when a later gap fails. At the process's first assignment (a restart) the link to
// the saved generation is the generations' alone: an offsets' check of a later gap does not
// stand for it. Before, every gap dropped every partition.
func TestAlertScopeMissedGenerationOffsets(t *testing.T) {
	both := []int32{0, 1}
	first := ingest.Assignment{Generation: 7, Partitions: both, Offsets: []int64{10, 20}}
	taken := func(m map[int32]int64) func(int32) (int64, bool) {
		return func(p int32) (int64, bool) { off, ok := m[p]; return off, ok }
	}
	for _, c := range []struct {
		name           string
		as             []ingest.Assignment
		taken          map[int32]int64
		stays0, stays1 bool
	}{
		{"unmoved, all taken committed; 1 moved", []ingest.Assignment{{Generation: 9, Partitions: both, Offsets: []int64{50, 60}, Own: []int64{50, 55}}},
			map[int32]int64{0: 50, 1: 55}, true, false},
		{"a record taken past the commit", []ingest.Assignment{{Generation: 9, Partitions: both, Offsets: []int64{50, 60}, Own: []int64{50, 60}}},
			map[int32]int64{0: 51, 1: 60}, false, true},
		{"none taken; none committed of 1", []ingest.Assignment{{Generation: 9, Partitions: both, Offsets: []int64{50, -1}, Own: []int64{50, -1}}},
			nil, true, false},
		{"then the next generation", []ingest.Assignment{
			{Generation: 9, Partitions: both, Offsets: []int64{50, 60}, Own: []int64{50, 60}},
			{Generation: 10, Partitions: both, Offsets: []int64{52, 60}, Own: []int64{52, 60}}},
			map[int32]int64{0: 50, 1: 60}, true, true},
		{"a second gap, 0 moved in it", []ingest.Assignment{
			{Generation: 9, Partitions: both, Offsets: []int64{50, 60}, Own: []int64{50, 60}},
			{Generation: 12, Partitions: both, Offsets: []int64{70, 60}, Own: []int64{52, 60}}},
			map[int32]int64{0: 50, 1: 60}, false, true},
		{"no own offsets (an assignment without them)", []ingest.Assignment{{Generation: 9, Partitions: both, Offsets: []int64{50, 60}}},
			map[int32]int64{0: 50, 1: 60}, false, false},
	} {
		s := newKeyScope()
		s.set(first)
		if _, keep := s.stayed(6, true, nil, noneTaken); !keep(0) || !keep(1) {
			t.Fatalf("%s: setup: the first assignment after generation 6 kept 0 %v, 1 %v", c.name, keep(0), keep(1))
		}
		for _, a := range c.as {
			s.set(a)
		}
		if _, keep := s.stayed(7, true, nil, taken(c.taken)); keep(0) != c.stays0 || keep(1) != c.stays1 {
			t.Errorf("%s: stayed 0 %v, 1 %v; want %v, %v", c.name, keep(0), keep(1), c.stays0, c.stays1)
		}
	}
	// A restart: the process's first assignment misses the saved generation (or none was saved);
	// a later gap's offsets unmoved do not make up for it.
	for _, fromKnown := range []bool{true, false} {
		s := newKeyScope()
		s.set(ingest.Assignment{Generation: 22, Partitions: both, Offsets: []int64{50, 60}})
		s.set(ingest.Assignment{Generation: 24, Partitions: both, Offsets: []int64{50, 60}, Own: []int64{50, 60}})
		if _, keep := s.stayed(20, fromKnown, nil, noneTaken); keep(0) || keep(1) {
			t.Errorf("restart (saved generation known %v) missing it, then a gap with the offsets unmoved: stayed 0 %v, 1 %v; want neither", fromKnown, keep(0), keep(1))
		}
	}
	// After a clean stop's restart (the offsets saved, committed): a gap after the first
	// assignment with the offsets unmoved keeps them; moved, not.
	saved := &detect.AlertsAt{Taken: map[int32]int64{0: 100, 1: 200}, Committed: map[int32]bool{0: true, 1: true}}
	s := newKeyScope()
	s.set(ingest.Assignment{Generation: 22, Partitions: both, Offsets: []int64{100, 200}})
	s.set(ingest.Assignment{Generation: 24, Partitions: both, Offsets: []int64{100, 230}, Own: []int64{100, 200}})
	if _, keep := s.stayed(20, true, saved, noneTaken); !keep(0) || keep(1) {
		t.Errorf("clean restart, then a gap (0 unmoved, 1 moved): stayed 0 %v, 1 %v; want true, false", keep(0), keep(1))
	}
}
