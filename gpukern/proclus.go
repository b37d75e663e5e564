package gpukern

import (
	"fmt"

	"github.com/outlierd/outlierd/internal/algo/proclus"
)

// ProclusMaxCounters bounds k*(dims+1), the per-block counters of the PROCLUS kernels (8 bytes
// each in shared memory, within the 48 KiB a block gets without opting in).
const ProclusMaxCounters = 6144

// ProclusData is a data set resident on the device for GPU-FAST-PROCLUS runs: the columns, the
// FAST distance cache (one row of rows float32 per candidate medoid, grown to the largest B*K
// run so far) and the assignments stay allocated between runs, as the paper's several (k, l)
// settings reuse them. It keeps a reference to the host columns (the sample, the greedy pick
// and the medoid coordinates are read on the host), checked and scanned once at upload. It is
// the proclus.Engine of its runs. Not safe for concurrent use; Free returns
// the memory.
type ProclusData struct {
	dev        *Device
	data       *proclus.Data // the host columns, checked, with their fixed-point scales
	rows, dims int
	// device addresses (uintptr so that this file builds without cuda)
	x, dist, cur, best, scale, par, out uintptr
	distSlots                           int
}

// ProclusFits reports why the kernels cannot run PROCLUS on rows x dims with p (nil when they
// can): k*(dims+1) counters must fit in shared memory, and rows in an int32 assignment.
func ProclusFits(rows, dims int, p proclus.Params) error {
	if p.K*(dims+1) > ProclusMaxCounters {
		return fmt.Errorf("k*(dims+1) = %d, the GPU kernels take at most %d", p.K*(dims+1), ProclusMaxCounters)
	}
	return nil
}

// Proclus runs GPU-FAST-PROCLUS on d over column-major host data (cols[j][i], finite): upload,
// run, free. The result equals proclus.Run's for the same p exactly (same medoids, dimensions,
// assignment, cost): the kernels compute the CPU engine's integers and share its control flow.
// Device memory: about rows*(4*dims + 4*min(B*K, A*K, rows) + 8) bytes.
func Proclus(d *Device, cols [][]float32, p proclus.Params) (*proclus.Result, error) {
	pd, err := d.UploadProclus(cols)
	if err != nil {
		return nil, err
	}
	res, err := pd.Run(p)
	if ferr := pd.Free(); err == nil && ferr != nil {
		return nil, ferr
	}
	return res, err
}

// Run runs GPU-FAST-PROCLUS with p on the resident data (see Proclus).
func (pd *ProclusData) Run(p proclus.Params) (*proclus.Result, error) {
	if pd == nil || pd.x == 0 {
		return nil, fmt.Errorf("gpukern.Proclus: %w: the data is not on the device (freed?)", errShape)
	}
	if err := p.Validate(pd.rows, pd.dims); err != nil {
		return nil, fmt.Errorf("gpukern.Proclus: %w", err)
	}
	if err := ProclusFits(pd.rows, pd.dims, p); err != nil {
		return nil, fmt.Errorf("gpukern.Proclus: %w", err)
	}
	res, err := pd.data.Run(p, pd)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Proclus: %w", err)
	}
	return res, nil
}

// Rows is the number of rows of the resident data.
func (pd *ProclusData) Rows() int { return pd.rows }
