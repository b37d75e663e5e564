package detect

import (
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
)

// TestBuilderVersionsFollowTheClock (sec26 item 2): a builder's model version is at least its
// clock in milliseconds at the build (and one above the previous), so that a version a reader
// took as within its bound of the clock (pipeline/modelversion.go: an hour) is passed by the
// builder's own within that bound, whatever it was. Before, versions counted up by one from
// the start's floor: a version an hour ahead stayed ahead of every build to come.
func TestBuilderVersionsFollowTheClock(t *testing.T) {
	cfg := testConfig()
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, Deps{Log: zerolog.Nop(), Role: RoleBuilder})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	d := testData(3000, 5)
	s.ContinueVersions(7) // (a floor below the clock: the topic's, from a builder of before)
	before := uint64(time.Now().UnixMilli())
	feed(t, s, mem, d, 0, cfg.MinRecords, 250)
	s.collect(true)
	if m := s.Model(); m == nil || m.Version < before {
		t.Fatalf("a builder's first model: %v, want a version at least the clock at its build (%d ms)", versionOf(m), before)
	}
	// A floor ahead of the clock: one above it (versions never go back).
	ahead := uint64(time.Now().Add(time.Minute).UnixMilli())
	s.ContinueVersions(ahead)
	s.ext.rebuildDue = true
	feed(t, s, mem, d, cfg.MinRecords, cfg.MinRecords+250, 250)
	s.collect(true)
	if m := s.Model(); m == nil || m.Version != ahead+1 {
		t.Fatalf("after a floor a minute ahead: %v, want version %d", versionOf(m), ahead+1)
	}
}

// versionOf is m's version ("no model" for nil).
func versionOf(m *Model) any {
	if m == nil {
		return "no model"
	}
	return m.Version
}
