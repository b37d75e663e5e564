// Package hypercube is the hypercube (grid) density outlier score of GDBOD (Munugala and
// Gowanlock; ALGORITHMS.md §3): the data are normalised to [0,1] per dimension, cut into b bins
// per dimension, and a point's neighbourhood density w is the number of points in its cell and
// in every cell whose coordinates are all within +-1 of it; its score is O = 1 - w / w_max
// (w_max over the occupied cells), higher = more outlying. It sees what a per-dimension test
// cannot: a point that is ordinary in every dimension alone but sits in an empty region of the
// joint space.
//
// Detect is the batch algorithm of the paper: packed cell keys (Grid), sort + unique (Distinct),
// the LTR tree (BuildTree) and a stackless neighbour search per distinct cell (Tree.Search) that
// never enumerates the 3^d neighbour positions. gpukern.Hypercube runs the key encoding and the
// search on a GPU with the same grid, cells and tree, and gives the same counts and scores.
// Counts is the incremental form for a stream: exact counts per cell over a sliding window on a
// frozen grid, with Add and Remove per batch.
//
// Layout: column-major float32 (cols[j][i] = row i in dimension j), as elsewhere in outlierd.
// Limits: 1 <= d <= MaxDims (128), 2 <= b <= MaxBins (65536), rows < 2^31.
package hypercube

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// ErrTooManyDims is wrapped by the error for more than MaxDims dimensions.
var ErrTooManyDims = errors.New("hypercube: too many dimensions")

// Params are the parameters of Detect.
type Params struct {
	// Bins is b, the bins per dimension (paper: 7); 2 <= Bins <= MaxBins. More bins make smaller
	// cells: sharper but sparser densities (all points alone in their neighbourhood as b grows).
	Bins int
	// MinSplit is the paper's m: a tree node with fewer cells is scanned instead of split
	// (default DefaultMinSplit when 0). It changes the speed, never the result.
	MinSplit int
	// Workers bounds the goroutines of the neighbour search (<= 0: GOMAXPROCS).
	Workers int
}

// Validate checks the parameters.
func (p Params) Validate() error {
	if p.Bins < 2 || p.Bins > MaxBins {
		return fmt.Errorf("hypercube: bins must be in [2, %d], got %d", MaxBins, p.Bins)
	}
	if p.MinSplit < 0 {
		return fmt.Errorf("hypercube: MinSplit must be >= 0, got %d", p.MinSplit)
	}
	return nil
}

func (p Params) minSplit() int {
	if p.MinSplit == 0 {
		return DefaultMinSplit
	}
	return p.MinSplit
}

// Result is the outcome of Detect.
type Result struct {
	Grid  *Grid
	Cells *Cells
	// W[c] is the neighbourhood density of distinct cell c; WMax its maximum (>= 1).
	W    []int64
	WMax int64
	// Scores[i] is O of input row i, 1 - W[cell]/WMax, in [0, 1).
	Scores []float64
}

// Score is O = 1 - w / wMax (wMax > 0), the one formula both devices use.
func Score(w, wMax int64) float64 { return 1 - float64(w)/float64(wMax) }

// Detect scores every row of cols (column-major, finite values): the grid is fitted to the
// data's own minimum and maximum per dimension (FitGrid).
func Detect(cols [][]float32, p Params) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	g, err := FitGrid(cols, p.Bins)
	if err != nil {
		return nil, err
	}
	n := len(cols[0])
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("hypercube: %d rows, at most %d", n, math.MaxInt32)
	}
	keys := make([]uint64, n*g.Words())
	encodeParallel(g, cols, keys, p.Workers)
	c := Distinct(g, keys, n)
	t, err := BuildTree(c, p.minSplit())
	if err != nil {
		return nil, err
	}
	w := make([]int64, c.Len())
	t.Density(c, w, p.Workers)
	return Finish(g, c, w), nil
}

// Finish computes w_max and the per-row scores from the cells' densities (shared by the CPU and
// the GPU paths).
func Finish(g *Grid, c *Cells, w []int64) *Result {
	r := &Result{Grid: g, Cells: c, W: w, Scores: make([]float64, len(c.RowCell))}
	for _, v := range w {
		r.WMax = max(r.WMax, v)
	}
	n := len(c.RowCell)
	P := min(runtime.GOMAXPROCS(0), max(1, n/(1<<16)))
	var wg sync.WaitGroup
	for p := range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p * n / P; i < (p+1)*n/P; i++ {
				r.Scores[i] = Score(w[c.RowCell[i]], r.WMax)
			}
		}()
	}
	wg.Wait()
	return r
}

// encodeParallel is Grid.Encode over row blocks on several goroutines.
func encodeParallel(g *Grid, cols [][]float32, keys []uint64, workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	n := len(cols[0])
	per := max(1<<16, (n+workers-1)/workers)
	var wg sync.WaitGroup
	for s := 0; s < n; s += per {
		e := min(n, s+per)
		sub := make([][]float32, len(cols))
		for j, c := range cols {
			sub[j] = c[s:e]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Encode(sub, keys[s*g.words:e*g.words])
		}()
	}
	wg.Wait()
}
