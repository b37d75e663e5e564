package accel

import (
	"fmt"
	"math"
	"time"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/hypercube"
)

// HypercubeTimings is the wall time of each step of the GPU hypercube density: the host's
// min/max (Fit), the upload, hc_encode and the key download (Encode), the host's sort + unique
// (Distinct) and tree (Tree), the upload of cells and tree, hc_density and the download
// (Search), and the per-row scores (Finish).
type HypercubeTimings struct {
	Fit, Encode, Distinct, Tree, Search, Finish time.Duration
}

// gpuHypercube is hypercube.Detect with the two O(rows) and O(cells) passes on g, and the same
// result (cells, w, w_max and scores identical): the grid is fitted on the host (min/max),
// hc_encode packs the cell keys with the CPU's float64 arithmetic, the host sorts them and builds
// the LTR tree (the paper's split: GPU encoding, CPU ordered map), hc_density runs the stackless
// tree search of every distinct cell, and the host finishes the scores.
func gpuHypercube(g *gpukern.Device, cols [][]float32, p hypercube.Params) (*hypercube.Result, HypercubeTimings, error) {
	var tm HypercubeTimings
	if err := p.Validate(); err != nil {
		return nil, tm, err
	}
	t0 := time.Now()
	lap := func(dst *time.Duration) {
		now := time.Now()
		*dst, t0 = now.Sub(t0), now
	}
	grid, err := hypercube.FitGrid(cols, p.Bins)
	if err != nil {
		return nil, tm, err
	}
	rows := len(cols[0])
	if rows > math.MaxInt32 {
		return nil, tm, fmt.Errorf("hypercube: %d rows, at most %d", rows, math.MaxInt32)
	}
	lap(&tm.Fit)
	gg := HypercubeGrid(grid)
	keys := make([]uint64, rows*grid.Words())
	if err := gpukern.HypercubeEncode(g, cols, gg, keys); err != nil {
		return nil, tm, err
	}
	lap(&tm.Encode)
	cells := hypercube.Distinct(grid, keys, rows)
	lap(&tm.Distinct)
	minSplit := p.MinSplit
	if minSplit == 0 {
		minSplit = hypercube.DefaultMinSplit
	}
	tree, err := hypercube.BuildTree(cells, minSplit)
	if err != nil {
		return nil, tm, err
	}
	lap(&tm.Tree)
	w := make([]int64, cells.Len())
	if err := gpukern.HypercubeDensity(g, gg, cells.Keys, cells.Count, HypercubeNodes(tree), w); err != nil {
		return nil, tm, err
	}
	lap(&tm.Search)
	r := hypercube.Finish(grid, cells, w)
	lap(&tm.Finish)
	return r, tm, nil
}

// HypercubeGrid is g as the hypercube kernels read it.
func HypercubeGrid(g *hypercube.Grid) *gpukern.HypercubeGrid {
	gg := &gpukern.HypercubeGrid{Min: g.Min, Scale: g.Scale, Bins: g.Bins, Bits: g.Bits(), PerWord: g.PerWord(), Words: g.Words()}
	for p := range gg.SWAR {
		m := &gg.SWAR[p]
		m[0], m[1], m[2], m[3], m[4] = g.SWAR(p)
	}
	return gg
}

// HypercubeNodes is t's nodes as hc_density reads them (the same fields).
func HypercubeNodes(t *hypercube.Tree) []gpukern.HypercubeNode {
	nodes := make([]gpukern.HypercubeNode, len(t.Nodes))
	for i, n := range t.Nodes {
		nodes[i] = gpukern.HypercubeNode(n)
	}
	return nodes
}
