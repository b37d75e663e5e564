package solvingset

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// The distributed (lazy) solving set (ALGORITHMS.md §1, thesis ch. 7): a supervisor holds S,
// OUT and minOUT; each node holds a partition D_j of the rows. Per iteration the supervisor
// broadcasts the candidates (which came out of their nodes with the last proposals) with their
// neighbour lists, and in one hand-over (Node.Step) every node compares them with each other
// (step b, the same on every node) and its partition with them (step c, same pruning), and
// proposes its best active points; the supervisor merges each candidate's neighbour lists into
// its exact weight (step d), updates OUT, and takes the next m candidates from the proposals
// (steps e, f). The top-n and w* are those of SolvingSet: every
// candidate meets every row of every node, and a weight is the canonical sum of the k smallest
// of all its distances, whichever node found them.
//
// Lazy merging: a node sends, per candidate, its local distances in ascending order but only
// the first ceil(k/J) of them (J nodes) at first; the supervisor asks a node for the rest of a
// candidate's list only where that node's last sent distance is below the merged k-th, i.e.
// where the k-th is not yet certain. Node is the contract; CPUNode is the reference node and
// gpukern's DistributedNode the device one.

// Node is one partition of D, driven by DistributedSolvingSet. Rows are local (0..Rows()-1);
// coordinates and neighbour lists are row-major (dims or k values per point). Methods are
// called by one goroutine at a time per node; different nodes run concurrently.
type Node interface {
	// Rows is the number of rows of the partition.
	Rows() int
	// Take moves local rows into S (they are never compared as data or selected again) and
	// returns their coordinates and neighbour lists LNN (k distances each, +Inf where fewer
	// than k are known, each a max-heap in the order the node keeps it: step b goes on with
	// replace-top from there, and UB_C is its plain sum in that order, so the supervisor hands
	// them on as they are). The supervisor calls it for the first candidates only; later ones
	// come with the last Step's Proposal and move into S with the next Step.
	Take(rows []int) (coords, lnn []float32, err error)
	// Step is one iteration's work on the node in one hand-over (a round trip per node and
	// iteration: each one is a barrier):
	//   - the local rows taken (this iteration's candidates the node proposed last time) move
	//     into S, as Take;
	//   - step b: the candidates (coords, their LNN in lnn) meet each other in index order, as
	//     one supervisor would; every node computes the same LNNC (lnnc, k values a candidate),
	//     so that step b costs the supervisor nothing;
	//   - step c: every row not in S meets every candidate (coords) unless the pair is pruned
	//     (both the row's UB and the candidate's bound, from LNNC, below minOUT, with
	//     PruneMargin), the rows' LNN are updated, and for each candidate j the node keeps its
	//     local distances below LNNC's k-th (Neighbours serves them); done[j] = the candidate's
	//     bound after step b, or its running bound on this node, fell below minOUT (it cannot
	//     be an outlier);
	//   - steps e and f: the rows not in S with UB >= minOUT (margin applied) are active; next
	//     is up to m of them with the largest UB (ties: lower row first), best first, with
	//     their coordinates and LNN.
	// The supervisor prunes next again with the minOUT it has when the next Step starts (the
	// step d before this Step's: the merge of this Step's lists runs beside the next Step): as
	// pruning is monotone in UB that leaves the m best under that minOUT (the selection need
	// not wait for step d).
	// Buffers: Step keeps neither taken, coords nor lnn after it returns (the supervisor reuses
	// them); done and next stay valid until the next Step, lnnc until the Step after next (it
	// is merged beside the next).
	Step(taken []int, coords, lnn []float32, minOUT float64, m int) (lnnc []float32, done []bool, next Proposal, err error)
	// Neighbours returns, for each candidate j of the last Step, its local distances kept
	// there from position from[j] on, ascending, at most count[j] of them (a count of 0 asks
	// nothing). The lists stay valid until the Step after the next one (the supervisor asks
	// right after a Step and merges them beside the next), the outer slice until the next call.
	Neighbours(from, count []int) ([][]float32, error)
}

// Proposal is a node's best active rows after a Step, best first (UB descending, lower row
// first): the supervisor takes the next candidates from every node's proposal.
type Proposal struct {
	Rows   []int     // local rows
	UB     []float64 // their upper bounds
	Coords []float32 // dims per row
	LNN    []float32 // k per row: the row's neighbour list as Take returns it (a max-heap)
}

// DistributedResult is the outcome of DistributedSolvingSet: Result, plus the traffic.
type DistributedResult struct {
	Result
	// ListValues counts the neighbour-list values the nodes sent in step d (lazy: fewer than
	// candidates x nodes x k).
	ListValues int64
	// Refetches counts the candidate lists asked again (the lazy merge's second round).
	Refetches int64
	// Phases is the supervisor's wall time per step, summed over the iterations.
	Phases DistributedPhases
}

// DistributedPhases is the wall time of each step of DistributedSolvingSet on the supervisor,
// summed over the iterations: each node step's time is that of the slowest node (the barrier),
// so the phases say where a run with more nodes stops scaling.
type DistributedPhases struct {
	Take     time.Duration // step a: the first candidates leave their nodes (later ones come with the proposals)
	Step     time.Duration // steps b, c, e and f on every node (Node.Step): the slowest node's
	NodeStep time.Duration // the nodes' mean Step: Step less this is the barrier's wait
	Merge    time.Duration // step d: the lists merged into weights (not lazy: beside the next Step, off the wall's path)
	Select   time.Duration // the nodes' proposals merged into the next candidates
}

// DistributedSolvingSet runs the distributed solving set over nodes holding consecutive
// partitions of the rows (node j holds global rows offset_j .. offset_j+Rows()-1, in order).
// p.Workers bounds the supervisor's goroutines for step d (0: GOMAXPROCS); nodes parallelise
// themselves.
func DistributedSolvingSet(nodes []Node, dims int, p Params, lazy bool) (DistributedResult, error) {
	if len(nodes) == 0 {
		return DistributedResult{}, errors.New("solvingset: no nodes")
	}
	offset := make([]int, len(nodes)+1)
	for j, nd := range nodes {
		offset[j+1] = offset[j] + nd.Rows()
	}
	rows := offset[len(nodes)]
	if err := p.Validate(rows); err != nil {
		return DistributedResult{}, err
	}
	k, m := p.K, min(p.M, rows)
	margin := PruneMargin(k)
	out := NewTopN(p.N)
	owner := func(g int) int { // the node holding global row g
		j, _ := slices.BinarySearch(offset, g+1)
		return j - 1
	}
	var res DistributedResult
	var weights []Outlier
	cand := FirstCandidates(rows, m, p.Seed)
	per := k
	if lazy {
		per = (k + len(nodes) - 1) / len(nodes)
	}
	// Step a for the first candidates: they leave their nodes with their coordinates and LNN.
	candX, lnnc := make([]float32, len(cand)*dims), make([]float32, len(cand)*k)
	t0 := time.Now()
	first := make([][]int, len(nodes)) // positions in cand, per owner node
	for t, g := range cand {
		first[owner(g)] = append(first[owner(g)], t)
	}
	run := newNodeRunner(nodes)
	defer run.close()
	err := run.each(func(j int, nd Node) error {
		if len(first[j]) == 0 {
			return nil
		}
		local := make([]int, len(first[j]))
		for i, t := range first[j] {
			local[i] = cand[t] - offset[j]
		}
		x, h, err := nd.Take(local)
		if err != nil {
			return err
		}
		for i, t := range first[j] {
			copy(candX[t*dims:(t+1)*dims], x[i*dims:(i+1)*dims])
			copy(lnnc[t*k:(t+1)*k], h[i*k:(i+1)*k])
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("solvingset: iteration 1: take: %w", err)
	}
	res.Phases.Take += time.Since(t0)
	taken := make([][]int, len(nodes)) // per node, the local rows of cand that Step moves into S
	var picks []pick
	iter := 0
	// The pipelined form (not lazy: every list whole, nothing asked again): an iteration's step d
	// runs beside the next iteration's node steps, so the next steps prune with the minOUT of
	// the step d before (smaller or equal: they prune less, never wrongly) and the next
	// candidates are cut with it too; the merge, 10-13 ms of a 4-GPU run at 10M x 10, leaves
	// the barrier's path (BENCHMARKS §4.3.3). The result is the same top-n and w*; the solving
	// set may hold a few more rows.
	pipelined := !lazy
	var pend *pendingMerge
	merge := func(pm *pendingMerge) error {
		ts := time.Now()
		ws, values, refetches, err := pm.finish(workerCount(p.Workers))
		if err != nil {
			return fmt.Errorf("solvingset: iteration %d: neighbour lists: %w", pm.iter, err)
		}
		res.ListValues += values
		res.Refetches += refetches
		for t, g := range pm.cand {
			if !pm.done[t] { // a done candidate's weight is below minOUT: it changes nothing
				weights = append(weights, Outlier{Row: g, Weight: ws[t]})
				out.Offer(ws[t])
			}
		}
		res.Phases.Merge += time.Since(ts)
		return nil
	}
	for len(cand) > 0 {
		iter++
		nc := len(cand)
		res.SolvingSet = append(res.SolvingSet, cand...)
		res.DistanceComputations += int64(len(nodes)) * int64(nc) * int64(nc-1) // step b, on every node
		minOUT := out.Min()
		t2 := time.Now()
		// Steps b, c, e and f on every node, concurrently, in one hand-over each. A candidate
		// that any node finds done is done.
		done := make([]bool, nc)
		var lnncB []float32 // LNNC after step b: node 0's (every node's is the same)
		props := make([]Proposal, len(nodes))
		var mu sync.Mutex
		var nodeStep time.Duration
		var merged chan error // the step d before, beside this step
		if pend != nil {
			merged = make(chan error, 1)
			go func(pm *pendingMerge) { merged <- merge(pm) }(pend)
			pend = nil
		}
		err = run.each(func(j int, nd Node) error {
			ts := time.Now()
			lb, dj, next, err := nd.Step(taken[j], candX, lnnc, minOUT, m)
			if err != nil {
				return err
			}
			took := time.Since(ts)
			if len(lb) != nc*k || len(dj) != nc || len(next.UB) != len(next.Rows) || len(next.Coords) != len(next.Rows)*dims || len(next.LNN) != len(next.Rows)*k {
				return fmt.Errorf("node %d: %d LNNC values and %d done flags for %d candidates, a proposal of %d rows with %d bounds, %d coordinates, %d LNN values",
					j, len(lb), len(dj), nc, len(next.Rows), len(next.UB), len(next.Coords), len(next.LNN))
			}
			if i := unordered(next); i > 0 { // (mergeProposals merges them as sorted lists)
				return fmt.Errorf("node %d: proposal not best first: row %d (UB %v) after row %d (UB %v)", j, next.Rows[i], next.UB[i], next.Rows[i-1], next.UB[i-1])
			}
			props[j] = next
			if j == 0 {
				lnncB = lb
			}
			mu.Lock()
			nodeStep += took
			for t := range nc {
				done[t] = done[t] || dj[t]
			}
			mu.Unlock()
			return nil
		})
		if merged != nil { // (waited for on an error too: it writes res and weights)
			err = errors.Join(err, <-merged)
		}
		if err != nil {
			return res, fmt.Errorf("solvingset: iteration %d: step: %w", iter, err)
		}
		t3 := time.Now()
		res.Phases.Step += t3.Sub(t2)
		res.Phases.NodeStep += nodeStep / time.Duration(len(nodes))
		// Step d: merge each candidate's lists into its exact weight: the lists asked now,
		// before the next step, merged beside it when pipelined.
		finish, err := startMerge(nodes, lnncB, done, k, per)
		if err != nil {
			return res, fmt.Errorf("solvingset: iteration %d: neighbour lists: %w", iter, err)
		}
		pend = &pendingMerge{iter: iter, cand: cand, done: done, finish: finish}
		if !pipelined {
			if err := merge(pend); err != nil {
				return res, err
			}
			pend = nil
		}
		minOUT = out.Min()
		t4 := time.Now()
		// Steps e, f: the next candidates are the m active points with the largest UB: the
		// best m of the proposals, less the suffix the new minOUT prunes.
		picks = mergeProposals(picks[:0], props, offset, m)
		for i, pk := range picks {
			if pk.ub*margin < minOUT {
				picks = picks[:i]
				break
			}
		}
		cand = cand[:0:0] // (the pending merge keeps the last one)
		// The nodes keep neither coords nor lnn after their Step: the buffers are reused, as
		// fresh ones cost heap pages never touched before each iteration (no GC runs in a build).
		candX, lnnc = grow(candX, len(picks)*dims), grow(lnnc, len(picks)*k)
		for j := range taken {
			taken[j] = taken[j][:0]
		}
		for t, pk := range picks {
			cand = append(cand, pk.row)
			taken[pk.j] = append(taken[pk.j], pk.row-offset[pk.j])
			pr := props[pk.j]
			copy(candX[t*dims:(t+1)*dims], pr.Coords[pk.i*dims:(pk.i+1)*dims])
			copy(lnnc[t*k:(t+1)*k], pr.LNN[pk.i*k:(pk.i+1)*k])
		}
		res.Phases.Select += time.Since(t4)
	}
	if pend != nil { // the last iteration's step d
		if err := merge(pend); err != nil {
			return res, err
		}
	}
	if out.Len() < p.N {
		return res, fmt.Errorf("solvingset: internal error: %d weights for n=%d", out.Len(), p.N)
	}
	res.WStar = out.Min()
	for _, o := range weights {
		if o.Weight >= res.WStar {
			res.Outliers = append(res.Outliers, o)
		}
	}
	sortOutliers(res.Outliers)
	res.Iterations = iter
	return res, nil
}

// startMerge is step d: for every candidate not done, the k smallest of LNNC (after step b)
// and every node's local distances, summed canonically. Each node first sends per values per
// candidate (k when not lazy), asked now: views that a GPU node keeps until its Step after next,
// so that finish can run beside the next Step (DistributedSolvingSet's pipelined form). finish
// does the rest: a node whose list may hold more (it sent all it was asked) and whose last
// value is below the merged k-th is asked for the rest of that candidate's list (values it has
// not sent are >= its last one, so otherwise none of them can enter the k smallest, and the
// k-th, hence the weight, is certain), and the weights.
func startMerge(nodes []Node, lnnc []float32, done []bool, k, per int) (finish func(workers int) (weights []float64, values, refetches int64, err error), err error) {
	nc := len(done)
	var values int64
	lists := make([][][]float32, len(nodes)) // [node][candidate] ascending
	complete := make([][]bool, len(nodes))   // [node][candidate]: the whole list was sent
	ask := func(j int, from, count []int) error {
		got, err := nodes[j].Neighbours(from, count)
		if err != nil {
			return err
		}
		for t := range nc {
			if count[t] == 0 {
				continue
			}
			if lists[j][t] == nil {
				lists[j][t] = got[t][:len(got[t]):len(got[t])] // a refetch's append copies
			} else {
				lists[j][t] = append(lists[j][t], got[t]...)
			}
			values += int64(len(got[t]))
			complete[j][t] = len(got[t]) < count[t] || len(lists[j][t]) >= k
		}
		return nil
	}
	from, count := make([]int, nc), make([]int, nc)
	for t := range nc {
		if !done[t] {
			count[t] = per
		}
	}
	for j := range nodes {
		lists[j], complete[j] = make([][]float32, nc), make([]bool, nc)
		if err := ask(j, from, count); err != nil {
			return nil, err
		}
	}
	return func(workers int) ([]float64, int64, int64, error) {
		weights, refetches, err := mergeAsked(nodes, lists, complete, ask, lnnc, done, k, per, workers)
		return weights, values, refetches, err // (values: ask's count, refetches included)
	}, nil
}

// mergeAsked is step d after its first round (startMerge): lists and complete as ask left them (a
// refetch asks again through ask).
func mergeAsked(nodes []Node, lists [][][]float32, complete [][]bool, ask func(j int, from, count []int) error,
	lnnc []float32, done []bool, k, per, workers int) (weights []float64, refetches int64, err error) {
	nc := len(done)
	weights = make([]float64, nc)
	// kSmallest sets merged to the k smallest of candidate t's LNNC and the lists sent so far:
	// LNNC sorted, then merged with each node's ascending list in turn, truncated to k (two-way
	// merges: a k-way merge over the heads was 2 µs a candidate at 4 nodes).
	kSmallest := func(t int, merged, spare []float32) ([]float32, []float32) {
		merged = append(merged[:0], lnnc[t*k:(t+1)*k]...)
		slices.Sort(merged)
		for j := range nodes {
			spare = mergeK(spare, merged, lists[j][t], k)
			merged, spare = spare, merged
		}
		return merged, spare
	}
	canonical := func(merged []float32) float64 { // ascending float64 sum
		var s float64
		for _, v := range merged[:k] {
			s += float64(v)
		}
		return s
	}
	if per >= k {
		// Every list whole: no candidate asks again, so the candidates merge on every core (the
		// lists were written on the nodes' cores: reading them is mostly cache misses, 0.2 ms an
		// iteration at 4 nodes on one core).
		parallelFor(workers, nc, 8, func(_, lo, hi int) {
			merged, spare := make([]float32, 0, k), make([]float32, 0, k)
			for t := lo; t < hi; t++ {
				if !done[t] {
					merged, spare = kSmallest(t, merged, spare)
					weights[t] = canonical(merged)
				}
			}
		})
		return weights, 0, nil
	}
	merged, spare := make([]float32, 0, k), make([]float32, 0, k)
	for t := range nc {
		if done[t] {
			continue
		}
		for {
			merged, spare = kSmallest(t, merged, spare)
			kth := merged[k-1]
			var more []int
			for j := range nodes {
				if l := lists[j][t]; !complete[j][t] && len(l) > 0 && l[len(l)-1] < kth {
					more = append(more, j)
				}
			}
			if len(more) == 0 {
				weights[t] = canonical(merged)
				break
			}
			for _, j := range more {
				f, c := make([]int, nc), make([]int, nc)
				f[t], c[t] = len(lists[j][t]), k-len(lists[j][t])
				if err := ask(j, f, c); err != nil {
					return nil, 0, err
				}
				complete[j][t] = true
				refetches++
			}
		}
	}
	return weights, refetches, nil
}

// pendingMerge is an iteration's step d, its lists asked (startMerge), to be merged.
type pendingMerge struct {
	iter   int
	cand   []int // the iteration's candidates (global rows)
	done   []bool
	finish func(workers int) (weights []float64, values, refetches int64, err error)
}

// mergeK sets dst to the k smallest of the ascending a and b, ascending.
func mergeK(dst, a, b []float32, k int) []float32 {
	dst = dst[:0]
	i, j := 0, 0
	for len(dst) < k {
		switch {
		case i < len(a) && (j >= len(b) || a[i] <= b[j]):
			dst = append(dst, a[i])
			i++
		case j < len(b):
			dst = append(dst, b[j])
			j++
		default:
			return dst
		}
	}
	return dst
}

// nodeRunner runs a function on every node concurrently, node 0 on the calling goroutine and
// the others on goroutines kept for the run. A kept goroutine spins (yielding) for its next job
// for up to nodeSpin before it blocks, and the caller spins as long for the others to finish:
// the supervisor's merge and pick between two steps take tens of microseconds, and a goroutine
// started (or a blocked one woken) every iteration cost a thread wake-up on the barrier's path
// (the barrier's wait was 11 ms of 1.09 s at 2 GPUs, §4.3.1).
type nodeRunner struct {
	nodes []Node
	jobs  []chan func(j int, nd Node) error // per node but 0
	errs  []chan error
}

// nodeSpin bounds a spin: longer than the supervisor's work between steps, short against a
// step (milliseconds), so a goroutine waiting for a slow node soon blocks.
const nodeSpin = 200 * time.Microsecond

func newNodeRunner(nodes []Node) *nodeRunner {
	r := &nodeRunner{nodes: nodes, jobs: make([]chan func(int, Node) error, len(nodes)), errs: make([]chan error, len(nodes))}
	for j := 1; j < len(nodes); j++ {
		r.jobs[j], r.errs[j] = make(chan func(int, Node) error, 1), make(chan error, 1)
		go func() {
			for {
				fn, ok := spinRecv(r.jobs[j])
				if !ok {
					return
				}
				r.errs[j] <- fn(j, nodes[j])
			}
		}()
	}
	return r
}

// each runs fn for every node and returns the errors joined.
func (r *nodeRunner) each(fn func(j int, nd Node) error) error {
	for j := 1; j < len(r.nodes); j++ {
		r.jobs[j] <- fn
	}
	errs := make([]error, len(r.nodes))
	errs[0] = fn(0, r.nodes[0])
	for j := 1; j < len(r.nodes); j++ {
		errs[j], _ = spinRecv(r.errs[j])
	}
	return errors.Join(errs...)
}

// close ends the kept goroutines.
func (r *nodeRunner) close() {
	for j := 1; j < len(r.nodes); j++ {
		close(r.jobs[j])
	}
}

// spinRecv receives from ch, polling (and yielding) for up to nodeSpin before it blocks.
func spinRecv[T any](ch chan T) (T, bool) {
	start := time.Now()
	for {
		select {
		case v, ok := <-ch:
			return v, ok
		default:
		}
		if time.Since(start) > nodeSpin {
			v, ok := <-ch
			return v, ok
		}
		runtime.Gosched()
	}
}

// pick is a proposed row: its global row, UB, and where it is (node j, position i in its
// proposal).
type pick struct {
	row  int
	ub   float64
	j, i int
}

// unordered is the first position of p that does not follow its predecessor best first (UB
// descending, lower row first; a NaN UB is out of order), or 0 when p is in order.
func unordered(p Proposal) int {
	for i := 1; i < len(p.Rows); i++ {
		if u, v := p.UB[i], p.UB[i-1]; !(u < v || (u == v && p.Rows[i] > p.Rows[i-1])) {
			return i
		}
	}
	return 0
}

// mergeProposals appends to picks the best m of the nodes' proposals (each best first: UB
// descending, lower row first), in that order, by merging them (node j's local rows are global
// rows offset[j]+r, so each proposal's order is the global one).
func mergeProposals(picks []pick, props []Proposal, offset []int, m int) []pick {
	at := make([]int, len(props))
	for n := 0; n < m; n++ {
		best := -1
		for j, pr := range props {
			if at[j] == len(pr.Rows) {
				continue
			}
			if best < 0 {
				best = j
				continue
			}
			u, v := pr.UB[at[j]], props[best].UB[at[best]]
			if u > v || (u == v && offset[j]+pr.Rows[at[j]] < offset[best]+props[best].Rows[at[best]]) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		i := at[best]
		picks = append(picks, pick{offset[best] + props[best].Rows[i], props[best].UB[i], best, i})
		at[best]++
	}
	return picks
}
