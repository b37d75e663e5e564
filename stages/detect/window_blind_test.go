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
