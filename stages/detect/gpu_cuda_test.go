//go:build cuda

package detect

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/accel"
)

// TestOverlapOnTheGPUScoresAsTheCPU: the stage on the GPU with host and device overlapped (as
// the pipeline runs it) gives the CPU stage's verdicts, scores, suppressions and significance
// marks, batch by batch (the kernels are bit-identical to their CPU twins; the overlap changes
// no order that matters).
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
	want, wantSig, _ := overlapRun(t, mem, cfg, data, Deps{Log: zerolog.Nop()})
	got, gotSig, lagged := overlapRun(t, mem, cfg, data, Deps{Log: zerolog.Nop(), Accelerator: d, Overlap: true})
	sameVerdicts(t, want, got, wantSig, gotSig)
	if lagged < len(want)-2 {
		t.Fatalf("%d of %d Process calls returned the batch before: not overlapped", lagged, len(want))
	}
	if d.Fallbacks() != 0 {
		t.Fatalf("%d steps fell back to the CPU: the GPU was not tested", d.Fallbacks())
	}
}
