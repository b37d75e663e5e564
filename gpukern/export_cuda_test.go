//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"unsafe"
)

// SelectTopForTest runs the SolvingSet's top-m selection as the one-device run does (no active
// count; ss_select, the ss_select_merge levels, ss_select_tail (the last two and the sort) and prunedPrefix, or, with
// more than one list left, topByKey) over uploaded upper bounds ub and states (0: in D \ S): the
// indices and keys of the m best active points, best first. The selection prunes with minOUT,
// the cut with minOUTAfter (>= minOUT: step d's, as in the run).
func SelectTopForTest(d *Device, ub []float64, state []int32, m int, margin, minOUT, minOUTAfter float64) (rows []int, keys []float64, err error) {
	rows0 := len(ub)
	if len(state) != rows0 || rows0 == 0 || m < 1 || m > rows0 {
		return nil, nil, fmt.Errorf("SelectTopForTest: %d bounds, %d states, m=%d", rows0, len(state), m)
	}
	blocks := (rows0 + ssSelectSlice - 1) / ssSelectSlice
	take := min(m, ssSelectSlice)
	hk, hi := make([]float64, blocks*take), make([]int32, blocks*take)
	var b ssBuffers
	err = d.do(func() (err error) {
		defer func() { err = errors.Join(err, b.free()) }()
		if b.ub, err = upload(d, "UB", ub); err != nil {
			return err
		}
		if b.state, err = upload(d, "state", state); err != nil {
			return err
		}
		if b.selKey, err = alloc("selection keys", int64(blocks*take)*8); err != nil {
			return err
		}
		if b.selIdx, err = alloc("selection indices", int64(blocks*take)*4); err != nil {
			return err
		}
		if err = b.allocSelect2(blocks, take); err != nil {
			return err
		}
		L, lk, li, fin, err := selectLaunch(d, &b, rows0, blocks, m, take, margin, minOUT)
		if err != nil {
			return err
		}
		if !fin {
			if err := download(d, "selection keys", hk[:L], lk); err != nil {
				return err
			}
			if err := download(d, "selection indices", hi[:L], li); err != nil {
				return err
			}
			rows, keys = topByKey(hk[:L], hi[:L], m)
			n := prunedPrefix(keys, margin, minOUTAfter)
			rows, keys = rows[:n], keys[:n]
			return nil
		}
		// as the one-device run: sorted on the device
		if err := download(d, "selection", b.finHost, b.selFin); err != nil {
			return err
		}
		fk, fi := b.finHost[:take], unsafe.Slice((*int32)(unsafe.Pointer(&b.finHost[take])), take)
		n := prunedPrefix(fk, margin, minOUTAfter)
		for i := range n {
			rows = append(rows, int(fi[i]))
		}
		keys = append(keys, fk[:n]...)
		return nil
	})
	return rows, keys, err
}

// CandSlicesForTest is ssCandSlices: one device's ss_candpart slices over rows for nc candidates.
func CandSlicesForTest(rows, nc int) int { return ssCandSlices(rows, nc) }

// NodeCandSlicesForTest is nodeCandSlices: a distributed node's share of them.
func NodeCandSlicesForTest(rows, total, nc int) int { return nodeCandSlices(rows, total, nc) }

// The benchmarks' knobs, so that one binary measures each setting in one call: the column
// size from which uploads are staged (OUTLIERD_BENCH_STAGED_MIN, bytes; "off": never), the
// staging's copiers (OUTLIERD_BENCH_STAGE_COPIERS).
func init() {
	if v := os.Getenv("OUTLIERD_BENCH_STAGED_MIN"); v == "off" {
		stagedUploadMin = math.MaxInt64
	} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		stagedUploadMin = n
	}
	if n, err := strconv.Atoi(os.Getenv("OUTLIERD_BENCH_STAGE_COPIERS")); err == nil {
		stageCopiers = n
	}
}
