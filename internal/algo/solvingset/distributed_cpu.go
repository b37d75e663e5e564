package solvingset

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/algo/euclid"
)

// The reference node of the distributed solving set (distributed.go): a partition in memory.

// sqDistRowMajor is euclid.Squared for two points of a row-major array.
func sqDistRowMajor(x []float32, a, b, dims int) float32 {
	var s float32
	for d := range dims {
		t := x[a*dims+d] - x[b*dims+d]
		s += float32(t * t)
	}
	return s
}

// CPUNode is the reference Node: a partition in memory, compared with plain loops over worker
// goroutines. Its arithmetic is the package's (bit-identical distances).
type CPUNode struct {
	x        [][]float32 // [dim][row]
	k        int
	margin   float64
	heap     []float32 // k per row, max-heaps
	inS      []bool
	workers  int
	ncand    int
	local    []float32 // per candidate of the last Compare: its local distances below LNNC's k-th, k slots
	localLen []int
}

// NewCPUNode makes a node of the column-major partition cols (shared, not copied).
func NewCPUNode(cols [][]float32, k, workers int) *CPUNode {
	rows := len(cols[0])
	n := &CPUNode{x: cols, k: k, margin: PruneMargin(k), heap: make([]float32, rows*k), inS: make([]bool, rows), workers: workerCount(workers)}
	fillInf(n.heap)
	return n
}

// Rows implements Node.
func (n *CPUNode) Rows() int { return len(n.inS) }

// Take implements Node.
func (n *CPUNode) Take(rows []int) (coords, lnn []float32, err error) {
	dims := len(n.x)
	coords, lnn = make([]float32, len(rows)*dims), make([]float32, len(rows)*n.k)
	for i, r := range rows {
		if r < 0 || r >= len(n.inS) || n.inS[r] {
			return nil, nil, fmt.Errorf("row %d is not a row of the partition outside S", r)
		}
		n.inS[r] = true
		for d := range dims {
			coords[i*dims+d] = n.x[d][r]
		}
		copy(lnn[i*n.k:(i+1)*n.k], n.heap[r*n.k:(r+1)*n.k])
	}
	return coords, lnn, nil
}

// ub is a heap's upper bound: its plain sum, +Inf until it is full.
func ub(h []float32) float64 {
	if math.IsInf(float64(h[0]), 1) {
		return math.Inf(1)
	}
	return plainSum(h)
}

// Step implements Node.
func (n *CPUNode) Step(taken []int, coords, lnn []float32, minOUT float64, m int) ([]float32, []bool, Proposal, error) {
	for _, r := range taken {
		if r < 0 || r >= len(n.inS) || n.inS[r] {
			return nil, nil, Proposal{}, fmt.Errorf("taken row %d is not a row of the partition outside S", r)
		}
		n.inS[r] = true
	}
	dims := len(n.x)
	lnnc := slices.Clone(lnn)
	stepB(lnnc, coords, dims, n.k, n.workers)
	done := n.compare(coords, lnnc, minOUT)
	for t := range done {
		done[t] = done[t] || plainSum(lnnc[t*n.k:(t+1)*n.k])*n.margin < minOUT
	}
	var next Proposal
	next.Rows, next.UB = n.selectTop(m, minOUT)
	for _, r := range next.Rows {
		for d := range dims {
			next.Coords = append(next.Coords, n.x[d][r])
		}
		next.LNN = append(next.LNN, n.heap[r*n.k:(r+1)*n.k]...)
	}
	return lnnc, done, next, nil
}

// stepB is step b: each candidate's LNNC (lnnc, k values a candidate, max-heaps) meets every
// other candidate (coords, dims each) in index order, with the heap's replace_top (gpukern's
// ss_ctoc does the same inserts in the same order).
func stepB(lnnc, coords []float32, dims, k, workers int) {
	nc := len(coords) / dims
	parallelFor(workers, nc, 8, func(_, lo, hi int) {
		for a := lo; a < hi; a++ {
			ha := lnnc[a*k : (a+1)*k]
			for b := range nc {
				if a == b {
					continue
				}
				if d := sqrt32(sqDistRowMajor(coords, a, b, dims)); d < ha[0] {
					heapReplaceTop(ha, d)
				}
			}
		}
	})
}

// compare is step c. Workers take ranges of rows; each keeps, per candidate, a heap of its
// rows' distances below the candidate's k-th, merged at the end.
func (n *CPUNode) compare(coords, lnnc []float32, minOUT float64) []bool {
	dims, k := len(n.x), n.k
	nc := len(coords) / dims
	n.ncand = nc
	candUB := make([]float64, nc)
	kth := make([]float32, nc)
	for t := range nc {
		candUB[t] = ub(lnnc[t*k : (t+1)*k])
		kth[t] = slices.Max(lnnc[t*k : (t+1)*k])
	}
	rows := len(n.inS)
	type part struct{ h []float32 }
	parts := make([]part, n.workers)
	inf := float32(math.Inf(1))
	parallelFor(n.workers, rows, 1024, func(w, lo, hi int) {
		if parts[w].h == nil {
			parts[w].h = make([]float32, nc*k)
			fillInf(parts[w].h)
		}
		h := parts[w].h
		for i := lo; i < hi; i++ {
			if n.inS[i] {
				continue
			}
			hp := n.heap[i*k : (i+1)*k]
			rowPruned := ub(hp)*n.margin < minOUT
			for t := range nc {
				if rowPruned && candUB[t]*n.margin < minOUT {
					continue
				}
				d := sqrt32(euclid.Squared(n.x, i, coords[t*dims:(t+1)*dims]))
				if d < hp[0] {
					heapReplaceTop(hp, d)
				}
				if hc := h[t*k : (t+1)*k]; d < kth[t] && d < hc[0] {
					heapReplaceTop(hc, d)
				}
			}
		}
	})
	// Merge the workers' heaps per candidate; the candidate's bound is that of LNNC with them.
	n.local = make([]float32, nc*k)
	n.localLen = make([]int, nc)
	done := make([]bool, nc)
	all := make([]float32, 0, k*len(parts))
	for t := range nc {
		all = all[:0]
		for _, p := range parts {
			if p.h == nil {
				continue
			}
			for _, v := range p.h[t*k : (t+1)*k] {
				if v < inf {
					all = append(all, v)
				}
			}
		}
		slices.Sort(all)
		l := min(len(all), k)
		copy(n.local[t*k:], all[:l])
		n.localLen[t] = l
		// The running bound: the k smallest of LNNC and the local distances.
		merged := append(slices.Clone(lnnc[t*k:(t+1)*k]), all[:l]...)
		slices.Sort(merged)
		done[t] = plainSum(merged[:k])*n.margin < minOUT // +Inf while fewer than k are known
	}
	return done
}

// Neighbours implements Node.
func (n *CPUNode) Neighbours(from, count []int) ([][]float32, error) {
	if len(from) != n.ncand || len(count) != n.ncand {
		return nil, fmt.Errorf("%d/%d requests for %d candidates", len(from), len(count), n.ncand)
	}
	out := make([][]float32, n.ncand)
	for t := range n.ncand {
		lo := min(from[t], n.localLen[t])
		hi := min(lo+count[t], n.localLen[t])
		out[t] = slices.Clone(n.local[t*n.k+lo : t*n.k+hi])
	}
	return out, nil
}

// selectTop is steps e and f: up to m active rows with the largest UB, best first.
func (n *CPUNode) selectTop(m int, minOUT float64) (rows []int, ubs []float64) {
	type item struct {
		row int
		ub  float64
	}
	var items []item
	for i := range n.inS {
		if n.inS[i] {
			continue
		}
		u := ub(n.heap[i*n.k : (i+1)*n.k])
		if u*n.margin < minOUT {
			continue
		}
		items = append(items, item{i, u})
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := cmp.Compare(b.ub, a.ub); c != 0 {
			return c
		}
		return cmp.Compare(a.row, b.row)
	})
	for _, it := range items[:min(m, len(items))] {
		rows = append(rows, it.row)
		ubs = append(ubs, it.ub)
	}
	return rows, ubs
}
