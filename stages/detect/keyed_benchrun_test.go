package detect

import (
	"runtime"
	"testing"
	"weak"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// TestKeyedBenchRunDropsItsBatches: the keyed benchmarks' timed loop (keyedBench.run) holds no
// batch it has passed through the stage. A processed batch keeps its scores (192 bytes a record:
// 3.8 MB a batch of 20,000) and payloads' headers, so a run that held them grew the live heap by
// about 4.3 MB a batch: 430 MB in a run of 100 batches, 17 GB in keyed_h100.sh's long run of
// 4,000, whose collections would then come ever less often than a pipeline's (the heap goal
// follows the live heap), and whose growth the scavenger gives back between runs
// (docs/BENCHMARKS.md §13.1.17). Nor does the overlapped stage hold the batches it returned:
// land left each landed batch's scoring (its batch and keys' scores: 7.7 MB at 20,000 records)
// in the spare room of its in-flight slice, until append reallocated it (the last 7 of 24 here).
func TestKeyedBenchRunDropsItsBatches(t *testing.T) {
	for _, overlap := range []int{0, OverlapOnGPU} {
		var a Accelerator
		if overlap > 0 {
			a = &fakeAccel{exact: true}
		}
		kb := newKeyedBench(t, Default(), 300, a, overlap)
		batches := kb.batches(t, 24, 500)
		ws := make([]weak.Pointer[batch.Batch], len(batches))
		for i, b := range batches {
			ws[i] = weak.Make(b)
		}
		kb.run(t, batches, overlap > 0)
		runtime.GC()
		for i, w := range ws {
			if w.Value() != nil {
				t.Errorf("overlap %d: batch %d of %d still reachable after the run", overlap, i, len(ws))
			}
		}
		runtime.KeepAlive(batches) // (the caller's slice lives on, as in the benchmarks)
		kb.s.Close()
	}
}
