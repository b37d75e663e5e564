package accel

import (
	"errors"
	"fmt"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/proclus"
)

// ProclusConcurrentRuns is how many restarts RunProclus runs at once on one device (each with its
// own run state over the one uploaded data set, memory permitting: gpukern.ProclusData.RunStates).
// The device serialises their calls, so this overlaps one restart's host control flow and
// transfers with another's kernels rather than running kernels side by side (each pass's grid
// already fills the device at a million rows); docs/BENCHMARKS.md §6.1 measures 1 against 4.
const ProclusConcurrentRuns = 4

// ProclusEngine is pr as a proclus.Engine: GPU-FAST-PROCLUS runs the O(rows) passes on the
// device and keeps the control flow on the host (proclus.Data.Run, shared with the CPU engine);
// the sums are int64 fixed point, so the result equals the CPU's exactly.
func ProclusEngine(pr *gpukern.ProclusRun) proclus.Engine { return proclusEngine{pr} }

type proclusEngine struct{ *gpukern.ProclusRun }

// Locality passes the queries on in gpukern's type (the same fields).
func (e proclusEngine) Locality(qs []proclus.Query, sums, counts []int64) error {
	gq := make([]gpukern.ProclusQuery, len(qs))
	for i, q := range qs {
		gq[i] = gpukern.ProclusQuery(q)
	}
	return e.ProclusRun.Locality(gq, sums, counts)
}

// RunProclus runs GPU-FAST-PROCLUS with p (p.Restarts restarts, ProclusConcurrentRuns at a time)
// on data resident as pd (data is proclus.Prepare of the same columns): the result equals
// proclus.Run's for the same p.
func RunProclus(pd *gpukern.ProclusData, data *proclus.Data, p proclus.Params) (*proclus.Result, error) {
	return RunProclusWith(pd, data, p, ProclusConcurrentRuns)
}

// RunProclusWith is RunProclus with at most concurrent restarts at once (>= 1).
func RunProclusWith(pd *gpukern.ProclusData, data *proclus.Data, p proclus.Params, concurrent int) (*proclus.Result, error) {
	if pd == nil || data == nil {
		return nil, errors.New("accel.RunProclus: the data is not on the device")
	}
	if data.Rows() != pd.Rows() {
		return nil, fmt.Errorf("accel.RunProclus: %d host rows, %d on the device", data.Rows(), pd.Rows())
	}
	if err := p.Validate(pd.Rows(), pd.Dims()); err != nil {
		return nil, fmt.Errorf("accel.RunProclus: %w", err)
	}
	if err := gpukern.ProclusFits(p.K, pd.Dims()); err != nil {
		return nil, fmt.Errorf("accel.RunProclus: %w", err)
	}
	slots := min(p.B*p.K, p.A*p.K, pd.Rows())
	states, err := pd.RunStates(max(1, min(concurrent, p.Restarts)), slots)
	if err != nil {
		return nil, fmt.Errorf("accel.RunProclus: %w", err)
	}
	engines := make([]proclus.Engine, len(states))
	for i, s := range states {
		engines[i] = ProclusEngine(s)
	}
	return data.Run(p, engines...)
}

// GPUProclus is proclus.Run with the passes on g: check the data, upload once, run the restarts,
// free. Device memory: rows*4*dims bytes for the columns, plus about
// rows*(4*min(B*K, A*K, rows) + 8) bytes per restart running at once.
func GPUProclus(g *gpukern.Device, cols [][]float32, p proclus.Params) (*proclus.Result, error) {
	data, err := proclus.Prepare(cols)
	if err != nil {
		return nil, err
	}
	pd, err := g.UploadProclus(cols)
	if err != nil {
		return nil, err
	}
	res, err := RunProclus(pd, data, p)
	if ferr := pd.Free(); err == nil && ferr != nil {
		return nil, ferr
	}
	return res, err
}
