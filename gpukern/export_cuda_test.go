//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
)

// SelectTopForTest runs the SolvingSet's top-m selection (selectTop: ss_select, the
// ss_select_merge levels, topByKey) over uploaded upper bounds ub and states (0: in D \ S), as
// the one-device run does after step d (no active count): the indices and keys of the m best
// active points.
func SelectTopForTest(d *Device, ub []float64, state []int32, m int, margin, minOUT float64) (rows []int, keys []float64, err error) {
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
		L, err := selectTop(d, &b, rows0, blocks, m, take, margin, minOUT, hk, hi)
		if err != nil {
			return err
		}
		rows, keys = topByKey(hk[:L], hi[:L], m)
		return nil
	})
	return rows, keys, err
}
