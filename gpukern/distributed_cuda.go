//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// distNode is a DistributedNode's device state: the partition and the buffers of one
// SolvingSet run on it (ssBuffers' layout), and one allocation, io, for what crosses the bus in
// an iteration: the hand-in (the taken rows, the candidates' coordinates and LNN) uploaded in one
// copy, and the hand-out (their LNNC after step b, their done flags, their local lists, the
// node's selection and the proposed rows' coordinates and LNN) downloaded in one copy. cand,
// candX, candHeap, candDone and selFin are views into io.
//
// A Step's results are views into ioHost or buffers kept across Steps, nothing allocated or
// copied out of the hand-out (where m <= SEL_SLICE/2; the 4-GPU run's nodes spent 6.3 ms of 540
// in the Step's post-processing, copies and fresh heap pages, BENCHMARKS §4.3.4). ioHost holds
// the hand-in and two hand-outs, the Steps' downloads alternating between them, so that a Step's
// lists and LNNC, merged by the supervisor beside the next Step, are still there. The views
// live in the device's page-locked memory: they end with the node (Close) and with the device.
type distNode struct {
	b  ssBuffers
	io cu.DevicePtr
	// ioHost is io's host side (8-byte words: the selection's keys are float64): the hand-in at
	// io's words, then the two hand-outs (hostOut). Page-locked where the driver allows
	// (ioLocked): the hand-in then goes by DMA without the driver's staging copy and without the
	// host waiting for it, and a hand-out lands without one.
	ioHost        []uint64
	ioLocked      lockedBuf // ioHost's page-locked memory (p nil: ioHost is pageable)
	lay           distLayout
	rows, dims, k int
	total         int // the rows of every node together (rows: a node made alone)
	m             int // the most rows the node selects or takes a Step: min(m, rows)
	mc            int // the most candidates a Step meets: m (they come from every node)
	blocks, take  int
	margin        float64
	nc            int // candidates of the last Step
	// listPar is the hand-out of the last Step (out): its candidates' local lists, LNNC and
	// proposal are there, and the Step before's in the other one (the lists Neighbours gave out
	// for it outlive the next Step).
	listPar  int
	listLen  []int       // the last Step's lists' lengths (a list ends at its first +Inf)
	done     []bool      // the last Step's done flags
	propRows []int       // the last Step's proposed rows
	nbOut    [][]float32 // Neighbours' answer (the outer slice: valid until the next call)
	prop     []int32     // the proposal's rows for the fallback gather (m > SEL_SLICE/2)
	host     DistHostTimes
}

// distLayout is io's layout in 8-byte words: the hand-in is words [0, done), the hand-out
// [candHeap, end). The candidates' parts hold mc of them, the node's own rows' (taken, proposed)
// m.
type distLayout struct {
	taken, candX, candHeap, done, list, fin, propX, propHeap, end int
}

func newDistLayout(m, mc, dims, k, take int) distLayout {
	words := func(n32 int) int { return (n32 + 1) / 2 } // n 4-byte values
	var l distLayout
	at := 0
	for _, f := range []struct {
		p *int
		n int
	}{{&l.taken, words(m)}, {&l.candX, words(mc * dims)}, {&l.candHeap, words(mc * k)}, {&l.done, words(mc)},
		{&l.list, words(mc * k)}, {&l.fin, finWords(take)}, {&l.propX, words(m * dims)}, {&l.propHeap, words(m * k)}} {
		*f.p = at
		at += f.n
	}
	l.end = at
	return l
}

func (d *Device) newDistNode(cols [][]float32, rows, k, m int, margin float64) (*distNode, error) {
	dims := len(cols)
	if int64(m)*int64(dims+1)*4 > 48<<10 {
		return nil, fmt.Errorf("m=%d candidates of %d dimensions exceed ss_dtoc's 48 KiB of shared memory", m, dims)
	}
	// A Step's candidates come from every node: up to m of them even where the partition holds
	// fewer rows (mc); the node's own selection and takes are at most its rows (m).
	n := &distNode{rows: rows, total: rows, dims: dims, k: k, m: min(m, rows), mc: m, margin: margin}
	m = n.m
	n.blocks = (rows + ssSelectSlice - 1) / ssSelectSlice
	n.take = min(m, ssSelectSlice)
	n.lay = newDistLayout(m, n.mc, dims, k, n.take)
	err := d.do(func() (err error) {
		defer func() {
			if err != nil {
				err = errors.Join(err, n.free(d))
			}
		}()
		b := &n.b
		hostWords := n.hostOut(2)
		if n.ioLocked, err = d.takeLocked(int64(hostWords) * 8); err == nil {
			n.ioHost = unsafe.Slice((*uint64)(n.ioLocked.p), hostWords)
		} else { // page-locked memory refused: the copies stay synchronous, from pageable memory
			n.ioLocked, n.ioHost = lockedBuf{}, make([]uint64, hostWords)
		}
		if b.x, err = uploadCols(d, "partition", cols, rows); err != nil {
			return err
		}
		N, K, MC := int64(rows), int64(k), int64(n.mc)
		allocs := []struct {
			p     *cu.DevicePtr
			what  string
			bytes int64
		}{
			{&b.heap, "LNN heaps", N * K * 4}, {&b.ub, "UB", N * 8}, {&b.state, "state", N * 4},
			{&b.candUB, "UB_C", MC * 8}, {&b.distM, "distance matrix", MC * N * 4},
			{&b.selKey, "selection keys", int64(n.blocks*n.take) * 8}, {&b.selIdx, "selection indices", int64(n.blocks*n.take) * 4},
			{&n.io, "hand-in and hand-out", int64(n.lay.end) * 8},
		}
		for _, a := range allocs {
			if *a.p, err = alloc(a.what, a.bytes); err != nil {
				return err
			}
		}
		w := func(word int) cu.DevicePtr { return n.io + cu.DevicePtr(word*8) }
		b.cand, b.candX, b.candHeap, b.candDone, b.selFin = w(n.lay.taken), w(n.lay.candX), w(n.lay.candHeap), w(n.lay.done), w(n.lay.fin)
		if err := b.allocSelect2(n.blocks, n.take); err != nil {
			return err
		}
		if err := b.allocPart(n.mc, k); err != nil {
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

// free frees the node's buffers (io's views are not freed on their own) and gives ioHost's
// page-locked memory back to the device. Inside do only.
func (n *distNode) free(d *Device) error {
	b := n.b
	b.cand, b.candX, b.candHeap, b.candDone, b.selFin = 0, 0, 0, 0, 0
	if n.ioLocked.p != nil {
		// A hand-in's DMA may still read ioHost where a Step failed after queueing it: wait for
		// the device before the buffer is reused (an error here is that failure's, already
		// returned by its Step).
		_ = cu.Synchronize()
		d.putLocked(n.ioLocked)
		n.ioLocked, n.ioHost = lockedBuf{}, nil
	}
	return errors.Join(b.free(), frees(n.io))
}

// f32 and i32 view n 4-byte values of ioHost from word w on.
func (n *distNode) f32(w, cnt int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&n.ioHost[w])), cnt)
}
func (n *distNode) i32(w, cnt int) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&n.ioHost[w])), cnt)
}

// hostOut is the ioHost word where hand-out r starts (io's hand-out, words [candHeap, end),
// downloaded there); hostOut(2) is ioHost's length.
func (n *distNode) hostOut(r int) int { return n.lay.end + r*(n.lay.end-n.lay.candHeap) }

// out is the ioHost word of io's hand-out word w in the last Step's hand-out.
func (n *distNode) out(w int) int { return n.hostOut(n.listPar) + w - n.lay.candHeap }

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
		if err := launchParams(d, "ss_gather", ssGatherGrid(nc), ssGatherBlock, 0, &ssGatherParams{
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

// distStep is Node.Step on the device: one upload (the hand-in), the kernels of steps a (the
// taken rows into S: ss_gather), b (ss_ctoc), c (ss_dtoc, ss_candpart/ss_candmerge into the
// local lists) and e, f (ss_select and its further levels, the last two and the sort in
// ss_select_tail, the proposed rows gathered by ss_gather without moving them into S), one
// download (the hand-out). A failed Step leaves no candidates: Neighbours then answers only
// empty requests (the lists and their lengths are not one Step's).
func (d *Device) distStep(n *distNode, taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	t0 := time.Now()
	nc := len(coords) / n.dims
	m = min(m, n.m)
	if nc > n.mc || len(taken) > n.m || len(lnn) != nc*n.k || len(coords) != nc*n.dims {
		return nil, nil, Proposal{}, fmt.Errorf("gpukern.DistributedNode.Step: %d taken rows, %d coordinates and %d LNN values for %d dimensions, k=%d, m=%d",
			len(taken), len(coords), len(lnn), n.dims, n.k, n.mc)
	}
	for _, r := range taken {
		if r < 0 || r >= n.rows {
			return nil, nil, Proposal{}, fmt.Errorf("gpukern.DistributedNode.Step: taken row %d of %d", r, n.rows)
		}
	}
	// The hand-in: the taken rows, the candidates and their LNN.
	lay := n.lay
	tk := n.i32(lay.taken, len(taken))
	for i, r := range taken {
		tk[i] = int32(r)
	}
	copy(n.f32(lay.candX, len(coords)), coords)
	copy(n.f32(lay.candHeap, len(lnn)), lnn)
	n.nc = 0 // (nc once the Step has succeeded)
	take := min(m, ssSelectSlice)
	var next Proposal
	var tB, tC, tD, tE time.Time
	tA := time.Now()
	err := d.do(func() (err error) {
		tB = time.Now()
		b := &n.b
		// From page-locked memory the copy is queued ahead of the kernels and the host goes on
		// to launch them; ioHost's hand-in is written again only by the next Step, after this
		// one's download has waited for everything before it on the stream.
		if n.ioLocked.p != nil {
			if err := cu.MemcpyHtoDAsync(n.io, n.ioLocked.p, int64(lay.done)*8, cu.Stream{}); err != nil {
				return fmt.Errorf("cuMemcpyHtoDAsync(hand-in): %w", err)
			}
		} else if err := cu.MemcpyHtoD(n.io, unsafe.Pointer(&n.ioHost[0]), int64(lay.done)*8); err != nil {
			return fmt.Errorf("cuMemcpyHtoD(hand-in): %w", err)
		}
		d.toDevice.Add(int64(lay.done) * 8)
		tC = time.Now()
		gather := func(rows cu.DevicePtr, cnt int, state, x, heap cu.DevicePtr) error {
			if cnt == 0 {
				return nil
			}
			return launchParams(d, "ss_gather", ssGatherGrid(cnt), ssGatherBlock, 0, &ssGatherParams{
				X: uint64(b.x), N: int64(n.rows), Dims: int64(n.dims), Heap: uint64(b.heap), K: int64(n.k),
				Cand: uint64(rows), Nc: int64(cnt), State: uint64(state), CandX: uint64(x), CandHeap: uint64(heap)})
		}
		w := func(word int) cu.DevicePtr { return n.io + cu.DevicePtr(word*8) }
		var L int
		var lk, li cu.DevicePtr
		var fin bool
		// Every launch up to the hand-out's download, timed as one span (ss_step).
		err = d.spanned("ss_step", func() (err error) {
			// The taken rows into S; their copies go to the proposal's buffers, which nothing
			// reads before this step's proposal overwrites them.
			if err := gather(b.cand, len(taken), b.state, w(lay.propX), w(lay.propHeap)); err != nil {
				return err
			}
			if nc > 0 {
				if err := launchCtoc(d, b, nc, n.dims, n.k, n.margin, minOUT); err != nil {
					return err
				}
				if err := launchDtoc(d, b, n.rows, n.dims, nc, n.k, n.margin, minOUT); err != nil {
					return err
				}
				if err := launchCandNN(d, b, n.rows, nc, nodeCandSlices(n.rows, n.total, nc), n.k, n.margin, minOUT, 0, w(lay.list)); err != nil {
					return err
				}
			}
			if L, lk, li, fin, err = selectLaunch(d, b, n.rows, n.blocks, m, take, n.margin, minOUT); err != nil || !fin {
				return err
			}
			// Inactive pairs (key -1) carry no row: ss_gather skips them.
			return gather(b.selFin+cu.DevicePtr(take*8), take, 0, w(lay.propX), w(lay.propHeap))
		})
		tD = time.Now()
		defer func() { tE = time.Now() }()
		if err != nil {
			return err
		}
		n.listPar ^= 1 // this Step's hand-out (out); the last one's stays for the merge beside
		handOut := n.ioHost[n.out(lay.candHeap):n.out(lay.end)]
		if fin {
			if err := download(d, "hand-out", handOut, w(lay.candHeap)); err != nil {
				return err
			}
			keys := unsafe.Slice((*float64)(unsafe.Pointer(&n.ioHost[n.out(lay.fin)])), take)
			idx := n.i32(n.out(lay.fin)+take, take)
			cnt := 0
			for cnt < take && keys[cnt] >= 0 {
				cnt++
			}
			next = n.proposal(idx[:cnt], keys[:cnt])
			return nil
		}
		// More than SEL_SLICE/2 candidates: the selection's runs go to the host, which takes
		// the m best and has their rows gathered (a second round trip).
		keys, idx := make([]float64, L), make([]int32, L)
		if err := download(d, "selection keys", keys, lk); err != nil {
			return err
		}
		if err := download(d, "selection indices", idx, li); err != nil {
			return err
		}
		rows, ub := topByKey(keys, idx, m)
		n.prop = n.prop[:0]
		for _, r := range rows {
			n.prop = append(n.prop, int32(r))
		}
		if len(rows) > 0 {
			if err := cu.MemcpyHtoD(b.cand, unsafePtr32(n.prop), int64(len(rows))*4); err != nil {
				return fmt.Errorf("cuMemcpyHtoD(proposal): %w", err)
			}
			d.toDevice.Add(int64(len(rows)) * 4)
		}
		if err := gather(b.cand, len(rows), 0, w(lay.propX), w(lay.propHeap)); err != nil {
			return err
		}
		if err := download(d, "hand-out", handOut, w(lay.candHeap)); err != nil {
			return err
		}
		next = n.proposal(n.prop, ub)
		return nil
	})
	tF := time.Now()
	if err != nil {
		return nil, nil, Proposal{}, fmt.Errorf("gpukern.DistributedNode.Step: %w", err)
	}
	defer func() {
		h := &n.host
		h.Pre += tA.Sub(t0)
		h.Enter += tB.Sub(tA)
		h.Upload += tC.Sub(tB)
		h.Launch += tD.Sub(tC)
		h.Wait += tE.Sub(tD)
		h.Leave += tF.Sub(tE)
		h.Post += time.Since(tF)
	}()
	// The lists (candidate-major, +Inf padded) for Neighbours: a done candidate's is stale, and
	// the supervisor asks for none of it. The lists and LNNC are views into this Step's hand-out,
	// which the Step after next overwrites; the done flags and the proposal are read before the
	// next Step.
	lists := n.f32(n.out(lay.list), nc*n.k)
	n.listLen = slices.Grow(n.listLen[:0], nc)[:nc]
	for t := range nc {
		l := 0
		for l < n.k && !math.IsInf(float64(lists[t*n.k+l]), 1) {
			l++
		}
		n.listLen[t] = l
	}
	n.nc = nc
	n.done = slices.Grow(n.done[:0], nc)[:nc]
	for t, v := range n.i32(n.out(lay.done), nc) {
		n.done[t] = v != 0
	}
	return n.f32(n.out(lay.candHeap), nc*n.k), n.done, next, nil
}

// proposal is the proposed rows (idx, with their UB) and their coordinates and LNN: the rows
// in a buffer kept across Steps, the rest views into the hand-out (ub too, where it is one),
// valid until the next Step.
func (n *distNode) proposal(idx []int32, ub []float64) Proposal {
	n.propRows = slices.Grow(n.propRows[:0], len(idx))[:len(idx)]
	for i, r := range idx {
		n.propRows[i] = int(r)
	}
	return Proposal{Rows: n.propRows, UB: ub[:len(idx):len(idx)],
		Coords: n.f32(n.out(n.lay.propX), len(idx)*n.dims), LNN: n.f32(n.out(n.lay.propHeap), len(idx)*n.k)}
}

// distNeighbours serves the candidates' lists from the hand-out (every list whole, nc*k floats,
// 20 KB at m = 100, k = 50: between GPUs of one host the lazy merge's saving is smaller than the
// round trip, and the barrier, of asking again).
func (d *Device) distNeighbours(n *distNode, from, count []int) ([][]float32, error) {
	if len(from) != n.nc || len(count) != n.nc {
		return nil, fmt.Errorf("gpukern.DistributedNode.Neighbours: %d/%d requests for %d candidates", len(from), len(count), n.nc)
	}
	n.nbOut = slices.Grow(n.nbOut[:0], n.nc)[:n.nc]
	out, lists := n.nbOut, n.f32(n.out(n.lay.list), n.nc*n.k)
	for t := range n.nc {
		lo := min(from[t], n.listLen[t])
		hi := min(lo+count[t], n.listLen[t])
		out[t] = lists[t*n.k+lo : t*n.k+hi : t*n.k+hi]
	}
	return out, nil
}

func (d *Device) distHostTimes(n *distNode) DistHostTimes { return n.host }

func (d *Device) distSetTotal(n *distNode, rows int) { n.total = max(rows, n.rows) }

func (d *Device) distFree(n *distNode) error {
	if n == nil {
		return nil
	}
	return d.do(func() error { return n.free(d) })
}
