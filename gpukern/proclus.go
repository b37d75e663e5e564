package gpukern

import "fmt"

// ProclusMaxCounters bounds k*(dims+1), the per-block counters of the PROCLUS kernels (8 bytes
// each in shared memory, within the 48 KiB a block gets without opting in).
const ProclusMaxCounters = 6144

// ProclusData is a data set resident on the device for the O(rows) passes of GPU-FAST-PROCLUS:
// the columns, uploaded once, and its own run state (an embedded ProclusRun, whose methods are
// the passes), which stays allocated between runs, as the paper's several (k, l) settings and the
// restarts reuse it. NewRun adds run states over the same columns, so that several runs (the
// restarts) proceed at once without another upload. NewRun, RunStates and Free are not safe for
// concurrent use (the run states' passes are); Free returns the memory.
type ProclusData struct {
	dev        *Device
	rows, dims int
	x          uintptr // the columns (device address; uintptr so that this file builds without cuda)
	*ProclusRun
	runs []*ProclusRun // every run state over x, for Free
}

// ProclusRun is one run's device state over a ProclusData's columns: the FAST distance cache (one
// row of rows float32 per candidate medoid, grown to the largest slot count begun so far), the
// current and best assignments, the fixed-point scales and the launch parameters and counters.
// Its methods are the passes of the CPU engine's interface (internal/algo/proclus.Engine, whose
// documentation they follow; internal/accel adapts them and keeps the control flow on the host).
// One run at a time per ProclusRun; distinct ProclusRuns of one data set may be used
// concurrently (the device serialises their calls, and each has its own buffers).
type ProclusRun struct {
	pd                               *ProclusData
	dist, cur, best, scale, par, out uintptr
	distSlots                        int
}

// ProclusRunBytes is the device memory of one run state with slots candidate medoids over rows
// rows (ProclusData.NewRun, then Begin): the distance cache, two assignments, the launch
// parameters and the counters (the scales, 8 bytes a dimension, aside).
func ProclusRunBytes(rows, slots int) int64 {
	return int64(rows)*(4*int64(slots)+8) + pcParamBytes + ProclusMaxCounters*8
}

// pcParamBytes is the parameter buffer of one launch: at most ProclusMaxCounters pairs of
// (float64 centre + int64 dimension) plus the medoid coordinates, offsets and radii.
const pcParamBytes = 256 << 10

// ProclusQuery is one medoid's locality change for ProclusRun.Locality, field for field
// proclus.Query: the medoid's distance-cache slot, whether the slot is not computed yet, the
// medoid's coordinates, and the band Lo < squared distance <= Hi (Lo = -1: from the medoid).
type ProclusQuery struct {
	Slot   int
	Fresh  bool
	Medoid []float32
	Lo, Hi float32
}

// ProclusFits reports why the kernels cannot run PROCLUS with k clusters on dims dimensions (nil
// when they can): k*(dims+1) counters must fit in a block's shared memory.
func ProclusFits(k, dims int) error {
	if k*(dims+1) > ProclusMaxCounters {
		return fmt.Errorf("k*(dims+1) = %d, the GPU kernels take at most %d", k*(dims+1), ProclusMaxCounters)
	}
	return nil
}

// Rows is the number of rows of the resident data.
func (pd *ProclusData) Rows() int { return pd.rows }

// Dims is the number of dimensions of the resident data.
func (pd *ProclusData) Dims() int { return pd.dims }
