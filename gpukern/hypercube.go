package gpukern

import (
	"fmt"
	"math"
)

// HypercubeMaxDims is the largest dimension count of the hypercube kernels (HC_MAXD in
// hypercube.cu, hypercube.MaxDims on the CPU): hc_density keeps each dimension's key location in
// shared memory.
const HypercubeMaxDims = 128

// HypercubeGrid is the grid of GDBOD's hypercube density as the kernels read it, field for field
// the CPU's (internal/algo/hypercube.Grid; internal/accel converts): per dimension the minimum
// and the scale (bins per unit), b bins, and the packed key layout, Bits per coordinate,
// PerWord coordinates per 64-bit word (dimension 0 in the highest used bits of word 0), Words
// words per key. SWAR holds the word-parallel neighbour test's masks of the even and odd field
// positions (hypercube.Grid.SWAR(0), SWAR(1): field, one, highK, m3, highK1).
type HypercubeGrid struct {
	Min, Scale                 []float64
	Bins, Bits, PerWord, Words int
	SWAR                       [2][5]uint64
}

// HypercubeNode is one node of the LTR tree over the distinct cells, in depth-first pre-order,
// field for field hypercube.Node (see there): Coord its coordinate in dimension Depth, Brk the
// node after its subtree, Up its parent's Brk, [Lo, Hi) its cells.
type HypercubeNode struct {
	Coord  uint16
	Depth  uint8
	Leaf   bool
	Brk    int32
	Up     int32
	Lo, Hi int32
}

// check validates g for dims dimensions.
func (g *HypercubeGrid) check(dims int) error {
	if dims < 1 || dims > HypercubeMaxDims {
		return fmt.Errorf("%d dimensions, need 1..%d", dims, HypercubeMaxDims)
	}
	if len(g.Min) != dims || len(g.Scale) != dims {
		return fmt.Errorf("%w: the grid has %d minima and %d scales for %d dimensions", errShape, len(g.Min), len(g.Scale), dims)
	}
	if g.Bins < 2 || g.Bits < 1 || g.PerWord < 1 || g.Bits*g.PerWord > 64 || g.Words != (dims+g.PerWord-1)/g.PerWord {
		return fmt.Errorf("%w: grid of %d bins, %d bits, %d per word, %d words for %d dimensions", errShape, g.Bins, g.Bits, g.PerWord, g.Words, dims)
	}
	return nil
}

// HypercubeEncode packs the cell key of every row of cols (column-major, finite) into keys
// (row-major, g.Words per row), bit-identical to hypercube.Grid.Encode: hc_encode computes each
// coordinate with the CPU's float64 arithmetic. Host slices; the transfers are included.
func HypercubeEncode(d *Device, cols [][]float32, g *HypercubeGrid, keys []uint64) error {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return fmt.Errorf("gpukern.HypercubeEncode: %w", err)
	}
	if err := g.check(len(cols)); err != nil {
		return fmt.Errorf("gpukern.HypercubeEncode: %w", err)
	}
	if rows > math.MaxInt32 {
		return fmt.Errorf("gpukern.HypercubeEncode: %d rows, at most %d", rows, math.MaxInt32)
	}
	if len(keys) != rows*g.Words {
		return fmt.Errorf("gpukern.HypercubeEncode: %w: %d rows of %d words but len(keys) = %d", errShape, rows, g.Words, len(keys))
	}
	return d.hypercubeEncode(cols, g, keys)
}

// HypercubeDensity writes to w[c] the neighbourhood density of distinct cell c (the rows in the
// cells within one bin of it in every dimension, itself included), equal to hypercube.Tree.Density:
// hc_density runs the stackless search of the LTR tree, one thread per cell, with integer counts.
// keys holds the distinct cells' packed keys ascending (len(count) cells of g.Words words), count
// their row counts, nodes the tree over them (hypercube.BuildTree). Host slices; the transfers are
// included. Device memory: about cells*(8*words + 12) + nodes*20 bytes.
func HypercubeDensity(d *Device, g *HypercubeGrid, keys []uint64, count []int32, nodes []HypercubeNode, w []int64) error {
	dims := len(g.Min)
	if err := g.check(dims); err != nil {
		return fmt.Errorf("gpukern.HypercubeDensity: %w", err)
	}
	if len(keys) != len(count)*g.Words || len(w) != len(count) {
		return fmt.Errorf("gpukern.HypercubeDensity: %w: %d cells but %d key words (%d per key) and %d densities",
			errShape, len(count), len(keys), g.Words, len(w))
	}
	if len(count) > 0 && len(nodes) == 0 || len(nodes) > math.MaxInt32 {
		return fmt.Errorf("gpukern.HypercubeDensity: %w: a tree of %d nodes over %d cells", errShape, len(nodes), len(count))
	}
	if len(count) == 0 {
		return nil
	}
	return d.hypercubeDensity(g, keys, count, nodes, w)
}

// hcNodes flattens the tree for the kernel: four int32 per node (meta = coord | depth << 16 |
// leaf << 24, brk, up, lo) and the leaves' hi apart (read only at a leaf).
func hcNodes(nodes []HypercubeNode) (quad []int32, hi []int32) {
	quad = make([]int32, 4*len(nodes))
	hi = make([]int32, len(nodes))
	for i, n := range nodes {
		meta := int32(n.Coord) | int32(n.Depth)<<16
		if n.Leaf {
			meta |= 1 << 24
		}
		quad[4*i], quad[4*i+1], quad[4*i+2], quad[4*i+3] = meta, n.Brk, n.Up, n.Lo
		hi[i] = n.Hi
	}
	return quad, hi
}
