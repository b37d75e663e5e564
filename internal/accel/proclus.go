package accel

import (
	"errors"
	"fmt"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/proclus"
)

// ProclusEngine is pd as a proclus.Engine: GPU-FAST-PROCLUS runs the O(rows) passes on the
// device and keeps the control flow on the host (proclus.Data.Run, shared with the CPU engine);
// the sums are int64 fixed point, so the result equals the CPU's exactly.
func ProclusEngine(pd *gpukern.ProclusData) proclus.Engine { return proclusEngine{pd} }

type proclusEngine struct{ *gpukern.ProclusData }

// Locality passes the queries on in gpukern's type (the same fields).
func (e proclusEngine) Locality(qs []proclus.Query, sums, counts []int64) error {
	gq := make([]gpukern.ProclusQuery, len(qs))
	for i, q := range qs {
		gq[i] = gpukern.ProclusQuery(q)
	}
	return e.ProclusData.Locality(gq, sums, counts)
}

// RunProclus runs GPU-FAST-PROCLUS with p on data resident as pd (data is proclus.Prepare of
// the same columns): the result equals proclus.Run's for the same p.
func RunProclus(pd *gpukern.ProclusData, data *proclus.Data, p proclus.Params) (*proclus.Result, error) {
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
	return data.Run(p, ProclusEngine(pd))
}

// GPUProclus is proclus.Run with the passes on g: check the data, upload, run, free. Device
// memory: about rows*(4*dims + 4*min(B*K, A*K, rows) + 8) bytes.
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
