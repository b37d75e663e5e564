package hypercube

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/core/fanout"
)

// MaxDims is the largest dimension count: the paper's widest data set (Sift) has 128, and the CUDA
// kernel keeps a query's path in a fixed per-thread budget sized for it. More dimensions are
// refused with an error (ErrTooManyDims) rather than silently truncated; the grid has b^d cells,
// so a density over more than 128 dimensions is almost everywhere one point per cell anyway.
const MaxDims = 128

// MaxBins is the largest number of bins per dimension: coordinates are stored in 16 bits in the
// tree nodes (and packed keys use ceil(log2 b) <= 16 bits per dimension).
const MaxBins = 1 << 16

// DefaultBins is the paper's b = 7 (its AUC is flat for b in [4, 7]; 7 is the fastest of those on
// sparse data).
const DefaultBins = 7

// Grid is a frozen regular grid over d dimensions: b bins per dimension over [Min_j, Max_j].
// A value's cell coordinate in dimension j is floor((x - Min_j) * Scale_j) with
// Scale_j = b / (Max_j - Min_j) (ALGORITHMS.md §3: floor(x_norm * b) of the value normalised to
// [0,1]), computed in float64 and clamped to [0, b-1]: x = Max_j (x_norm = 1.0) lands in the last
// cell, and values outside [Min_j, Max_j] (a stream scored against a grid fitted earlier) land in
// the edge cells. A constant dimension (Max_j = Min_j) has Scale_j = 0: every value is in cell 0.
// The CUDA kernel repeats the same two correctly rounded float64 operations, so both agree on
// every cell.
//
// Cells are packed into keys of Words() uint64 words: Bits() bits per dimension, PerWord() =
// floor(62 / Bits()) dimensions per word (a dimension never straddles two words, and the top two
// bits stay free for the word-parallel neighbour test), dimension 0 in the highest used bits of
// word 0. Comparing keys word by word as unsigned integers is then the lexicographic order
// of the coordinates (dimension 0 first), the order the tree needs.
type Grid struct {
	Bins     int
	Min, Max []float64
	Scale    []float64
	bits     int
	perWord  int
	words    int
	swar     [2]swarMasks // even and odd field positions, for near
	word     []int32      // word[j]: the key word holding dimension j
	sh       []uint8      // sh[j]: its bit position in that word
}

// swarMasks are the constants of the word-parallel neighbour test of one parity of field
// positions (see near): field bits, bit 0 and bit k of each field, 2^k - 3 per field, bit k+1.
type swarMasks struct{ Field, One, HighK, M3, HighK1 uint64 }

// NewGrid makes the grid of b bins over [min_j, max_j] per dimension. It checks 2 <= b <=
// MaxBins, 1 <= d <= MaxDims, finite bounds and min_j <= max_j.
func NewGrid(bins int, min, max []float64) (*Grid, error) {
	if bins < 2 || bins > MaxBins {
		return nil, fmt.Errorf("hypercube: bins must be in [2, %d], got %d", MaxBins, bins)
	}
	d := len(min)
	if d == 0 {
		return nil, fmt.Errorf("hypercube: no dimensions")
	}
	if d > MaxDims {
		return nil, fmt.Errorf("%w: %d dimensions, at most %d supported", ErrTooManyDims, d, MaxDims)
	}
	if len(max) != d {
		return nil, fmt.Errorf("hypercube: %d minima but %d maxima", d, len(max))
	}
	g := &Grid{Bins: bins, Min: append([]float64(nil), min...), Max: append([]float64(nil), max...), Scale: make([]float64, d)}
	for j := range d {
		lo, hi := min[j], max[j]
		if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsNaN(hi) || math.IsInf(hi, 0) || hi < lo {
			return nil, fmt.Errorf("hypercube: dimension %d: bounds [%v, %v] are not a finite interval", j, lo, hi)
		}
		if hi > lo {
			g.Scale[j] = float64(bins) / (hi - lo)
		}
	}
	g.bits = bits.Len(uint(bins - 1))
	g.perWord = 62 / g.bits
	g.words = (d + g.perWord - 1) / g.perWord
	g.word, g.sh = make([]int32, d), make([]uint8, d)
	for j := range d {
		g.word[j] = int32(j / g.perWord)
		g.sh[j] = uint8((g.perWord - 1 - j%g.perWord) * g.bits)
	}
	k := uint(g.bits)
	for p := range g.perWord {
		m := &g.swar[p%2]
		s := uint(p) * k
		m.Field |= (1<<k - 1) << s
		m.One |= 1 << s
		m.HighK |= 1 << (s + k)
		m.M3 |= (1<<k - 3) << s
		m.HighK1 |= 1 << (s + k + 1)
	}
	return g, nil
}

// FitGrid makes the grid of b bins over the data's own per-dimension minimum and maximum. The
// values must be finite.
func FitGrid(cols [][]float32, bins int) (*Grid, error) {
	n, err := shape(cols)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("hypercube: no rows")
	}
	if len(cols) > MaxDims {
		return nil, fmt.Errorf("%w: %d dimensions, at most %d supported", ErrTooManyDims, len(cols), MaxDims)
	}
	if bins < 2 || bins > MaxBins {
		return nil, fmt.Errorf("hypercube: bins must be in [2, %d], got %d", MaxBins, bins)
	}
	mins, maxs := make([]float64, len(cols)), make([]float64, len(cols))
	errs := make([]error, len(cols))
	// A dimension per iteration on the cores: a pass over n*d values.
	fanout.OnCores(len(cols), func(j int) {
		c := cols[j]
		lo, hi := c[0], c[0]
		for i, v := range c {
			if v != v || math.IsInf(float64(v), 0) {
				errs[j] = fmt.Errorf("hypercube: row %d dimension %d is %v: values must be finite", i, j, v)
				return
			}
			lo, hi = min(lo, v), max(hi, v)
		}
		mins[j], maxs[j] = float64(lo), float64(hi)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return NewGrid(bins, mins, maxs)
}

// Dims is the number of dimensions.
func (g *Grid) Dims() int { return len(g.Min) }

// Bits is the number of key bits per dimension, ceil(log2 b).
func (g *Grid) Bits() int { return g.bits }

// PerWord is the number of dimensions packed into one key word, floor(62 / Bits()).
func (g *Grid) PerWord() int { return g.perWord }

// Words is the number of uint64 words of one key.
func (g *Grid) Words() int { return g.words }

// SWAR returns the constants of the word-parallel neighbour test for field parity p (0: even
// field positions counted from bit 0, 1: odd), for the CUDA kernel: field mask, bit 0, bit k and
// bit k+1 of each field, and 2^k - 3 per field.
func (g *Grid) SWAR(p int) (field, one, highK, m3, highK1 uint64) {
	m := g.swar[p]
	return m.Field, m.One, m.HighK, m.M3, m.HighK1
}

// Coord is the cell coordinate of value x in dimension j (see Grid). NaN lands in cell 0.
func (g *Grid) Coord(j int, x float32) uint32 {
	v := math.Floor((float64(x) - g.Min[j]) * g.Scale[j])
	if !(v > 0) { // negative, or NaN
		return 0
	}
	if v >= float64(g.Bins-1) {
		return uint32(g.Bins - 1)
	}
	return uint32(v)
}

// shift is the bit position of dimension j inside its word.
func (g *Grid) shift(j int) uint { return uint(g.sh[j]) }

// Field extracts dimension j's coordinate from a packed key (Words() words).
func (g *Grid) Field(key []uint64, j int) uint32 {
	return uint32(key[g.word[j]]>>g.sh[j]) & (1<<g.bits - 1)
}

// Encode writes the packed key of every row into keys (row-major, Words() words per row;
// len(keys) = rows * Words()).
func (g *Grid) Encode(cols [][]float32, keys []uint64) {
	W := g.words
	n := len(cols[0])
	clear(keys[:n*W])
	for j, c := range cols {
		w, s := j/g.perWord, g.shift(j)
		for i, x := range c {
			keys[i*W+w] |= uint64(g.Coord(j, x)) << s
		}
	}
}

// errShape is the sentinel of the columns' shape errors (no dimension, columns of unequal
// lengths), which microcluster.CheckColumns, the check of every algorithm over column-major
// data, reports.
var errShape = errors.New("hypercube: inconsistent shapes")

// shape checks equal-length columns, at least one, and returns the row count.
func shape(cols [][]float32) (int, error) { return microcluster.CheckColumns(cols, nil, errShape) }
