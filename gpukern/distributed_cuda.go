//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"
)

// distNode is a DistributedNode's device state: the partition and the buffers of one
// SolvingSet run on it (ssBuffers' layout), plus the candidates' local lists (slot-major) and
// the part of them already downloaded.
type distNode struct {
	b             ssBuffers
	list          cu.DevicePtr
	rows, dims, k int
	m             int
	blocks, take  int
	margin        float64
	nc            int       // candidates of the last Compare
	host          []float32 // their lists, slot-major, the first have slots of each downloaded
	have          int
}

func (d *Device) newDistNode(cols [][]float32, rows, k, m int, margin float64) (*distNode, error) {
	dims := len(cols)
	m = min(m, rows)
	if int64(m)*int64(dims+1)*4 > 48<<10 {
		return nil, fmt.Errorf("m=%d candidates of %d dimensions exceed ss_dtoc's 48 KiB of shared memory", m, dims)
	}
	n := &distNode{rows: rows, dims: dims, k: k, m: m, margin: margin}
	n.blocks = (rows + ssSelectSlice - 1) / ssSelectSlice
	n.take = min(m, ssSelectSlice)
	err := d.do(func() (err error) {
		defer func() {
			if err != nil {
				err = errors.Join(err, n.b.free(), frees(n.list))
			}
		}()
		b := &n.b
		if b.x, err = uploadCols(d, "partition", cols, rows); err != nil {
			return err
		}
		N, D, K, M := int64(rows), int64(dims), int64(k), int64(m)
		allocs := []struct {
			p     *cu.DevicePtr
			what  string
			bytes int64
		}{
			{&b.heap, "LNN heaps", N * K * 4}, {&b.ub, "UB", N * 8}, {&b.state, "state", N * 4},
			{&b.cand, "candidates", M * 4}, {&b.candX, "candidate coordinates", M * D * 4},
			{&b.candHeap, "LNNC", M * K * 4}, {&b.candDone, "done flags", M * 4},
			{&b.distM, "distance matrix", M * N * 4},
			{&b.selKey, "selection keys", int64(n.blocks*n.take) * 8}, {&b.selIdx, "selection indices", int64(n.blocks*n.take) * 4},
			{&b.active, "active count", 8}, {&n.list, "local lists", M * K * 4},
		}
		for _, a := range allocs {
			if *a.p, err = alloc(a.what, a.bytes); err != nil {
				return err
			}
		}
		if err := b.allocSelect2(n.blocks, n.take); err != nil {
			return err
		}
		if err := b.allocPart(m, k); err != nil {
			return err
		}
		return launchParams(d, "ss_init", [3]int{(rows + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
			&ssInitParams{Heap: uint64(b.heap), UB: uint64(b.ub), State: uint64(b.state), N: N, K: K})
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (d *Device) distTake(n *distNode, rows []int) (coords, lnn []float32, err error) {
	nc := len(rows)
	if nc > n.m {
		return nil, nil, fmt.Errorf("gpukern.DistributedNode.Take: %d rows, at most m=%d", nc, n.m)
	}
	coords, lnn = make([]float32, nc*n.dims), make([]float32, nc*n.k)
	err = d.do(func() error {
		if nc == 0 {
			return nil
		}
		idx := make([]int32, nc)
		for i, r := range rows {
			idx[i] = int32(r)
		}
		if err := cu.MemcpyHtoD(n.b.cand, unsafePtr32(idx), int64(nc)*4); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(candidates): %w", err)
		}
		d.toDevice.Add(int64(nc) * 4)
		b := &n.b
		if err := launchParams(d, "ss_gather", [3]int{(nc + 127) / 128, 1, 1}, [3]int{128, 1, 1}, 0, &ssGatherParams{
			X: uint64(b.x), N: int64(n.rows), Dims: int64(n.dims), Heap: uint64(b.heap), K: int64(n.k),
			Cand: uint64(b.cand), Nc: int64(nc), State: uint64(b.state), CandX: uint64(b.candX),
			CandHeap: uint64(b.candHeap)}); err != nil {
			return err
		}
		if err := download(d, "candidate coordinates", coords, b.candX); err != nil {
			return err
		}
		return download(d, "LNN of the candidates", lnn, b.candHeap)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gpukern.DistributedNode.Take: %w", err)
	}
	return coords, lnn, nil
}

func (d *Device) distCompare(n *distNode, coords, lnnc []float32, minOUT float64) ([]bool, error) {
	nc := len(coords) / n.dims
	if nc > n.m || len(lnnc) != nc*n.k || len(coords) != nc*n.dims {
		return nil, fmt.Errorf("gpukern.DistributedNode.Compare: %d coordinates and %d LNNC values for %d dimensions, k=%d, m=%d", len(coords), len(lnnc), n.dims, n.k, n.m)
	}
	// The candidates' done flags after step b, as ss_ctoc computes them (plain sum in storage order).
	done32 := make([]int32, nc)
	for t := range nc {
		var s float64
		for _, v := range lnnc[t*n.k : (t+1)*n.k] {
			s += float64(v)
		}
		if s*n.margin < minOUT {
			done32[t] = 1
		}
	}
	n.nc, n.have = nc, 0
	n.host = make([]float32, nc*n.k)
	err := d.do(func() error {
		if nc == 0 {
			return nil
		}
		b := &n.b
		for _, c := range []struct {
			what string
			dst  cu.DevicePtr
			src  []float32
		}{{"candidate coordinates", b.candX, coords}, {"LNNC", b.candHeap, lnnc}} {
			if err := cu.MemcpyHtoD(c.dst, unsafePtrF32(c.src), int64(len(c.src))*4); err != nil {
				return fmt.Errorf("cuMemcpyHtoD(%s): %w", c.what, err)
			}
			d.toDevice.Add(int64(len(c.src)) * 4)
		}
		if err := cu.MemcpyHtoD(b.candDone, unsafePtr32(done32), int64(nc)*4); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(done flags): %w", err)
		}
		d.toDevice.Add(int64(nc) * 4)
		if err := launchDtoc(d, b, n.rows, n.dims, nc, n.k, n.margin, minOUT); err != nil {
			return err
		}
		if err := launchCandNN(d, b, n.rows, nc, n.k, n.margin, minOUT, 0, n.list); err != nil {
			return err
		}
		if err := download(d, "done flags", done32, b.candDone); err != nil {
			return err
		}
		// Every list whole (nc*k floats, 20 KB at m = 100, k = 50) in the same hand-over:
		// between GPUs of one host the lazy merge's saving is smaller than the round trip
		// (and the barrier) of asking again, so Neighbours serves from this copy.
		if err := download(d, "local lists", n.host, n.list); err != nil {
			return err
		}
		n.have = n.k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gpukern.DistributedNode.Compare: %w", err)
	}
	done := make([]bool, nc)
	for t := range nc {
		done[t] = done32[t] != 0
	}
	return done, nil
}

// distNeighbours serves the candidates' lists from the host copy, downloading the slots still
// missing (slot-major: the first s slots of every candidate are one contiguous copy).
func (d *Device) distNeighbours(n *distNode, from, count []int) ([][]float32, error) {
	if len(from) != n.nc || len(count) != n.nc {
		return nil, fmt.Errorf("gpukern.DistributedNode.Neighbours: %d/%d requests for %d candidates", len(from), len(count), n.nc)
	}
	need := n.have
	for t := range n.nc {
		if count[t] > 0 {
			need = max(need, min(n.k, from[t]+count[t]))
		}
	}
	if need > n.have {
		lo, hi := n.have*n.nc, need*n.nc
		err := d.do(func() error {
			return download(d, "local lists", n.host[lo:hi], n.list+cu.DevicePtr(int64(lo)*4))
		})
		if err != nil {
			return nil, fmt.Errorf("gpukern.DistributedNode.Neighbours: %w", err)
		}
		n.have = need
	}
	out := make([][]float32, n.nc)
	for t := range n.nc {
		for s := from[t]; s < min(n.k, from[t]+count[t]); s++ {
			v := n.host[s*n.nc+t]
			if math.IsInf(float64(v), 1) {
				break // the list ends (+inf padding)
			}
			out[t] = append(out[t], v)
		}
	}
	return out, nil
}

func (d *Device) distSelect(n *distNode, m int, minOUT float64) (rows []int, ub []float64, active int, err error) {
	m = min(m, n.m)
	take := min(m, ssSelectSlice)
	keys := make([]float64, n.blocks*take)
	idx := make([]int32, n.blocks*take)
	act := make([]uint64, 1)
	L := 0
	err = d.do(func() error {
		b := &n.b
		var err error
		if L, err = selectTop(d, b, n.rows, n.blocks, m, take, n.margin, minOUT, keys, idx); err != nil {
			return err
		}
		return download(d, "active count", act, b.active)
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("gpukern.DistributedNode.Select: %w", err)
	}
	rows, ub = topByKey(keys[:L], idx[:L], m)
	return rows, ub, int(act[0]), nil
}

func (d *Device) distFree(n *distNode) error {
	if n == nil {
		return nil
	}
	return d.do(func() error { return errors.Join(n.b.free(), frees(n.list)) })
}

func unsafePtrF32(s []float32) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
