package detect

import (
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestRestartKeepsBlindMarks: a graceful restart puts back which of the window's significant
// records were marked by a model blind to a cyclic pair (cycles_rejudge.go), so that the first
// model able to read the pair after the restart re-judges them as the uninterrupted run would.
// Before, the window file held no blind mark: a record marked blind before the stop kept its
// significance mark for good (never re-judged), and the afternoon of a daily cycle stopped
// during its first day was flagged again on the second (§12.77's defect, back after a restart).
func TestRestartKeepsBlindMarks(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	cfg.FlagBy = FlagBySignificance
	deps := Deps{Log: zerolog.Nop(), Cycles: []Cycle{{Sin: "x1", Cos: "x2", Period: 24 * time.Hour}}}
	a, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, deps)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, a, mem, d, 0, 1500, 100)
	if a.recs.blind == nil {
		t.Fatal("setup: a stage with a cyclic pair keeps no blind marks")
	}
	for _, i := range []uint64{100, 700, 1400} {
		a.recs.setSignificant(i)
		a.recs.setBlind(i)
	}
	n := a.win.Len()
	want := a.recs.marks(a.recs.blind, n)
	a.Close()

	b, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.win.Len() != n {
		t.Fatalf("setup: the restored window holds %d records, the stop's %d", b.win.Len(), n)
	}
	if got := b.recs.marks(b.recs.blind, n); !slices.Equal(got, want) {
		t.Errorf("the restored window's blind marks differ from the stop's (%d marked, want %d)", count(got), count(want))
	}
}

// TestBlindMarksAfterTheRejudgeJudged: the blind marks made after the re-judgement (the records
// the blind model scored while the first model able to read the pair was being built, or were
// in flight) are judged too, at the next reference, by that model's window, not kept for
// good. Before, the re-judgement ran only while the serving model left a pair unread: once the
// reading model served, the marks its build's wait left stayed (3 of 3 here).
func TestBlindMarksAfterTheRejudgeJudged(t *testing.T) {
	mem, d, cfg := restartSetup(t, 2000)
	cfg.StateDir = ""
	cfg.FlagBy = FlagBySignificance
	deps := Deps{Log: zerolog.Nop(), Cycles: []Cycle{{Sin: "x1", Cos: "x2", Period: 24 * time.Hour}}}
	s, err := NewStage(cfg, []string{"x1", "x2", "x3"}, true, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feed(t, s, mem, d, 0, 1500, 100)
	s.collect(true)
	if s.model == nil {
		t.Fatal("setup: no model after 1,500 records")
	}
	// Event times a minute apart: the window's 1,500 records span 25 h, a day's pair is read.
	c := uint64(len(s.recs.times))
	for i := s.recs.pushed - uint64(s.win.Len()); i < s.recs.pushed; i++ {
		s.recs.times[i%c] = int64(i) * 60_000
	}
	reads := *s.model
	reads.WindowSpan = s.recs.span()
	if s.unreadCycles(&reads) != nil {
		t.Fatalf("setup: a model of the window's span %s leaves the day unread", reads.WindowSpan)
	}
	s.model = &reads // the reading model serves; the marks below were made before its install
	marked := []uint64{1450, 1460, 1470}
	for _, i := range marked {
		s.recs.setSignificant(i)
		s.recs.setBlind(i)
	}
	s.reference()
	for _, i := range marked {
		if s.recs.blind[i%c] {
			t.Errorf("record %d's blind mark was not judged at the reference after the reading model's install", i)
		}
	}
}
