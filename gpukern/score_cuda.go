//go:build cuda

package gpukern

import (
	"errors"
	"unsafe"

	"gorgonia.org/cu"
)

// score runs Score's steps: one packed upload on the default stream, each step's kernel on its own
// step stream (blocking streams: they start after the upload and run side by side), then one
// download on the default stream, which waits for all of them.
func (d *Device) score(s *Scoring, dens densityRequest) error {
	var res densityResult
	withDensity := s.Density != nil && dens.obj.n > 0
	if withDensity {
		res = newDensityResult(dens.obj.n)
	}
	// The results, in one device buffer: the density results (newDensityResult's layout), then
	// each k-NN step's weights.
	words := len(res.back)
	knnAt := make([]int, len(s.KNN))
	for i, st := range s.KNN {
		knnAt[i] = words
		words += len(st.Out)
	}
	if words == 0 {
		return nil
	}
	host := make([]uint64, words)
	err := d.do(func() (err error) {
		var pk pack
		pk.reset(d.packBuf)
		defer func() { d.packBuf = pk.buf[:0] }()
		var din densityInputs
		if withDensity {
			din = packDensity(&pk, s.Density.Model, dens.obj, s.Density.Params, dens.lo, dens.hi, dens.off)
		}
		qAt := make([]int64, len(s.KNN))
		for i, st := range s.KNN {
			qAt[i] = pk.addCols(st.Q, len(st.Out))
		}
		base, err := pk.upload(d, scratchScoreIn, "scoring inputs")
		if err != nil {
			return err
		}
		outp, err := d.scratch(scratchScoreOut, "scoring results", int64(words)*8)
		if err != nil {
			return err
		}
		stream := 0
		if withDensity {
			mb, release, derr := d.densityModelOn(s.Density.Model, dens.bounds)
			if derr != nil {
				return derr
			}
			defer func() { err = errors.Join(err, release()) }()
			if err := d.launchDensity(d.stepStreams[stream], s.Density.Model, mb, dens.obj, s.Density.Params, dens.bounds, din.at(base), outp); err != nil {
				return err
			}
			stream++
		}
		for i, st := range s.KNN {
			nq := len(st.Out)
			if nq == 0 {
				continue
			}
			qp := base + cu.DevicePtr(qAt[i])
			op := outp + cu.DevicePtr(knnAt[i]*8)
			if err := d.launchKNNAny(d.stepStreams[stream], cu.DevicePtr(st.S.ptr), st.S.rows, qp, nq, st.S.dims, st.K, scratchScorePartial+scratchSlot(stream), op); err != nil {
				return err
			}
			stream++
		}
		return download(d, "scoring results", host, outp)
	})
	if err != nil {
		return err
	}
	if withDensity {
		copy(res.back, host[:len(res.back)])
		res.verdicts(s.Density.Out, nil)
	}
	for i, st := range s.KNN {
		w := host[knnAt[i] : knnAt[i]+len(st.Out)]
		copy(st.Out, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(w))), len(w)))
	}
	return nil
}
