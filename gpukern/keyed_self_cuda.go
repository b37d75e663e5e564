//go:build cuda

package gpukern

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// KeyedSelfWeights writes out[s][i], the sum of the distances from point i of set s (sets[s]: d
// columns of its points) to its k[s] nearest other points of the set, for every set in one
// launch (a block per set): KeyedSelfReference's bits, which are solvingset.KNNWeightsSelf's
// for finite points (accel runs a set with a point not finite on the CPU). The stage's key
// builds call it with every key a batch rebuilds.
func (d *Device) KeyedSelfWeights(sets [][][]float32, k []int, out [][]float64) error {
	if err := checkKeyedSelf(sets, k, out); err != nil {
		return fmt.Errorf("gpukern.Device.KeyedSelfWeights: %w", err)
	}
	if len(sets) == 0 {
		return nil
	}
	sc := keyedSelfScratches.Get().(*keyedSelfScratch)
	defer keyedSelfScratches.Put(sc)
	ns := len(sets)
	sc.meta = int32s(sc.meta, 2*ns+1) // start[ns+1], then k[ns]
	start, ks := sc.meta[:ns+1], sc.meta[ns+1:]
	total, maxK := 0, 0
	for s, set := range sets {
		start[s] = int32(total)
		total += len(set[0])
		ks[s] = int32(k[s])
		maxK = max(maxK, k[s])
	}
	start[ns] = int32(total)
	if cap(sc.back) < total {
		sc.back = make([]uint64, total)
	}
	back := sc.back[:total]
	err := d.do(func() error {
		var pk pack
		pk.reset(d.packBuf)
		defer func() { d.packBuf = pk.buf[:0] }()
		metaAt := pk.add(unsafe.Pointer(&sc.meta[0]), int64(len(sc.meta))*4)
		ptsAt := pk.add(nil, 0) // (the sets back to back: set s at d * start[s] floats)
		for _, set := range sets {
			for _, c := range set {
				if len(c) > 0 {
					pk.raw(unsafe.Pointer(&c[0]), int64(len(c))*4)
				}
			}
		}
		base, err := pk.upload(d, scratchIn, "keyed build sets")
		if err != nil {
			return err
		}
		op, err := d.scratch(scratchOut, "keyed build weights", int64(total)*8)
		if err != nil {
			return err
		}
		kernel := "keyed_self_q32"
		if maxK > 32 {
			kernel = "keyed_self_q64"
		}
		p := keyedSelfParams{Points: uint64(base) + uint64(ptsAt), Start: uint64(base) + uint64(metaAt),
			K: uint64(base) + uint64(metaAt) + uint64(4*(ns+1)), NSet: int64(ns), D: int64(len(sets[0])), Out: uint64(op)}
		if err := launchParams(d, kernel, [3]int{ns, 1, 1}, [3]int{keyedBlock, 1, 1}, 0, &p); err != nil {
			return err
		}
		return download(d, "keyed build weights", back, op)
	})
	if err != nil {
		return fmt.Errorf("gpukern.Device.KeyedSelfWeights: %w", err)
	}
	for s := range sets {
		for i, b := range back[start[s]:start[s+1]] {
			out[s][i] = math.Float64frombits(b)
		}
	}
	return nil
}

// keyedSelfScratch is a KeyedSelfWeights call's host memory, kept for the next call (a batch's
// builds are hundreds of keys: chunkScratch's reason).
type keyedSelfScratch struct {
	meta []int32
	back []uint64
}

var keyedSelfScratches = sync.Pool{New: func() any { return new(keyedSelfScratch) }}
