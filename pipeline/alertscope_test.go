package pipeline

import (
	"testing"

	"github.com/outlierd/outlierd/stages/detect"
)

// assigningSource is a Source that reports its assignments (as ingest.Source does in a
// consumer group).
type assigningSource struct {
	*fakeSource
	on func([]int32)
}

func (s *assigningSource) OnAssigned(f func([]int32)) { s.on = f }

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
	src.on([]int32{0, 1})
	<-p.scope.changed
	keep := p.scope.stayed()
	if !keep(0) || !keep(1) || keep(2) || keep(-1) {
		t.Errorf("first assignment {0, 1}: keeps 0 %v, 1 %v, 2 %v, an unknown partition %v; want true, true, false, false", keep(0), keep(1), keep(2), keep(-1))
	}
	src.on([]int32{1})    // 0 moves away,
	src.on([]int32{0, 1}) // and back before the detect goroutine reads the signal
	<-p.scope.changed
	select {
	case <-p.scope.changed:
		t.Fatal("two signals for two rebalances: the channel holds one")
	default:
	}
	if keep := p.scope.stayed(); keep(0) || !keep(1) {
		t.Errorf("0 left and came back: stayed 0 %v, 1 %v; want false (another instance's meanwhile), true", keep(0), keep(1))
	}
	if keep := p.scope.stayed(); !keep(0) || !keep(1) {
		t.Errorf("read again: stayed 0 %v, 1 %v; want both", keep(0), keep(1))
	}
	b := &Pipeline{role: detect.RoleBuilder, src: &assigningSource{}}
	if b.alertScope(); b.scope != nil {
		t.Error("a builder follows an assignment for alert groups it has not")
	}
}
