package hypercube

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// DefaultMinSplit is the paper's MinSplit for its GPU trees (m = 20): a node holding fewer
// cells is a leaf, scanned linearly, instead of being split on the next dimension.
const DefaultMinSplit = 20

// Node is one node of the LTR tree (GDBOD §III-D, "locality and traversal revised"): the nodes are
// stored in depth-first pre-order, so a node's first child is the next node, and Brk ("break
// index") is the node that follows its subtree. A node at depth t stands for the cells in
// [Lo, Hi) whose coordinates 0..t are those of its path; Coord is its coordinate in dimension t.
// Up is the parent's Brk: siblings are in ascending Coord, so once a sibling's coordinate is
// above the query's + 1, every later sibling is too and the search jumps there (the paper visits
// every sibling; this only skips ones that cannot match).
type Node struct {
	Coord  uint16
	Depth  uint8
	Leaf   bool
	Brk    int32
	Up     int32
	Lo, Hi int32
}

// Tree is the LTR tree over a Cells array.
type Tree struct {
	Nodes    []Node
	MinSplit int
}

// BuildTree builds the tree over the sorted distinct cells: the root's cells are split by
// their coordinate in dimension 0, and a node at depth t with at least minSplit cells is split
// again by dimension t+1 (a node at the last dimension holds one cell and is always a leaf).
// minSplit <= 1 builds the complete tree. Construction is O(|H| * depth); the subtrees of the
// top-level nodes are built in parallel and concatenated.
//
// Node indices are int32 (the GPU's too). The tree has at most |H| leaves and, per depth, at most
// |H| / minSplit internal nodes (each holds minSplit cells or more, and they are disjoint), so
// BuildTree refuses, before building, a tree that could reach 2^31 nodes: |H| * (1 + d /
// minSplit) >= 2^31 (at d = 128 and the default minSplit, about 290 million distinct cells).
func BuildTree(c *Cells, minSplit int) (*Tree, error) {
	m := max(1, minSplit)
	if bound := int64(c.Len()) * (1 + int64(c.Grid.Dims())/int64(m)); bound >= math.MaxInt32 {
		return nil, fmt.Errorf("hypercube: %d distinct cells in %d dimensions with MinSplit %d could need %d tree nodes, more than the %d that 32-bit node indices address: raise MinSplit",
			c.Len(), c.Grid.Dims(), minSplit, bound, math.MaxInt32)
	}
	t := &Tree{MinSplit: minSplit}
	var runs [][2]int
	for s := 0; s < c.Len(); {
		e := t.runEnd(c, s, c.Len(), 0)
		runs = append(runs, [2]int{s, e})
		s = e
	}
	subs := make([][]Node, len(runs))
	var wg sync.WaitGroup
	for r, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs[r] = t.node(nil, c, run[0], run[1], 0)
		}()
	}
	wg.Wait()
	total := 0
	for _, s := range subs {
		total += len(s)
	}
	t.Nodes = make([]Node, 0, total)
	for _, s := range subs {
		off := int32(len(t.Nodes))
		top := len(t.Nodes)
		for _, n := range s {
			n.Brk += off
			n.Up += off
			t.Nodes = append(t.Nodes, n)
		}
		t.Nodes[top].Up = int32(total)
	}
	return t, nil
}

// runEnd is the end of the run of cells from s (< hi) with s's coordinate in dimension dim.
func (t *Tree) runEnd(c *Cells, s, hi, dim int) int {
	g := c.Grid
	W := g.words
	v := g.Field(c.Keys[s*W:], dim)
	e := s + 1
	for e < hi && g.Field(c.Keys[e*W:], dim) == v {
		e++
	}
	return e
}

// node appends the node of the cells [s, e) at depth dim (they share coordinates 0..dim) and its
// subtree to nodes; indices are relative to the start of nodes.
func (t *Tree) node(nodes []Node, c *Cells, s, e, dim int) []Node {
	g := c.Grid
	idx := len(nodes)
	leaf := e-s < t.MinSplit || dim == g.Dims()-1
	nodes = append(nodes, Node{Coord: uint16(g.Field(c.Keys[s*g.words:], dim)), Depth: uint8(dim), Leaf: leaf, Lo: int32(s), Hi: int32(e)})
	if !leaf {
		// The children, split by dimension dim+1, each followed by its subtree; siblings share
		// Up, the index after the last one's subtree.
		var kids []int
		for cs := s; cs < e; {
			ce := t.runEnd(c, cs, e, dim+1)
			kids = append(kids, len(nodes))
			nodes = t.node(nodes, c, cs, ce, dim+1)
			cs = ce
		}
		for _, k := range kids {
			nodes[k].Up = int32(len(nodes))
		}
	}
	nodes[idx].Brk = int32(len(nodes))
	return nodes
}

// Search returns w of a query cell given by its packed key: the number of points in the cells
// whose every coordinate is within +-1 of the query's (the query's own cell included when it is
// occupied). It walks the tree without a stack (Brk and Up) and never enumerates the 3^d
// neighbour positions: a node is entered only when an occupied cell shares its prefix within +-1,
// so the work is bounded by the occupied prefixes near the query, at most |H| * depth.
func (t *Tree) Search(c *Cells, key []uint64) int64 {
	g := c.Grid
	W := g.words
	var w int64
	nodes := t.Nodes
	for n := int32(0); int(n) < len(nodes); {
		nd := &nodes[n]
		h := g.Field(key, int(nd.Depth))
		v := uint32(nd.Coord)
		switch {
		case v+1 < h:
			n = nd.Brk
		case v > h+1:
			n = nd.Up
		case !nd.Leaf:
			n++
		default:
			for i := nd.Lo; i < nd.Hi; i++ {
				if g.near(key, c.Keys[int(i)*W:int(i)*W+W], int(nd.Depth)+1) {
					w += int64(c.Count[i])
				}
			}
			n = nd.Brk
		}
	}
	return w
}

// near reports whether keys a and b are within +-1 in every dimension from `from` on. It tests
// a whole word at a time (SWAR): the fields of one parity of positions are masked out, so that
// each has the k bits of its neighbour field free above it, and per field z = x + 2^k + 1 - y
// (never negative, never more than k+2 bits: no carry between fields) is within +-1 exactly
// when bit k of z is set and bit k+1 of z + 2^k - 3 is clear (z in [2^k, 2^k + 2]). With one
// bit per dimension (b = 2) every pair of cells is within +-1. The first word is masked to the
// dimensions from `from` on (the tree has matched the ones before).
func (g *Grid) near(a, b []uint64, from int) bool {
	if g.bits == 1 || from >= g.Dims() {
		return true
	}
	w := from / g.perWord
	keep := uint64(1)<<(g.shift(from)+uint(g.bits)) - 1
	if !g.nearWord(a[w]&keep, b[w]&keep) {
		return false
	}
	for w++; w < g.words; w++ {
		if !g.nearWord(a[w], b[w]) {
			return false
		}
	}
	return true
}

func (g *Grid) nearWord(x, y uint64) bool {
	if x == y {
		return true
	}
	for p := range 2 {
		m := &g.swar[p]
		z := (x&m.Field | m.HighK) + m.One - y&m.Field
		if z&m.HighK != m.HighK || (z+m.M3)&m.HighK1 != 0 {
			return false
		}
	}
	return true
}

// Density writes w of every distinct cell into w (len = c.Len()), using up to workers goroutines
// (<= 0: GOMAXPROCS). Cells are handed out in blocks of 1024 (their work varies a lot).
func (t *Tree) Density(c *Cells, w []int64, workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Not fanout.Each, the same loop: on it BenchmarkDetect/200k ran 1.3% slower (a no-op change: 0.7%).
	const block = 1024
	n := c.Len()
	var next int64
	var mu sync.Mutex
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		s := int(next)
		next += block
		return s
	}
	var wg sync.WaitGroup
	for range min(workers, (n+block-1)/block) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := take(); s < n; s = take() {
				for i := s; i < min(s+block, n); i++ {
					w[i] = t.Search(c, c.Key(i))
				}
			}
		}()
	}
	wg.Wait()
}
