package hypercube

import "slices"

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
// last (least significant) to the first, 8 bits per pass over the bits a word actually uses:
// O(n * d * bits / 8) and stable, so equal keys keep their row order.
func Distinct(g *Grid, keys []uint64, rows int) *Cells {
	W := g.words
	if rows == 0 {
		return &Cells{Grid: g}
	}
	order := make([]int32, rows)
	for i := range order {
		order[i] = int32(i)
	}
	tmpOrder := make([]int32, rows)
	word := make([]uint64, rows)
	tmpWord := make([]uint64, rows)
	d := g.Dims()
	for w := W - 1; w >= 0; w-- {
		dimsHere := min(g.perWord, d-w*g.perWord)
		// The used bits of word w are its top dimsHere*bits bits below the top unused ones.
		lowBit := uint((g.perWord - dimsHere) * g.bits)
		highBit := uint(g.perWord * g.bits)
		for i, r := range order {
			word[i] = keys[int(r)*W+w]
		}
		for shift := lowBit; shift < highBit; shift += 8 {
			var hist [257]int
			for _, k := range word {
				hist[(k>>shift)&0xff+1]++
			}
			if hist[(word[0]>>shift)&0xff+1] == rows {
				continue // every key has the same byte here: the pass would not move anything
			}
			for b := 1; b < 257; b++ {
				hist[b] += hist[b-1]
			}
			for i, k := range word {
				b := (k >> shift) & 0xff
				p := hist[b]
				hist[b]++
				tmpWord[p] = k
				tmpOrder[p] = order[i]
			}
			word, tmpWord = tmpWord, word
			order, tmpOrder = tmpOrder, order
		}
	}
	c := &Cells{Grid: g, RowCell: make([]int32, rows)}
	for i, r := range order {
		k := keys[int(r)*W : int(r)*W+W]
		if i == 0 || !slices.Equal(k, c.Keys[len(c.Keys)-W:]) {
			c.Keys = append(c.Keys, k...)
			c.Count = append(c.Count, 0)
		}
		c.Count[len(c.Count)-1]++
		c.RowCell[r] = int32(len(c.Count) - 1)
	}
	return c
}
