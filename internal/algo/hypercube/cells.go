package hypercube

import (
	"runtime"
	"slices"
	"sync"
)

// radixBits is the digit of one radix pass: 2048 buckets (54 used key bits, d = 18 at b = 7,
// take 5 passes instead of 7 with bytes; the per-chunk histograms stay in L1/L2).
const (
	radixBits = 11
	radixMask = 1<<radixBits - 1
)

// parallelism and minChunk bound Distinct's goroutines: at most parallelism(), each with at least
// minChunk rows (below that a goroutine costs more than it saves). Variables for the tests.
var (
	parallelism = func() int { return runtime.GOMAXPROCS(0) }
	minChunk    = 1 << 15
)

// Cells are the distinct non-empty cells of a data set in lexicographic order (dimension 0
// first): the paper's hypercube array H with its counts C, found by sort + unique of the packed
// keys.
type Cells struct {
	Grid *Grid
	// Keys holds Len() packed keys, Grid.Words() words each, ascending.
	Keys []uint64
	// Count[c] is the number of rows in cell c.
	Count []int32
	// RowCell[i] is the cell of input row i.
	RowCell []int32
}

// Len is the number of distinct cells.
func (c *Cells) Len() int { return len(c.Count) }

// Key is cell i's packed key.
func (c *Cells) Key(i int) []uint64 {
	W := c.Grid.words
	return c.Keys[i*W : (i+1)*W]
}

// Distinct sorts the rows' packed keys (row-major, g.Words() per row) and keeps the distinct
// ones with their counts. The sort is an LSD radix sort of the row order, word by word from the
// last (least significant) to the first, radixBits bits per pass over the bits a word actually uses:
// O(n * d * bits / radixBits) and stable, so equal keys keep their row order. Each pass and the unique
// step run on up to GOMAXPROCS goroutines over contiguous chunks (per-chunk histograms, offsets
// in digit-then-chunk order: still stable).
func Distinct(g *Grid, keys []uint64, rows int) *Cells {
	W := g.words
	if rows == 0 {
		return &Cells{Grid: g}
	}
	P := min(parallelism(), max(1, rows/minChunk))
	chunk := (rows + P - 1) / P
	par := func(f func(p, lo, hi int)) {
		var wg sync.WaitGroup
		for p := range P {
			lo, hi := p*chunk, min(rows, (p+1)*chunk)
			if lo >= hi {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(p, lo, hi)
			}()
		}
		wg.Wait()
	}
	order := make([]int32, rows)
	par(func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			order[i] = int32(i)
		}
	})
	tmpOrder := make([]int32, rows)
	word := make([]uint64, rows)
	tmpWord := make([]uint64, rows)
	hist := make([][1 << radixBits]int, P)
	d := g.Dims()
	for w := W - 1; w >= 0; w-- {
		dimsHere := min(g.perWord, d-w*g.perWord)
		// The used bits of word w: dimsHere fields below the highest field position.
		lowBit := uint((g.perWord - dimsHere) * g.bits)
		highBit := uint(g.perWord * g.bits)
		par(func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				word[i] = keys[int(order[i])*W+w]
			}
		})
		for shift := lowBit; shift < highBit; shift += radixBits {
			par(func(p, lo, hi int) {
				h := &hist[p]
				clear(h[:])
				for _, k := range word[lo:hi] {
					h[(k>>shift)&radixMask]++
				}
			})
			// Offsets: digit-major, chunk-minor (stable); a pass where one digit holds every
			// key would move nothing and is skipped.
			pos, skip := 0, false
			for b := range 1 << radixBits {
				tot := 0
				for p := range P {
					tot += hist[p][b]
				}
				if tot == rows {
					skip = true
					break
				}
				for p := range P {
					n := hist[p][b]
					hist[p][b] = pos
					pos += n
				}
			}
			if skip {
				continue
			}
			par(func(p, lo, hi int) {
				h := &hist[p]
				for i := lo; i < hi; i++ {
					k := word[i]
					b := (k >> shift) & radixMask
					q := h[b]
					h[b]++
					tmpWord[q] = k
					tmpOrder[q] = order[i]
				}
			})
			word, tmpWord = tmpWord, word
			order, tmpOrder = tmpOrder, order
		}
	}
	// Unique: position i starts a cell when its key differs from position i-1's.
	isStart := func(i int) bool {
		if i == 0 {
			return true
		}
		a, b := int(order[i])*W, int(order[i-1])*W
		return !slices.Equal(keys[a:a+W], keys[b:b+W])
	}
	starts := make([]int, P+1)
	par(func(p, lo, hi int) {
		n := 0
		for i := lo; i < hi; i++ {
			if isStart(i) {
				n++
			}
		}
		starts[p+1] = n
	})
	for p := range P {
		starts[p+1] += starts[p]
	}
	H := starts[P]
	c := &Cells{Grid: g, Keys: make([]uint64, H*W), Count: make([]int32, H), RowCell: make([]int32, rows)}
	first := make([]int32, H+1) // first sorted position of each cell
	first[H] = int32(rows)
	par(func(p, lo, hi int) {
		cell := starts[p] - 1
		for i := lo; i < hi; i++ {
			r := int(order[i])
			if isStart(i) {
				cell++
				first[cell] = int32(i)
				copy(c.Keys[cell*W:cell*W+W], keys[r*W:r*W+W])
			}
			c.RowCell[r] = int32(cell)
		}
	})
	for i := range H {
		c.Count[i] = first[i+1] - first[i]
	}
	return c
}
