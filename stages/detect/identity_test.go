package detect

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestSampledVerdictsFollowRecordIdentity: in a sampling mode, a record's verdict depends on
// the record (topic, partition, offset), not on which batch it arrives in or how many records
// the process scored before it: a redelivery after a crash, in other batches, gets the same
// verdict and eta-probability. (The stream index was a process-local count before.)
func TestSampledVerdictsFollowRecordIdentity(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Density.Mode, cfg.Density.Samples = "restricted", 60
	d := testData(4000, 31)
	s := newTestStage(t, cfg)
	feed(t, s, mem, d, 0, 1500, 250)
	if s.Model() == nil {
		t.Fatal("no model")
	}
	// First delivery: rows 2000..2600 in batches of 200.
	first := map[int]batch.Score{}
	for lo := 2000; lo < 2600; lo += 200 {
		for i, sc := range scoreWith(t, s, mem, d, lo, lo+200) {
			first[lo+i] = sc
		}
	}
	// Redelivery after other records were scored, with other boundaries (odd sizes, overlapping
	// the first delivery's batches).
	scoreWith(t, s, mem, d, 3000, 3500)
	differ, sampled := 0, 0
	for _, r := range [][2]int{{2000, 2137}, {2137, 2450}, {2450, 2600}} {
		for i, sc := range scoreWith(t, s, mem, d, r[0], r[1]) {
			want := first[r[0]+i]
			if sc.EtaProbability != want.EtaProbability || sc.DensityOutlier != want.DensityOutlier {
				differ++
			}
			if len(sc.Subspace) > 1 {
				sampled++ // a verdict reached in a sampled (multi-dimensional) subspace
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of 600 redelivered records got another density verdict", differ)
	}
	if sampled == 0 {
		t.Fatal("no record was decided in a sampled subspace: the test proves nothing")
	}
}
