package solvingset

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/outlierd/outlierd/internal/algo/euclid"
)

// dmBytes is the size of the distance matrix of one chunk (candidates x chunk rows, float32).
// Small enough to stay in the shared L3 between phase 1, which writes it, and phase 2, which
// reads it; large enough that the two barriers per chunk cost nothing measurable.
const dmBytes = 4 << 20

// SolvingSet runs the SolvingSet algorithm of ALGORITHMS.md §1 and returns the exact top-n
// outliers (every row with weight >= w*), w* and the solving set S.
//
// Parallel structure (the papers' split loop, SolvingSet-MV): the rows not yet in S are
// processed in chunks. Phase 1 splits the chunk's rows over the workers: each row updates its
// own neighbour heap LNN against all candidates and writes its squared distances into the
// chunk's distance matrix dm (candidate-major), or skips the pair when
// max(UB(p), UB_C(c)) < minOUT. Phase 2 splits the candidates over the workers: each candidate
// updates its heap LNNC from its own row of dm. No heap is ever written by two workers, so
// there are no locks. Between chunks the candidates' UB_C shrink, so pruning tightens within an
// iteration as it does in the sequential algorithm; a candidate whose UB_C falls below minOUT
// stops scanning (the papers' S-MS early exit).
//
// progress, when not nil, is called after every iteration with the iteration number (from 1)
// and the number of points still active.
func SolvingSet(cols [][]float32, p Params, progress func(iter, active int)) (Result, error) {
	rows, err := validateCols(cols)
	if err != nil {
		return Result{}, err
	}
	if err := p.Validate(rows); err != nil {
		return Result{}, err
	}
	s := newSolver(cols, p)
	return s.run(progress)
}

// solver holds the state of one SolvingSet run. Rows not yet in S live at positions
// [0, live) of the working arrays; a row that becomes a candidate is swapped out to the end
// (the GPU version's Init kernel does the same), so phase 1 never tests membership in S.
type solver struct {
	dims, k, n, m, workers int
	margin                 float64

	x     [][]float32 // working copy of the data, column-major, by position
	row   []int32     // original row of each position
	heap  []float32   // LNN: k distances per position, max-heap, +Inf until full
	loose []bool      // the LNN holds its maximum at [0] but is not heap-ordered (mergePending)
	ub    []float64   // UB: plainSum of heap
	live  int         // positions [0, live) are D \ S

	// Current candidates C.
	cand     []int32   // original rows
	candX    []float32 // coordinates, candidate-major (cand j at [j*dims:])
	candHeap []float32 // LNNC, k per candidate
	candUB   []float64
	candDone []bool // UB_C < minOUT: c cannot be an outlier; its LNNC need not be completed

	out     *TopN // the n largest exact weights so far
	minOUT  float64
	weights []Outlier // every candidate with its weight (exact when >= final w*)
	sset    []int

	dm      []float32 // distance matrix of a chunk: dm[j*chunk + i], squared distances
	chunk   int
	scratch []*tileScratch
	counts  []counter
}

// tileScratch is one worker's phase-1 scratch.
type tileScratch struct {
	t2   [knnTileSize]float32
	acc  [knnTileSize]float32
	cnt  [knnTileSize]int32 // queued distances per row
	pend []float32          // m queued squared distances per row of the tile
	live []int32
	buf  []uint32 // k + m distances of a merge, as bits (selectSmallestBits)
	sort []float32
	topm []selItem
}

func newSolver(cols [][]float32, p Params) *solver {
	rows := len(cols[0])
	s := &solver{
		dims: len(cols), k: p.K, n: p.N, m: min(p.M, rows),
		workers: max(1, workerCount(p.Workers)),
		margin:  PruneMargin(p.K),
		live:    rows,
	}
	s.x = make([][]float32, s.dims)
	for j := range cols {
		s.x[j] = slices.Clone(cols[j])
	}
	s.row = make([]int32, rows)
	for i := range s.row {
		s.row[i] = int32(i)
	}
	s.heap = make([]float32, rows*s.k)
	s.loose = make([]bool, rows)
	s.ub = make([]float64, rows)
	s.counts = make([]counter, s.workers)
	s.scratch = make([]*tileScratch, s.workers)
	for w := range s.scratch {
		s.scratch[w] = &tileScratch{
			live: make([]int32, 0, knnTileSize), pend: make([]float32, knnTileSize*s.m),
			sort: make([]float32, s.k), buf: make([]uint32, 0, s.k+s.m),
		}
	}
	parallelFor(s.workers, rows, 1<<16, func(_, lo, hi int) {
		fillInf(s.heap[lo*s.k : hi*s.k])
		for i := lo; i < hi; i++ {
			s.ub[i] = math.Inf(1)
		}
	})
	// Chunk rows: a multiple of the tile, dm about dmBytes, at least one tile per worker.
	c := dmBytes / 4 / s.m
	c = max(c, knnTileSize*s.workers)
	s.chunk = (c + knnTileSize - 1) / knnTileSize * knnTileSize
	s.chunk = min(s.chunk, (rows+knnTileSize-1)/knnTileSize*knnTileSize)
	s.dm = make([]float32, s.m*s.chunk)
	s.candX = make([]float32, s.m*s.dims)
	s.candHeap = make([]float32, s.m*s.k)
	s.candUB = make([]float64, s.m)
	s.candDone = make([]bool, s.m)
	s.out = NewTopN(p.N)
	s.setCandidates(FirstCandidates(rows, s.m, p.Seed))
	return s
}

// FirstCandidates is step 1 of SolvingSet: the first m candidates (1 <= m <= rows), drawn at
// random by a partial Fisher-Yates shuffle from a PCG stream (seed, 0x5851f42d4c957f2d). It
// takes O(m) memory: only the displaced positions are remembered. The GPU twin (gpukern) draws
// its first candidates here, so both start from the same solving set.
func FirstCandidates(rows, m int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	moved := make(map[int]int, m)
	at := func(i int) int {
		if v, ok := moved[i]; ok {
			return v
		}
		return i
	}
	first := make([]int, m)
	for i := range m {
		j := i + r.IntN(rows-i)
		vi, vj := at(i), at(j)
		moved[i], moved[j] = vj, vi
		first[i] = vj
	}
	return first
}

// pruned reports that an upper bound cannot reach minOUT (see PruneMargin). While OUT holds
// fewer than n weights minOUT is 0 and nothing is pruned.
func (s *solver) pruned(ub float64) bool { return ub*s.margin < s.minOUT }

// setCandidates moves the points at the given positions out of D \ S into C: their
// coordinates and heaps (LNNC starts as LNN: distances to earlier S are already known) go to
// the candidate arrays, and the positions are filled from the end of the live range.
func (s *solver) setCandidates(pos []int) {
	nc := len(pos)
	s.cand = s.cand[:0]
	for j, q := range pos {
		s.cand = append(s.cand, s.row[q])
		s.sset = append(s.sset, int(s.row[q]))
		for d := range s.dims {
			s.candX[j*s.dims+d] = s.x[d][q]
		}
		ch := s.candHeap[j*s.k : (j+1)*s.k]
		copy(ch, s.heap[q*s.k:(q+1)*s.k])
		if s.loose[q] {
			heapify(ch) // LNNC is updated by heapReplaceTop
		}
	}
	// Remove in descending position order: the last live position is then never one still to
	// be removed.
	desc := slices.Clone(pos)
	slices.SortFunc(desc, func(a, b int) int { return cmp.Compare(b, a) })
	k := s.k
	for _, q := range desc {
		last := s.live - 1
		if q != last {
			for d := range s.dims {
				s.x[d][q] = s.x[d][last]
			}
			s.row[q] = s.row[last]
			copy(s.heap[q*k:(q+1)*k], s.heap[last*k:(last+1)*k])
			s.loose[q] = s.loose[last]
			s.ub[q] = s.ub[last]
		}
		s.live--
	}
	s.candUB = s.candUB[:nc]
	s.candDone = s.candDone[:nc]
}

func (s *solver) run(progress func(iter, active int)) (Result, error) {
	iter := 0
	for len(s.cand) > 0 {
		iter++
		s.candidatesVsCandidates()
		for c0 := 0; c0 < s.live; c0 += s.chunk {
			c1 := min(c0+s.chunk, s.live)
			s.phase1(c0, c1)
			s.phase2(c1 - c0)
		}
		// Step d: every candidate has met every point; offer its weight to OUT.
		scratch := s.scratch[0].sort
		for j, r := range s.cand {
			w := canonicalWeight(s.candHeap[j*s.k:(j+1)*s.k], scratch)
			s.weights = append(s.weights, Outlier{Row: int(r), Weight: w})
			s.out.Offer(w)
		}
		s.minOUT = s.out.Min()
		// Steps e, f: active = UB >= minOUT; next C = the m active points with largest UB.
		next, active := s.selectNext()
		if progress != nil {
			progress(iter, active)
		}
		s.setCandidates(next)
	}
	if s.out.Len() < s.n {
		return Result{}, fmt.Errorf("solvingset: internal error: %d weights for n=%d", s.out.Len(), s.n)
	}
	wstar := s.out.Min()
	var outliers []Outlier
	for _, o := range s.weights {
		if o.Weight >= wstar {
			outliers = append(outliers, o)
		}
	}
	sortOutliers(outliers)
	// (A pair of candidates is evaluated from both sides, candidatesVsCandidates, but counted
	// once: the count is of pairs, comparable with BruteForce's N(N-1)/2.)
	return Result{
		Outliers:             outliers,
		WStar:                wstar,
		SolvingSet:           s.sset,
		Iterations:           iter,
		DistanceComputations: sumCounters(s.counts),
	}, nil
}

// candidatesVsCandidates is step b: LNNC(c) meets every other current candidate. Each
// candidate scans all others and writes only its own heap, so workers need no locks; the price
// is that each pair is evaluated twice (m^2 distances, negligible against m*|D|).
func (s *solver) candidatesVsCandidates() {
	nc, dims, k := len(s.cand), s.dims, s.k
	parallelFor(s.workers, nc, 8, func(w, lo, hi int) {
		var cnt int64
		for j := lo; j < hi; j++ {
			cj := s.candX[j*dims : (j+1)*dims]
			h := s.candHeap[j*k : (j+1)*k]
			for i := range nc {
				if i == j {
					continue
				}
				ci := s.candX[i*dims : (i+1)*dims]
				var d2 float32
				for d := range dims {
					t := cj[d] - ci[d]
					d2 += float32(t * t)
				}
				if d := sqrt32(d2); d < h[0] {
					heapReplaceTop(h, d)
				}
			}
			cnt += int64(nc - 1 - j) // the pairs (j, i > j): each pair once, both sides evaluated
			s.candUB[j] = plainSum(h)
			s.candDone[j] = s.pruned(s.candUB[j])
		}
		s.counts[w].n += cnt
	})
}

// phase1 is step c for the rows at positions [c0, c1): each row against every candidate,
// parallel over tiles of rows.
func (s *solver) phase1(c0, c1 int) {
	parallelFor(s.workers, c1-c0, knnTileSize, func(w, lo, hi int) {
		s.counts[w].n += s.tile(s.scratch[w], c0, c0+lo, c0+hi)
	})
}

// tile runs phase 1 for positions [a, b) of the chunk starting at c0.
//
// A row's LNN is not updated distance by distance: every distance that passes the row's
// threshold at the start of the tile is queued (as a squared distance) and the queue is merged
// into the heap once, after the row has met every candidate (mergePending). Candidates are the
// points of largest UB and sit together in the sparse regions, so a row near them typically
// takes most of the m distances into its heap in one iteration (on G2D half of all inserts come
// in batches of more than 60 per row and iteration); one selection and one heapify replace those
// sift-downs. Rows whose heap is not full yet (the first iteration) have threshold +Inf and
// take the same path.
func (s *solver) tile(sc *tileScratch, c0, a, b int) int64 {
	dims := s.dims
	nt := b - a
	t2, acc, cnt := sc.t2[:nt], sc.acc[:nt], sc.cnt[:nt]
	sc.live = sc.live[:0]
	for i := range nt {
		cnt[i] = 0
		if s.pruned(s.ub[a+i]) {
			// Inactive: its LNN need not improve (it can never become a candidate, and its UB
			// stays an upper bound of w_k(p, S)); a negative threshold rejects every distance.
			t2[i] = -1
		} else {
			// +Inf while the heap is not full: every distance is queued.
			t2[i] = sq32(s.heap[(a+i)*s.k])
			sc.live = append(sc.live, int32(i))
		}
	}
	off := a - c0
	var count int64
	for j := range s.cand {
		cj := s.candX[j*dims : (j+1)*dims]
		if s.candDone[j] {
			// max(UB(p), UB_C(c)) < minOUT unless p is live: only live rows meet c, and phase 2
			// ignores c, so nothing is written to dm.
			if len(sc.live) == 0 {
				continue
			}
			if 4*len(sc.live) >= nt {
				// Most rows are live: a dense pass is cheaper than gathering. The rows that are
				// not live have t2 = -1 and reject their distance; all nt are counted.
				s.pass(acc, a, b, cj, t2, sc)
				count += int64(nt)
				continue
			}
			for _, i := range sc.live {
				d2 := euclid.Squared(s.x, a+int(i), cj)
				if d2 <= t2[i] {
					sc.pend[int(i)*s.m+int(cnt[i])] = d2
					cnt[i]++
				}
			}
			count += int64(len(sc.live))
			continue
		}
		count += int64(nt)
		s.pass(s.dm[j*s.chunk+off:j*s.chunk+off+nt], a, b, cj, t2, sc)
	}
	for _, i := range sc.live {
		if c := int(cnt[i]); c > 0 {
			q := a + int(i)
			h := s.heap[q*s.k : (q+1)*s.k]
			if mergePending(h, sc.pend[int(i)*s.m:int(i)*s.m+c], sc, &s.loose[q]) {
				s.ub[q] = plainSum(h)
			}
		}
	}
	return count
}

// mergeBatch is the queue length from which mergePending rebuilds a heap by selection rather
// than inserting one distance at a time: below it the inserts (each ~log2(k) levels) cost less
// than a selection over k + len(pend) values. Not tuned: on G2D the one-by-one path takes under
// 2% of the run either way.
const mergeBatch = 12

// mergePending gives the LNN h the k = len(h) smallest of its distances and the square roots of
// the queued squared distances pend, and reports whether h may have changed. Any exact selection
// gives h the multiset that inserting the distances one by one would give: the k smallest
// values of the union (sqrt32 is monotonic, and a value that ties the top is the same value
// whichever copy is kept). Only the storage order differs, which UB tolerates (PruneMargin holds
// for a plain sum in any order). A short queue is inserted one by one (each insert costs a
// sift-down of ~log2(k) levels); a long one is selected with the heap's finite entries
// (O(k + len(pend))).
//
// After a selection h is left loose (*loose = true): h[0] is its maximum, the threshold every
// pass reads, but the rest is in no order. The next selection does not care, so a row merged by
// selection in every iteration never pays for a heapify; only the one-by-one path (and a row
// becoming a candidate, see setCandidates) restores the heap order first.
func mergePending(h, pend []float32, sc *tileScratch, loose *bool) bool {
	if len(pend) < mergeBatch {
		if *loose {
			heapify(h)
			*loose = false
		}
		changed := false
		for _, d2 := range pend {
			if d := sqrt32(d2); d < h[0] {
				heapReplaceTop(h, d)
				changed = true
			}
		}
		return changed
	}
	k := len(h)
	buf := sc.buf[:0]
	if math.IsInf(float64(h[0]), 1) {
		// Not full yet (h[0], the maximum, is +Inf): only the finite entries are distances.
		for _, v := range h {
			if !math.IsInf(float64(v), 1) {
				buf = append(buf, math.Float32bits(v))
			}
		}
	} else {
		for _, v := range h {
			buf = append(buf, math.Float32bits(v))
		}
	}
	for _, d2 := range pend {
		buf = append(buf, math.Float32bits(sqrt32(d2)))
	}
	sc.buf = buf
	if len(buf) < k {
		// Still not full (m < k): a heap with its +Inf padding.
		for i, v := range buf {
			h[i] = math.Float32frombits(v)
		}
		fillInf(h[len(buf):])
		heapify(h)
		*loose = false
		return true
	}
	selectSmallestBits(buf, k)
	// buf[k-1] is the largest of the k selected: it goes to the top.
	buf[0], buf[k-1] = buf[k-1], buf[0]
	for i, v := range buf[:k] {
		h[i] = math.Float32frombits(v)
	}
	*loose = true
	return true
}

// pass writes the squared distances of the positions [a, b) to the candidate c into dst and
// queues each that passes its row's threshold (rows with t2 = -1, not live, reject it).
func (s *solver) pass(dst []float32, a, b int, c []float32, t2 []float32, sc *tileScratch) {
	if s.dims == 2 {
		s.pass2(dst, a, b, c, t2, sc)
		return
	}
	x := s.x[0][a:b]
	dst = dst[:len(x)]
	c0 := c[0]
	for i := range x {
		t := x[i] - c0
		dst[i] = float32(t * t)
	}
	for d := 1; d < s.dims; d++ {
		x := s.x[d][a:b]
		x = x[:len(dst)]
		cd := c[d]
		for i := range dst {
			t := x[i] - cd
			dst[i] += float32(t * t)
		}
	}
	cnt, pend, m := sc.cnt[:len(dst)], sc.pend, s.m
	for i, d2 := range dst {
		if d2 <= t2[i] {
			pend[i*m+int(cnt[i])] = d2
			cnt[i]++
		}
	}
}

// pass2 is pass for 2-D data: the distances and the threshold test come as a bit mask from
// distMask2 (vectorised on amd64), and only the queued rows are visited one by one.
func (s *solver) pass2(dst []float32, a, b int, c []float32, t2 []float32, sc *tileScratch) {
	n := b - a
	x0, x1 := s.x[0][a:b], s.x[1][a:b]
	dst = dst[:n]
	n4 := n &^ 3
	mask := distMask2(x0[:n4], x1[:n4], dst[:n4], t2[:n4], c[0], c[1])
	mask |= distMask2Go(x0[n4:], x1[n4:], dst[n4:], t2[n4:], c[0], c[1]) << n4
	cnt, pend, m := &sc.cnt, sc.pend, s.m
	for mask != 0 {
		i := bits.TrailingZeros64(mask)
		mask &= mask - 1
		pend[i*m+int(cnt[i])] = dst[i]
		cnt[i]++
	}
}

// distMask2Go is distMask2 in Go, for any length up to 64.
func distMask2Go(x0, x1, dst, t2 []float32, p0, p1 float32) uint64 {
	x1 = x1[:len(x0)]
	dst = dst[:len(x0)]
	t2 = t2[:len(x0)]
	var mask uint64
	for i := range x0 {
		t := x0[i] - p0
		u := x1[i] - p1
		d2 := float32(t*t) + float32(u*u)
		dst[i] = d2
		if d2 <= t2[i] {
			mask |= 1 << i
		}
	}
	return mask
}

// phase2 is the candidates' side of step c for a chunk of nrows rows: each candidate updates
// LNNC from its row of dm, parallel over candidates.
func (s *solver) phase2(nrows int) {
	parallelFor(s.workers, len(s.cand), 1, func(_, j, _ int) {
		if s.candDone[j] {
			return
		}
		h := s.candHeap[j*s.k : (j+1)*s.k]
		t2 := sq32(h[0])
		changed := false
		for _, d2 := range s.dm[j*s.chunk : j*s.chunk+nrows] {
			if d2 <= t2 {
				if d := sqrt32(d2); d < h[0] {
					heapReplaceTop(h, d)
					t2 = sq32(h[0])
					changed = true
				}
			}
		}
		if changed {
			s.candUB[j] = plainSum(h)
			s.candDone[j] = s.pruned(s.candUB[j])
		}
	})
}
