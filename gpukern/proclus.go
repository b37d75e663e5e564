package gpukern

import "fmt"

// ProclusMaxCounters bounds k*(dims+1), the per-block counters of the PROCLUS kernels (8 bytes
// each in shared memory, within the 48 KiB a block gets without opting in).
const ProclusMaxCounters = 6144

// ProclusData is a data set resident on the device for the O(rows) passes of GPU-FAST-PROCLUS:
// the columns, the FAST distance cache (one row of rows float32 per candidate medoid, grown to the
// largest slot count begun so far) and the assignments stay allocated between runs, as the
// paper's several (k, l) settings reuse them. Its methods are the passes of the CPU engine's
// interface (internal/algo/proclus.Engine, whose documentation they follow; internal/accel adapts
// them and keeps the control flow on the host). Not safe for concurrent use; Free returns the
// memory.
type ProclusData struct {
	dev        *Device
	rows, dims int
	// device addresses (uintptr so that this file builds without cuda)
	x, dist, cur, best, scale, par, out uintptr
	distSlots                           int
}

// ProclusQuery is one medoid's locality change for ProclusData.Locality, field for field
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
