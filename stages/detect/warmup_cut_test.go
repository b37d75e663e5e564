package detect

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// TestWarmingKeptOutAcrossTheFirstBuildsCut: the batch that crosses detect.min_records is
// pushed to the window in two parts, the first model snapshotting the window between them
// (pushBatch's cut); the warming records of the second part are left out of the next
// references as the first part's are. Failed first: leaveOutWarming ran once, between the
// parts, and marked only the records already pushed (reference 950 of 1200, the 50 warming
// records after the cut in it; want 900).
func TestWarmingKeptOutAcrossTheFirstBuildsCut(t *testing.T) {
	cfg := Default()
	cfg.Window, cfg.MinRecords, cfg.Distance.N = 2000, 1000, 50
	features := []string{"a", "b", "c"}
	s := newWarmStage(t, cfg)
	r := rand.New(rand.NewPCG(26, 4))
	mem := memory.NewGoAllocator()
	for lo := 0; lo < 1200; lo += 600 { // (the second batch crosses min_records at its row 400)
		rs := warmRows(r, lo, 600, 4)
		b := withWarming(t, testbatch.New(t, mem, "in", features, false, false, rs), 2, 4)
		out, err := s.Process(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			o.Record.Release()
		}
	}
	if cols, _ := s.reference(); s.win.Len() != 1200 || len(cols[2]) != 900 {
		t.Fatalf("window %d records, reference %d; want 1200 and 900 (the 300 warming left out)", s.win.Len(), len(cols[2]))
	}
}
