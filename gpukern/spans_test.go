package gpukern_test

import (
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// TestSolvingSetKernelSpans: a SolvingSet iteration's kernels are timed as one span, ss_iteration
// (one "launch" an iteration in KernelTimes and the metrics), and with OUTLIERD_CUDA_PER_LAUNCH=1
// kernel by kernel instead (ss_dtoc and ss_candmerge once an iteration, no span); either way
// Counters' kernel time is the sum of KernelTimes', and ss_init, outside the iterations, keeps
// its own pair. The environment is read at Open, so each case opens device 0 anew.
func TestSolvingSetKernelSpans(t *testing.T) {
	cols := synth.G2D(20000, 31).Cols
	p := solvingset.Params{K: 10, N: 5, M: 50, Seed: 3}
	for _, perLaunch := range []string{"", "1"} {
		t.Run("OUTLIERD_CUDA_PER_LAUNCH="+perLaunch, func(t *testing.T) {
			t.Setenv("OUTLIERD_CUDA_SYNC", "") // (syncEach implies per-launch pairs)
			t.Setenv("OUTLIERD_CUDA_PER_LAUNCH", perLaunch)
			d := openDevice(t)
			before := d.KernelTimes()
			k0, _, _ := d.Counters()
			r, err := gpukern.SolvingSet(d, cols, gpuParams(p, len(cols[0])))
			if err != nil {
				t.Fatal(err)
			}
			k1, _, _ := d.Counters()
			launches := map[string]int64{}
			var sum int64
			for name, kt := range d.KernelTimes() {
				launches[name] = kt.Launches - before[name].Launches
				sum += int64(kt.Time - before[name].Time)
			}
			it := int64(r.Iterations)
			t.Logf("%d iterations; launches %v", it, launches)
			if it < 2 {
				t.Fatalf("%d iterations: the case is not made", it)
			}
			if int64(k1-k0) != sum || sum <= 0 {
				t.Errorf("Counters' kernel time %v, KernelTimes' sum %v: want equal and > 0", k1-k0, sum)
			}
			if launches["ss_init"] != 1 {
				t.Errorf("ss_init launched %d times, want 1 (outside the iterations)", launches["ss_init"])
			}
			if perLaunch == "" {
				if launches["ss_iteration"] != it || launches["ss_dtoc"] != 0 || launches["ss_candmerge_q64"] != 0 {
					t.Errorf("spans: ss_iteration %d, ss_dtoc %d, ss_candmerge_q64 %d; want %d, 0, 0", launches["ss_iteration"], launches["ss_dtoc"], launches["ss_candmerge_q64"], it)
				}
				return
			}
			if launches["ss_iteration"] != 0 || launches["ss_dtoc"] != it || launches["ss_candmerge_q64"] != it {
				t.Errorf("per launch: ss_iteration %d, ss_dtoc %d, ss_candmerge_q64 %d; want 0, %d, %d", launches["ss_iteration"], launches["ss_dtoc"], launches["ss_candmerge_q64"], it, it)
			}
		})
	}
}
