//go:build cuda

package gpukern

import (
	"errors"
	"unsafe"

	"gorgonia.org/cu"
)

// run is the one streaming call that Score, DetectRecords, DetectClusters and KNNWeightsOn make:
// one packed upload on the default stream into a kept buffer, each step's kernel on its own step
// stream (blocking streams: they start after the upload and run side by side), then one
// download on the default stream, which waits for all of them. It returns the density step's
// results (zero without one) and writes each k-NN step's weights.
func (d *Device) run(dens *densityJob, knn []KNNStep) (densityResult, error) {
	var res densityResult
	withDensity := dens != nil && dens.rq.obj.n > 0
	if withDensity {
		res = newDensityResult(dens.rq.obj.n)
	}
	// The results, in one device buffer: the density results (newDensityResult's layout), then
	// each k-NN step's weights.
	words := len(res.back)
	knnAt := make([]int, len(knn))
	for i, st := range knn {
		knnAt[i] = words
		words += len(st.Out)
	}
	if words == 0 {
		return res, nil
	}
	host := make([]uint64, words)
	err := d.do(func() (err error) {
		var pk pack
		pk.reset(d.packBuf)
		defer func() { d.packBuf = pk.buf[:0] }()
		var din densityInputs
		if withDensity {
			din = packDensity(&pk, dens.m, dens.rq.obj, dens.p, dens.rq.lo, dens.rq.hi, dens.rq.off)
		}
		qAt := make([]int64, len(knn))
		for i, st := range knn {
			qAt[i] = pk.addCols(st.Q, len(st.Out))
		}
		base, err := pk.upload(d, scratchIn, "scoring inputs")
		if err != nil {
			return err
		}
		outp, err := d.scratch(scratchOut, "scoring results", int64(words)*8)
		if err != nil {
			return err
		}
		stream := 0
		if withDensity {
			mb, release, derr := d.densityModelOn(dens.m, dens.rq.bounds)
			if derr != nil {
				return derr
			}
			defer func() { err = errors.Join(err, release()) }()
			if err := d.launchDensity(d.stepStreams[stream], dens.m, mb, dens.rq.obj, dens.p, dens.rq.bounds, din.at(base), outp); err != nil {
				return err
			}
			stream++
		}
		for i, st := range knn {
			nq := len(st.Out)
			if nq == 0 {
				continue
			}
			qp := base + cu.DevicePtr(qAt[i])
			op := outp + cu.DevicePtr(knnAt[i]*8)
			if err := d.launchKNNAny(d.stepStreams[stream], cu.DevicePtr(st.S.ptr), st.S.rows, qp, nq, st.S.dims, st.K, scratchPartial+scratchSlot(stream), op); err != nil {
				return err
			}
			stream++
		}
		return download(d, "scoring results", host, outp)
	})
	if err != nil {
		return densityResult{}, err
	}
	copy(res.back, host[:len(res.back)])
	for i, st := range knn {
		w := host[knnAt[i] : knnAt[i]+len(st.Out)]
		copy(st.Out, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(w))), len(w)))
	}
	return res, nil
}
