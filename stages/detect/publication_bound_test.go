package detect

import (
	"bytes"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestPublicationBoundHoldsBuilds: a builder's publication (its model's snapshot and hypercube
// counts) of a full window fits PublicationBound, with every part that grows with the data on
// (PROCLUS's subspaces, the hypercube's cells, the members of many partitions), and the bound
// is a close one (within 2x: what a scorer may hold for one assembly is about the model itself).
func TestPublicationBoundHoldsBuilds(t *testing.T) {
	for _, window := range []int{1000, 3000} {
		cfg := testConfig()
		cfg.Window, cfg.MinRecords = window, window
		cfg.Hypercube.Enabled, cfg.Proclus.Enabled = true, true
		s := newTestStage(t, cfg)
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		d := testData(window, 3)
		feed(t, s, mem, d, 0, window, 250)
		s.collect(true)
		m := s.Model()
		if m == nil || m.Subspaces == nil || m.Ranker == nil {
			t.Fatalf("window %d: model %v, want one with subspaces and a ranker", window, m)
		}
		var buf bytes.Buffer
		if err := WriteSnapshot(&buf, m); err != nil {
			t.Fatal(err)
		}
		cube := s.PublishedHypercube()
		if cube == nil {
			t.Fatal("no hypercube counts")
		}
		got, bound := buf.Len()+len(cube), PublicationBound(s.features, &cfg)
		if got > bound || got < bound/2 {
			t.Errorf("window %d: a publication of a full window takes %d bytes (snapshot %d, hypercube %d), PublicationBound says %d: want a bound, and a close one",
				window, got, buf.Len(), len(cube), bound)
		}
		t.Logf("window %d, %d features: publication %d bytes, bound %d (%.2fx)", window, len(s.features), got, bound, float64(bound)/float64(got))
		mem.AssertSize(t, 0)
	}
}
