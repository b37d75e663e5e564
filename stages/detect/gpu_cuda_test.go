//go:build cuda

package detect

import (
	"math"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
)

// TestOverlapOnTheGPUScoresAsTheCPU: the stage on the GPU with host and device overlapped (as
// the pipeline runs it) gives the verdicts, scores, suppressions and significance marks of the
// GPU stage one batch at a time, batch by batch, and those of the CPU stage (the kernels are
// bit-identical to their CPU twins).
func TestOverlapOnTheGPUScoresAsTheCPU(t *testing.T) {
	d, err := accel.Open("cuda", zerolog.Nop(), accel.Options{})
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	defer d.Close()
	if !d.IsGPU() {
		t.Skip("no GPU")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg, data := overlapConfig(), testData(6000, 11)
	// Overlap on the GPU against one batch at a time on the GPU: the overlap's own promise.
	sync, syncSig, _ := overlapRun(t, mem, cfg, data, Deps{Log: zerolog.Nop(), Accelerator: d})
	got, gotSig, lagged := overlapRun(t, mem, cfg, data, Deps{Log: zerolog.Nop(), Accelerator: d, Overlap: OverlapOnGPU})
	sameVerdicts(t, sync, got, syncSig, gotSig)
	if lagged < len(sync)-2*OverlapOnGPU {
		t.Fatalf("%d of %d Process calls returned the batches before only: not overlapped", lagged, len(sync))
	}
	// And against the CPU stage (the kernels' parity, end to end through the stage): every
	// field the same but the exact 1-D eta-probability, which CUDA's erfc (<= 5 ulp) may move by
	// a few ulp (gpukern's exactTolerance: <= 16 ulp per interval of the superlevel set; 64
	// intervals here are far more than a 20-cluster model's). On the H100 (2026-11-26, before
	// this tolerance) the comparison stopped at a record whose eta-probability differed by 1 ulp,
	// every other field equal.
	want, wantSig, _ := overlapRun(t, mem, cfg, data, Deps{Log: zerolog.Nop()})
	const etaTol = 16 * 64 * 0x1p-53
	for off, w := range want {
		for i := range w {
			if g := &got[off][i]; math.Abs(g.EtaProbability-w[i].EtaProbability) <= etaTol {
				g.EtaProbability = w[i].EtaProbability
			}
		}
	}
	sameVerdicts(t, want, got, wantSig, gotSig)
	if d.Fallbacks() != 0 {
		t.Fatalf("%d steps fell back to the CPU: the GPU was not tested", d.Fallbacks())
	}
}

// TestOverlapKeyedOnTheGPUAsSynchronous: TestOverlapKeyedAsSynchronous on the GPU (the keys'
// models in the device's store, the global model's calls on the device): with batches overlapped
// as the pipeline runs them, the keys' passes chained and the global model scoring the rows of
// keys without a model at each pass (deferred) or switching from every record while the fleet is
// cold, every record's scores are those of the stage one batch at a time on the same GPU.
func TestOverlapKeyedOnTheGPUAsSynchronous(t *testing.T) {
	d := openGPU(t)
	if !d.IsGPU() {
		t.Skip("no GPU")
	}
	defer func(v float64) { speculateShare = v }(speculateShare)
	for _, f := range []overlapFleet{{"within-max-keys", 20, 4000, 0, 100000}, {"growing-past-max-keys", 130, 16000, 100, 120}} {
		for _, g := range []struct {
			name  string
			share float64
		}{{"deferred", 2}, {"switching", 0.5}} {
			speculateShare = g.share
			t.Run(f.name+"/"+g.name, func(t *testing.T) {
				overlapKeyedAsSynchronous(t, f, false, func() (Accelerator, bool, *atomic.Int64) { return d, true, nil })
			})
		}
	}
}
