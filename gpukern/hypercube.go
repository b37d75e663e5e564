package gpukern

import (
	"fmt"
	"math"
	"time"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
)

// HypercubeParams are the parameters of Hypercube (hypercube.Params without the CPU worker knob).
type HypercubeParams struct {
	// Bins is b, the bins per dimension; 2 <= Bins <= hypercube.MaxBins.
	Bins int
	// MinSplit is the tree's m (0: hypercube.DefaultMinSplit); speed only, never the result.
	MinSplit int
}

// HypercubeResult is hypercube.Detect's result with the time of each step.
type HypercubeResult struct {
	*hypercube.Result
	Timings HypercubeTimings
}

// HypercubeTimings is the wall time of each step of Hypercube: the host's min/max (Fit), the
// upload, hc_encode and the key download (Encode), the host's sort + unique (Distinct) and tree
// (Tree), the upload of cells and tree, hc_density and the download (Search), and the per-row
// scores (Finish).
type HypercubeTimings struct {
	Fit, Encode, Distinct, Tree, Search, Finish time.Duration
}

// Hypercube scores every row of cols (column-major, finite, 1..hypercube.MaxDims dimensions)
// with the hypercube density of GDBOD, as hypercube.Detect does and with the same result (cells,
// w, w_max and scores identical): the grid is fitted on the host (min/max), hc_encode packs the
// cell keys on the device with the CPU's float64 arithmetic, the host sorts them and builds the
// LTR tree (the paper's split: GPU encoding, CPU ordered map), and hc_density runs the stackless
// tree search of every distinct cell, one thread per cell. Host slices; the transfers are
// included. Device memory: about rows*(4*dims + 8*words) + cells*(8*words + 12) + nodes*20 bytes.
func Hypercube(d *Device, cols [][]float32, p HypercubeParams) (*HypercubeResult, error) {
	rows, err := columnsShape("cols", cols)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Hypercube: %w", err)
	}
	hp := hypercube.Params{Bins: p.Bins, MinSplit: p.MinSplit}
	if err := hp.Validate(); err != nil {
		return nil, fmt.Errorf("gpukern.Hypercube: %w", err)
	}
	if rows > math.MaxInt32 {
		return nil, fmt.Errorf("gpukern.Hypercube: %d rows, at most %d", rows, math.MaxInt32)
	}
	var tm HypercubeTimings
	t0 := time.Now()
	lap := func(dst *time.Duration) {
		now := time.Now()
		*dst, t0 = now.Sub(t0), now
	}
	g, err := hypercube.FitGrid(cols, p.Bins)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Hypercube: %w", err)
	}
	lap(&tm.Fit)
	keys := make([]uint64, rows*g.Words())
	if err := d.hypercubeEncode(cols, g, keys); err != nil {
		return nil, fmt.Errorf("gpukern.Hypercube: %w", err)
	}
	lap(&tm.Encode)
	cells := hypercube.Distinct(g, keys, rows)
	lap(&tm.Distinct)
	minSplit := p.MinSplit
	if minSplit == 0 {
		minSplit = hypercube.DefaultMinSplit
	}
	tree, err := hypercube.BuildTree(cells, minSplit)
	if err != nil {
		return nil, fmt.Errorf("gpukern.Hypercube: %w", err)
	}
	lap(&tm.Tree)
	w := make([]int64, cells.Len())
	if err := d.hypercubeDensity(cells, tree, w); err != nil {
		return nil, fmt.Errorf("gpukern.Hypercube: %w", err)
	}
	lap(&tm.Search)
	r := hypercube.Finish(g, cells, w)
	lap(&tm.Finish)
	return &HypercubeResult{Result: r, Timings: tm}, nil
}

// hcNodes flattens the tree for the kernel: four int32 per node (meta = coord | depth << 16 |
// leaf << 24, brk, up, lo) and the leaves' hi apart (read only at a leaf).
func hcNodes(t *hypercube.Tree) (quad []int32, hi []int32) {
	quad = make([]int32, 4*len(t.Nodes))
	hi = make([]int32, len(t.Nodes))
	for i, n := range t.Nodes {
		meta := int32(n.Coord) | int32(n.Depth)<<16
		if n.Leaf {
			meta |= 1 << 24
		}
		quad[4*i], quad[4*i+1], quad[4*i+2], quad[4*i+3] = meta, n.Brk, n.Up, n.Lo
		hi[i] = n.Hi
	}
	return quad, hi
}
