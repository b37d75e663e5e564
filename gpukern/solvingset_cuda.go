//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/cu"
)

const (
	// ssCandSlicesMax is the most slices ss_candpart_q* splits a candidate's distM row into.
	ssCandSlicesMax = 32
	ssSelectThreads = 1024 // SEL_THREADS
)

// ssBuffers are the device buffers of one SolvingSet run.
type ssBuffers struct {
	x, heap, ub, state                              cu.DevicePtr
	cand, candX, candHeap, candUB, candDone, weight cu.DevicePtr
	distM, selKey, selIdx                           cu.DevicePtr
	selKey2, selIdx2                                cu.DevicePtr // the selection's other level (the levels ping-pong)
	selCount                                        cu.DevicePtr // ss_select_tail's blocks done (a uint32, zero between launches)
	part                                            cu.DevicePtr // ss_candpart_q*'s slices, M x ssCandSlicesMax x k
	// selFin is the last selection level's pairs, take keys then take indices, one download
	// (finHost its host copy).
	selFin  cu.DevicePtr
	finHost []float64
	// views: candDone and selFin lie in weight's allocation (the one-device run: M weights, M
	// done flags, the last level's pairs, downloaded in one copy) and are not freed on their own.
	views bool
}

// ssGatherGrid is ss_gather's grid for n candidates, of ssGatherBlock blocks (a warp a candidate).
func ssGatherGrid(n int) [3]int { return [3]int{(n + ssGatherWarps - 1) / ssGatherWarps, 1, 1} }

var ssGatherBlock = [3]int{32 * ssGatherWarps, 1, 1}

func (b *ssBuffers) free() error {
	done, fin := b.candDone, b.selFin
	if b.views {
		done, fin = 0, 0
	}
	return frees(b.x, b.heap, b.ub, b.state, b.cand, b.candX, b.candHeap, b.candUB, done,
		b.weight, b.distM, b.selKey, b.selIdx, b.selKey2, b.selIdx2, b.selCount, b.part, fin)
}

// ssSharedBudget is the dynamic shared memory ss_dtoc gives a block's LNN heaps
// (threads x k floats) at most: 128 threads at k = 50 take 25 KiB, so that 6-8 blocks share an
// SM; larger k gets fewer threads per block (down to 32: 32 KiB at k = 256).
const ssSharedBudget = 32 * 1024

// ssHeapThreads is the block size of ss_dtoc for k: 128, halved while the block's
// heaps would pass ssSharedBudget, at least 32.
func ssHeapThreads(k int) int {
	t := 128
	for t > 32 && t*k*4 > ssSharedBudget {
		t /= 2
	}
	return t
}

// ssCtocWarps is the number of candidates (warps) per ss_ctoc block (SS_CTOC_WARPS).
const ssCtocWarps = 4

// launchCtoc is step b (ss_ctoc) for nc candidates. Inside do only.
func launchCtoc(d *Device, b *ssBuffers, nc, dims, k int, margin, minOUT float64) error {
	return launchParams(d, "ss_ctoc", [3]int{(nc + ssCtocWarps - 1) / ssCtocWarps, 1, 1}, [3]int{32 * ssCtocWarps, 1, 1}, 0, &ssCtocParams{
		CandX: uint64(b.candX), Nc: int64(nc), Dims: int64(dims), K: int64(k), CandHeap: uint64(b.candHeap),
		CandUB: uint64(b.candUB), CandDone: uint64(b.candDone), Margin: margin, MinOUT: minOUT})
}

// launchDtoc is step c's points' side (ss_dtoc) over rows points for nc candidates: the
// candidates and done flags (nc*(dims+1) words) and the block's heaps (threads*k floats) in
// dynamic shared memory. Inside do only.
func launchDtoc(d *Device, b *ssBuffers, rows, dims, nc, k int, margin, minOUT float64) error {
	t := ssHeapThreads(k)
	shared := nc*(dims+1)*4 + t*k*4
	if err := allowShared(d, "ss_dtoc", shared); err != nil {
		return err
	}
	return launchParams(d, "ss_dtoc", [3]int{(rows + t - 1) / t, 1, 1}, [3]int{t, 1, 1}, shared, &ssDtocParams{
		X: uint64(b.x), N: int64(rows), Dims: int64(dims), CandX: uint64(b.candX), CandDone: uint64(b.candDone),
		Nc: int64(nc), K: int64(k), State: uint64(b.state), Heap: uint64(b.heap), UB: uint64(b.ub),
		DistM: uint64(b.distM), Margin: margin, MinOUT: minOUT})
}

// ssCandSlices is how many slices (blocks) ss_candpart_q* gives each of nc candidates' rows of
// rows entries: about 1024 blocks in all, so that 8 share each of the 132 SMs (one block per
// candidate left 100 blocks latency-bound at 5 % of HBM), at least 8192 entries a slice, at most
// ssCandSlicesMax.
func ssCandSlices(rows, nc int) int {
	return max(1, min(ssCandSlicesMax, (1024+nc-1)/nc, rows/8192))
}

// nodeCandSlices is a distributed node's slices for nc candidates over its rows of total rows:
// its share of the slices one device would use over all of them (at least one). A slice's block
// stops once a warp's queue proves the candidate done, which takes about as many entries of the
// row whatever the slice's length: with ssCandSlices' count on every node, J nodes did that work
// J times over (ss_candpart at 2 GPUs 490 µs an iteration against one device's 590, §4.3.1).
// A fixed count of 1, 2, 4, 6, 8 or 11 slices a node did no better at 4 GPUs (§4.3.3).
func nodeCandSlices(rows, total, nc int) int {
	return max(1, (ssCandSlices(total, nc)*rows+total-1)/total)
}

// allocPart allocates ss_candpart_q*'s slice lists for m candidates. Inside do only.
func (b *ssBuffers) allocPart(m, k int) (err error) {
	b.part, err = alloc("CandNN slices", int64(m)*ssCandSlicesMax*int64(k)*4)
	return err
}

// launchCandNN is step c's candidates' side: ss_candpart_q* over S slices of the rows
// (ssCandSlices; a distributed node's share of them, nodeCandSlices), then ss_candmerge_q*, into
// weight (list 0) or, for a distributed node, the local lists. Inside do only.
func launchCandNN(d *Device, b *ssBuffers, rows, nc, S, k int, margin, minOUT float64, weight, list cu.DevicePtr) error {
	q, threads := "q64", ssCandThreadsQ64 // the warp queue that holds k (64 or 256 slots)
	if k > 64 {
		q, threads = "q256", ssCandThreadsQ256
	}
	if err := launchParams(d, "ss_candpart_"+q, [3]int{nc, S, 1}, [3]int{threads, 1, 1}, 0, &ssCandPartParams{
		DistM: uint64(b.distM), N: int64(rows), K: int64(k), CandHeap: uint64(b.candHeap), CandDone: uint64(b.candDone),
		Margin: margin, MinOUT: minOUT, Part: uint64(b.part)}); err != nil {
		return err
	}
	return launchParams(d, "ss_candmerge_"+q, [3]int{nc, 1, 1}, [3]int{32, 1, 1}, 0, &ssCandMergeParams{
		Part: uint64(b.part), S: int64(S), K: int64(k), CandHeap: uint64(b.candHeap), CandDone: uint64(b.candDone),
		Weight: uint64(weight), List: uint64(list)})
}

// allocSelect2 allocates the second selection level's buffers and the last level's. Owner
// thread only.
func (b *ssBuffers) allocSelect2(blocks, take int) (err error) {
	n := int64(ssSelect2Len(blocks, take))
	if b.selKey2, err = alloc("selection keys, second level", n*8); err != nil {
		return err
	}
	if b.selIdx2, err = alloc("selection indices, second level", n*4); err != nil {
		return err
	}
	if b.selCount, err = alloc("selection count", 4); err != nil {
		return err
	}
	if err := cu.MemsetD32(b.selCount, 0, 1); err != nil {
		return fmt.Errorf("cuMemsetD32(selection count): %w", err)
	}
	if b.selFin != 0 { // a view (the one-device run's)
		return nil
	}
	b.finHost = make([]float64, finWords(take))
	b.selFin, err = alloc("selection, last level", int64(len(b.finHost))*8)
	return err
}

// finWords is the length in float64 words of the last level's take keys and take int32 indices.
func finWords(take int) int { return take + (take+1)/2 }

// selectLaunch is steps e and f on the device: ss_select over rows points (blocks lists of
// take), then the further levels until one list is left or a level would not shrink it. It
// returns the length of what is left and where (fin: take pairs in selFin, sorted best first
// as ss_select_sort sorts them, when m <= ssSelectSlice/2 or there is one block; else
// blocks*take pairs in keys, idx). The last two levels and the sort are one launch,
// ss_select_tail, where there is a level; with none, ss_select_sort sorts ss_select's one list.
// Inside do only.
func selectLaunch(d *Device, b *ssBuffers, rows, blocks, m, take int, margin, minOUT float64) (L int, keys, idx cu.DevicePtr, fin bool, err error) {
	finIdx := b.selFin + cu.DevicePtr(take*8) // the last level's indices, after its take keys
	levels := ssSelectLevels(blocks, take)
	inK, inI := b.selKey, b.selIdx
	if levels == 0 && blocks == 1 {
		inK, inI = b.selFin, finIdx
	}
	if err := launchParams(d, "ss_select", [3]int{blocks, 1, 1}, [3]int{ssSelectThreads, 1, 1}, 0, &ssSelectParams{
		UB: uint64(b.ub), State: uint64(b.state), N: int64(rows), M: int64(m), Margin: margin, MinOUT: minOUT,
		OutKey: uint64(inK), OutIdx: uint64(inI)}); err != nil { // Active 0: no count (ss_select's optional counter; no caller reads it any more)
		return 0, 0, 0, false, err
	}
	L = blocks * take
	outK, outI := b.selKey2, b.selIdx2
	for range levels - 2 { // all but the last two levels, a launch each (their blocks in parallel)
		nb := (L + ssSelectSlice - 1) / ssSelectSlice
		if err := launchParams(d, "ss_select_merge", [3]int{nb, 1, 1}, [3]int{ssSelectThreads, 1, 1}, 0, &ssSelectMergeParams{
			InKey: uint64(inK), InIdx: uint64(inI), L: int64(L), Take: int64(take), OutKey: uint64(outK), OutIdx: uint64(outI)}); err != nil {
			return 0, 0, 0, false, err
		}
		L = ssSelectNext(L, take)
		inK, inI, outK, outI = outK, outI, inK, inI
	}
	switch {
	case levels > 0: // the second-to-last level's blocks, then the last level and the sort in the last of them
		err = launchParams(d, "ss_select_tail", [3]int{(L + ssSelectSlice - 1) / ssSelectSlice, 1, 1}, [3]int{ssSelectThreads, 1, 1}, 0, &ssSelectTailParams{
			Key0: uint64(inK), Idx0: uint64(inI), Key1: uint64(outK), Idx1: uint64(outI),
			FinKey: uint64(b.selFin), FinIdx: uint64(finIdx), L: int64(L), Take: int64(take), Levels: int64(min(levels, 2)), Count: uint64(b.selCount)})
	case blocks == 1:
		err = launchParams(d, "ss_select_sort", [3]int{1, 1, 1}, [3]int{ssSortThreads(take), 1, 1}, 0, &ssSelectSortParams{
			Key: uint64(b.selFin), Idx: uint64(finIdx), N: int64(take)})
	default: // more than SEL_SLICE/2 candidates: the host takes the m best of every block's
		return L, inK, inI, false, nil
	}
	if err != nil {
		return 0, 0, 0, false, err
	}
	return take, b.selFin, finIdx, true, nil
}

// ssSortThreads is ss_select_sort's block for n pairs: half the next power of two, at least a
// warp.
func ssSortThreads(n int) int {
	p := 2
	for p < n {
		p <<= 1
	}
	return max(32, p/2)
}

// prunedPrefix is the length of the prefix of keys (sorted descending, -1 for inactive) that
// pruning with minOUT leaves active: pruned(ub) = ub*margin < minOUT is monotone in ub, so the
// points it prunes are a suffix.
func prunedPrefix(keys []float64, margin, minOUT float64) int {
	for i, k := range keys {
		if k < 0 || float64(k*margin) < minOUT {
			return i
		}
	}
	return len(keys)
}

// wdWords is the length in float64 words of m weights followed by m int32 done flags.
func wdWords(m int) int { return m + (m+1)/2 }

func (d *Device) solvingSet(cols [][]float32, rows int, p SolvingSetParams) (SolvingSetResult, error) {
	var b ssBuffers
	res, err := d.runSolvingSet(&b, cols, rows, len(cols), p)
	err = errors.Join(err, d.do(b.free))
	if err != nil {
		return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: %w", err)
	}
	return res, nil
}

// solvingSetResident is solvingSet on columns already on the device (c: its data stays), for
// the benchmark that times the one-device path without its upload (the distributed nodes'
// partitions are uploaded before their timer too). The caller has checked c's values finite.
func (d *Device) solvingSetResident(c *Columns, p SolvingSetParams) (SolvingSetResult, error) {
	b := ssBuffers{x: cu.DevicePtr(c.ptr)}
	res, err := d.runSolvingSet(&b, nil, c.rows, c.dims, p)
	b.x = 0 // c's, not the run's
	err = errors.Join(err, d.do(b.free))
	if err != nil {
		return SolvingSetResult{}, fmt.Errorf("gpukern.SolvingSet: %w", err)
	}
	return res, nil
}

// runSolvingSet is the host loop. It holds the device (do) once for the set-up
// and once per iteration rather than for the whole run, so that a stream's scoring calls (a
// batch every millisecond or so) are served between iterations instead of waiting for the whole
// build (227 ms at W = 1M: issue 12 item 5).
func (d *Device) runSolvingSet(b *ssBuffers, cols [][]float32, rows, dims int, p SolvingSetParams) (SolvingSetResult, error) {
	var res SolvingSetResult
	var iterate func() (bool, error)
	if err := d.do(func() (err error) {
		iterate, err = d.startSolvingSet(b, cols, rows, dims, p, &res)
		return err
	}); err != nil {
		return SolvingSetResult{}, err
	}
	for {
		var more bool
		if err := d.do(func() (err error) {
			more, err = iterate()
			return err
		}); err != nil {
			return SolvingSetResult{}, err
		}
		if !more {
			return res, nil
		}
	}
}

// startSolvingSet uploads the data (unless b.x holds it), allocates the buffers and initialises the heaps; iterate runs
// one iteration (false when it was the last, with *res set). Inside do only, both.
func (d *Device) startSolvingSet(b *ssBuffers, cols [][]float32, rows, dims int, p SolvingSetParams, res *SolvingSetResult) (iterate func() (bool, error), err error) {
	k, m := p.K, min(p.M, rows)
	N, D, K, M := int64(rows), int64(dims), int64(k), int64(m)
	blocks := (rows + ssSelectSlice - 1) / ssSelectSlice
	take := min(m, ssSelectSlice)
	if b.x == 0 { // else resident (solvingSetResident)
		if b.x, err = uploadCols(d, "data", cols, rows); err != nil {
			return nil, err
		}
	}
	// One allocation for what every iteration downloads: m weights, m done flags, the last
	// selection level's take keys and take indices.
	wdW, finW := wdWords(m), finWords(take)
	allocs := []struct {
		p     *cu.DevicePtr
		what  string
		bytes int64
	}{
		{&b.heap, "LNN heaps", N * K * 4}, {&b.ub, "UB", N * 8}, {&b.state, "state", N * 4},
		{&b.cand, "candidates", M * 4}, {&b.candX, "candidate coordinates", M * D * 4},
		{&b.candHeap, "LNNC heaps", M * K * 4}, {&b.candUB, "UB_C", M * 8},
		{&b.weight, "weights, done flags and selection", int64(wdW+finW) * 8}, {&b.distM, "distance matrix", M * N * 4},
		{&b.selKey, "selection keys", int64(blocks*take) * 8}, {&b.selIdx, "selection indices", int64(blocks*take) * 4},
	}
	for _, a := range allocs {
		if *a.p, err = alloc(a.what, a.bytes); err != nil {
			return nil, err
		}
	}
	b.candDone, b.selFin, b.views = b.weight+cu.DevicePtr(M*8), b.weight+cu.DevicePtr(wdW*8), true
	if err := b.allocSelect2(blocks, take); err != nil {
		return nil, err
	}
	if err := b.allocPart(m, k); err != nil {
		return nil, err
	}
	margin := p.Margin
	if err := launchParams(d, "ss_init", [3]int{(rows + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
		&ssInitParams{Heap: uint64(b.heap), UB: uint64(b.ub), State: uint64(b.state), N: N, K: K}); err != nil {
		return nil, err
	}
	out := p.Out
	var weights []Outlier
	var sset []int
	cand := slices.Clone(p.First)
	cand32 := make([]int32, m)
	// host copy of the weight allocation
	hostRes := make([]float64, wdW+finW)
	w, done := hostRes[:m], unsafe.Slice((*int32)(unsafe.Pointer(&hostRes[m])), m)
	finKeys, finIdx := hostRes[wdW:wdW+take], unsafe.Slice((*int32)(unsafe.Pointer(&hostRes[wdW+take])), take)
	devCand := cu.DevicePtr(0) // the candidates on the device (the sorted last list), else 0: upload
	keys := make([]float64, blocks*take)
	idx := make([]int32, blocks*take)
	iter := 0
	return func() (bool, error) {
		if len(cand) == 0 {
			r, err := finish(weights, out, p.N, sset, iter)
			*res = r
			return false, err
		}
		iter++
		nc := len(cand)
		NC := int64(nc)
		sset = append(sset, cand...)
		minOUT := out.Min()
		candPtr := devCand
		if candPtr == 0 {
			for j, c := range cand {
				cand32[j] = int32(c)
			}
			if err := cu.MemcpyHtoD(b.cand, unsafePtr32(cand32), NC*4); err != nil {
				return false, fmt.Errorf("iteration %d: cuMemcpyHtoD(candidates): %w", iter, err)
			}
			d.toDevice.Add(NC * 4)
			candPtr = b.cand
		}
		// Steps a-c, in order, then e and f (the selection) with this iteration's starting
		// minOUT: it prunes a subset of what step d's minOUT prunes, and as pruning is monotone in
		// UB the m best under the new minOUT are the m best under the old less the pruned suffix
		// (prunedPrefix), so the selection need not wait for the host's step d. The first
		// failure stops the iteration.
		steps := []func() error{
			func() error {
				return launchParams(d, "ss_gather", ssGatherGrid(nc), ssGatherBlock, 0, &ssGatherParams{
					X: uint64(b.x), N: N, Dims: D, Heap: uint64(b.heap), K: K, Cand: uint64(candPtr), Nc: NC,
					State: uint64(b.state), CandX: uint64(b.candX), CandHeap: uint64(b.candHeap)})
			},
			func() error { return launchCtoc(d, b, nc, dims, k, margin, minOUT) },
			func() error { return launchDtoc(d, b, rows, dims, nc, k, margin, minOUT) },
			func() error {
				return launchCandNN(d, b, rows, nc, ssCandSlices(rows, nc), k, margin, minOUT, b.weight, 0)
			},
		}
		var L int
		var lk, li cu.DevicePtr
		var fin bool
		if err := d.spanned("ss_iteration", func() (err error) {
			for _, step := range steps {
				if err := step(); err != nil {
					return err
				}
			}
			L, lk, li, fin, err = selectLaunch(d, b, rows, blocks, m, take, margin, minOUT)
			return err
		}); err != nil {
			return false, fmt.Errorf("iteration %d: %w", iter, err)
		}
		if fin { // sorted on the device, downloaded with the weights in one copy
			if err := download(d, "weights, done flags and selection", hostRes, b.weight); err != nil {
				return false, fmt.Errorf("iteration %d: %w", iter, err)
			}
		} else {
			if err := download(d, "weights and done flags", hostRes[:m+(nc+1)/2], b.weight); err != nil {
				return false, fmt.Errorf("iteration %d: %w", iter, err)
			}
			if err := download(d, "selection keys", keys[:L], lk); err != nil {
				return false, fmt.Errorf("iteration %d: %w", iter, err)
			}
			if err := download(d, "selection indices", idx[:L], li); err != nil {
				return false, fmt.Errorf("iteration %d: %w", iter, err)
			}
		}
		// Step d: a candidate that is not done met every point: its weight is exact. A done one
		// has UB_C * margin < minOUT, so on the CPU its (exact or partial) weight would not change
		// OUT and would fall below w*: leaving it out changes nothing.
		for j := range nc {
			if done[j] == 0 {
				weights = append(weights, Outlier{Row: cand[j], Weight: w[j]})
				out.Offer(w[j])
			}
		}
		minOUT = out.Min()
		// The next candidates: the m active points with the largest UB (key descending, index
		// ascending), less those the new minOUT prunes.
		if fin {
			n := prunedPrefix(finKeys, margin, minOUT)
			cand = cand[:0]
			for _, r := range finIdx[:n] {
				cand = append(cand, int(r))
			}
			devCand = b.selFin + cu.DevicePtr(take*8)
			return true, nil
		}
		var ck []float64
		cand, ck = topByKey(keys[:L], idx[:L], m)
		cand = cand[:prunedPrefix(ck, margin, minOUT)]
		devCand = 0
		return true, nil
	}, nil
}
