package detect

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestProclusSubspacesInTheStage: with detect.proclus.enabled each model carries PROCLUS
// clusters of its window, every record is also tested against its nearest cluster, and a
// record ordinary in every feature but off the diagonal x1 = x2 is flagged (outside every
// cluster's sphere in the clusters' subspace {x1, x2}), naming the cluster, where the
// one-feature-at-a-time density test does not flag it. The clusters survive a snapshot.
func TestProclusSubspacesInTheStage(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Proclus = ProclusConfig{Enabled: true, K: 4, L: 2, Restarts: 3}
	cfg.Density.Samples = 400
	odd := map[int]bool{1234: true, 1777: true}
	d := diagonalData(2000, odd)
	s := newTestStage(t, cfg)
	feed(t, s, mem, d, 0, 1000, 250) // model 1 from rows 0..999
	m := s.Model()
	if m == nil || m.Subspaces == nil || len(m.Subspaces.Dims) != 4 {
		t.Fatalf("model %v: want 4 PROCLUS clusters", m)
	}
	// detect.proclus.restarts reaches the runs: the model keeps the first of lowest cost of 3.
	if rc := m.Subspaces.RestartCosts; len(rc) != 3 || slices.Index(rc, slices.Min(rc)) != m.Subspaces.Restart {
		t.Errorf("restart costs %v, kept restart %d: want the first lowest of 3", rc, m.Subspaces.Restart)
	}
	withSub, flagged := 0, map[int]string{}
	for lo := 1000; lo < 2000; lo += 250 {
		for i, sc := range scoreWith(t, s, mem, d, lo, lo+250) {
			if sc.SubspaceOf != "" {
				withSub++
				if !strings.Contains(sc.SubspaceOf, "PROCLUS cluster") || len(sc.Subspace) < 1 {
					t.Fatalf("row %d: subspace %v of %q", lo+i, sc.Subspace, sc.SubspaceOf)
				}
			}
			if sc.DensityOutlier {
				flagged[lo+i] = sc.SubspaceOf
			}
		}
	}
	for r := range odd {
		if of, ok := flagged[r]; !ok || of == "" {
			t.Errorf("row %d: density flag %v from %q; want flagged in a PROCLUS cluster's subspace", r, ok, of)
		}
	}
	if withSub == 0 || len(flagged) > 50 {
		t.Errorf("%d verdicts from cluster subspaces, %d of 1000 flagged", withSub, len(flagged))
	}
	// Without PROCLUS the odd rows are ordinary in each feature: not flagged by density.
	plain := cfg
	plain.Proclus.Enabled = false
	p := newTestStage(t, plain)
	feed(t, p, mem, d, 0, 1000, 250)
	for r := range odd {
		if sc := scoreWith(t, p, mem, d, r, r+1)[0]; sc.DensityOutlier {
			t.Errorf("row %d flagged by the density test without PROCLUS: the test proves nothing", r)
		}
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a, b := got.Subspaces, m.Subspaces
	if !reflect.DeepEqual(a.Dims, b.Dims) || !reflect.DeepEqual(a.Centers, b.Centers) || !reflect.DeepEqual(a.Radius, b.Radius) || !reflect.DeepEqual(a.Medoids, b.Medoids) {
		t.Errorf("PROCLUS clusters changed in the snapshot")
	}
}
