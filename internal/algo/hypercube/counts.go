package hypercube

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
)

// maxWords is the longest key: MaxDims dimensions of 16 bits, 3 per word.
const maxWords = (MaxDims + 62/16 - 1) / (62 / 16)

// Counts is the streaming form of the score: the exact number of points per occupied cell of a
// grid frozen when the model was built (its Min/Max/Scale never move, so a cell keeps its key
// while points come and go), kept in a hash map from packed key to count. Add and Remove change
// the counts of a batch's cells only (O(batch * d)); nothing is rebuilt.
//
// Score needs w of the query cells and w_max over the window, i.e. neighbour sums. It builds a
// search index (the sorted occupied cells, their LTR tree and every cell's w, as Detect does) the
// first time it is called after the counts changed, and reuses it until they change again: one
// index per batch in the pipeline's add-score-evict cycle (the sort plus the neighbour search of
// every occupied cell, on all cores), and the map itself is never rebuilt. A query in an occupied
// cell (a batch scored after it was added) then costs a binary search; only queries in empty
// cells walk the tree. Not safe for concurrent use.
type Counts struct {
	g     *Grid
	m     map[string]int32
	total int64
	snap  *snapshot // nil when the counts changed since it was built
	buf   [maxWords * 8]byte
	key   [maxWords]uint64
}

// snapshot is the search index over the counts at one moment: the sorted cells, their tree and
// the w of every occupied cell.
type snapshot struct {
	cells *Cells
	tree  *Tree
	w     []int64
	wMax  int64
}

// lookup returns w of the cell with key k: its precomputed w when it is occupied (binary search
// in the sorted keys), else a tree search.
func (s *snapshot) lookup(k []uint64) int64 {
	W := len(k)
	keys := s.cells.Keys
	i, found := sort.Find(s.cells.Len(), func(i int) int { return slices.Compare(k, keys[i*W:i*W+W]) })
	if found {
		return s.w[i]
	}
	return s.tree.Search(s.cells, k)
}

// NewCounts returns empty counts over grid g.
func NewCounts(g *Grid) *Counts { return &Counts{g: g, m: map[string]int32{}} }

// Grid is the frozen grid.
func (c *Counts) Grid() *Grid { return c.g }

// Len is the number of occupied cells.
func (c *Counts) Len() int { return len(c.m) }

// Total is the number of points counted.
func (c *Counts) Total() int64 { return c.total }

// rowKey packs row i of cols into c.key and returns it and its bytes (valid until the next call).
func (c *Counts) rowKey(cols [][]float32, i int) ([]uint64, []byte) {
	g := c.g
	W := g.words
	k := c.key[:W]
	clear(k)
	for j, col := range cols {
		k[j/g.perWord] |= uint64(g.Coord(j, col[i])) << g.shift(j)
	}
	for w, v := range k {
		binary.BigEndian.PutUint64(c.buf[w*8:], v)
	}
	return k, c.buf[:W*8]
}

func (c *Counts) check(what string, cols [][]float32) (int, error) {
	n, err := shape(cols)
	if err != nil {
		return 0, fmt.Errorf("hypercube.Counts.%s: %w", what, err)
	}
	if len(cols) != c.g.Dims() {
		return 0, fmt.Errorf("hypercube.Counts.%s: %d dimensions, the grid has %d", what, len(cols), c.g.Dims())
	}
	for j, col := range cols {
		for i, v := range col {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("hypercube.Counts.%s: row %d dimension %d is %v: values must be finite", what, i, j, v)
			}
		}
	}
	return n, nil
}

// Add counts every row of a batch (column-major, the grid's dimensions, finite values).
func (c *Counts) Add(cols [][]float32) error {
	n, err := c.check("Add", cols)
	if err != nil {
		return err
	}
	for i := range n {
		_, b := c.rowKey(cols, i)
		c.m[string(b)]++
	}
	c.total += int64(n)
	if n > 0 {
		c.snap = nil
	}
	return nil
}

// Remove uncounts every row of a batch added before (the rows leaving the window). It changes
// nothing and returns an error if some cell would go below zero (rows that were never added).
func (c *Counts) Remove(cols [][]float32) error {
	n, err := c.check("Remove", cols)
	if err != nil {
		return err
	}
	dec := map[string]int32{}
	for i := range n {
		_, b := c.rowKey(cols, i)
		dec[string(b)]++
	}
	for k, v := range dec {
		if c.m[k] < v {
			return fmt.Errorf("hypercube.Counts.Remove: %d rows of a cell that holds %d: rows removed that were not added", v, c.m[k])
		}
	}
	for k, v := range dec {
		if c.m[k] == v {
			delete(c.m, k)
		} else {
			c.m[k] -= v
		}
	}
	c.total -= int64(n)
	if n > 0 {
		c.snap = nil
	}
	return nil
}

// Cells returns the occupied cells in key order with their counts (RowCell is nil): what
// Distinct gives on the rows now counted.
func (c *Counts) Cells() *Cells {
	if c.snap != nil {
		return c.snap.cells
	}
	return c.sorted()
}

// sorted lists the map's cells in key order.
func (c *Counts) sorted() *Cells {
	g := c.g
	W := g.words
	keys := make([]uint64, 0, len(c.m)*W)
	counts := make([]int32, 0, len(c.m))
	for k, v := range c.m {
		for w := range W {
			keys = append(keys, binary.BigEndian.Uint64([]byte(k[w*8:])))
		}
		counts = append(counts, v)
	}
	cells := Distinct(g, keys, len(counts)) // distinct already: this only sorts
	for i, cell := range cells.RowCell {
		cells.Count[cell] = counts[i]
	}
	cells.RowCell = nil
	return cells
}

func (c *Counts) index() (*snapshot, error) {
	if c.snap != nil {
		return c.snap, nil
	}
	cells := c.sorted()
	tree, err := BuildTree(cells, DefaultMinSplit)
	if err != nil {
		return nil, fmt.Errorf("hypercube.Counts.Score: %w", err)
	}
	s := &snapshot{cells: cells, tree: tree, w: make([]int64, cells.Len())}
	s.tree.Density(cells, s.w, 0)
	for _, v := range s.w {
		s.wMax = max(s.wMax, v)
	}
	c.snap = s
	return s, nil
}

// Score writes, for every query row, w (the counted points in its cell and the cells within +-1
// of it in every dimension) into w and O = 1 - w / w_max into o, w_max being the largest w of an
// occupied cell. A query need not be counted itself; when its neighbourhood holds more than w_max
// points (an empty cell between dense ones) O is clamped to 0. With nothing counted every w is 0
// and every O is 1. len(w) and len(o) must be the row count; o may be nil.
func (c *Counts) Score(cols [][]float32, w []int64, o []float64) error {
	return c.ScoreCounting(cols, nil, w, o)
}

// ScoreCounting is Score where the rows with self[i] (self nil: none) are queries that are not
// counted but count themselves: their w is one more than the counts give (the detect stage's
// records left out of the counts, scored as the counted ones, which are in their own cells).
func (c *Counts) ScoreCounting(cols [][]float32, self []bool, w []int64, o []float64) error {
	n, err := c.check("Score", cols)
	if err != nil {
		return err
	}
	if len(w) != n || (o != nil && len(o) != n) {
		return fmt.Errorf("hypercube.Counts.Score: %d rows but len(w) = %d, len(o) = %d", n, len(w), len(o))
	}
	if self != nil && len(self) != n {
		return fmt.Errorf("hypercube.Counts.Score: %d rows but len(self) = %d", n, len(self))
	}
	counted := func(i int) int64 { // (the query itself, where it is not counted)
		if self != nil && self[i] {
			return 1
		}
		return 0
	}
	if len(c.m) == 0 {
		for i := range n {
			w[i] = counted(i)
			if o != nil {
				o[i] = 1
			}
		}
		return nil
	}
	s, err := c.index()
	if err != nil {
		return err
	}
	for i := range n {
		k, _ := c.rowKey(cols, i)
		w[i] = s.lookup(k) + counted(i)
		if o != nil {
			o[i] = max(0, Score(w[i], s.wMax))
		}
	}
	return nil
}

// CountsOf makes Counts holding cells' counts (cells from Counts.Cells or Distinct, on the same
// grid): how a process that keeps no window of its own takes over another's counts.
func CountsOf(cells *Cells) *Counts {
	c := NewCounts(cells.Grid)
	W := cells.Grid.words
	b := make([]byte, W*8)
	for i, n := range cells.Count {
		for w, k := range cells.Keys[i*W : (i+1)*W] {
			binary.BigEndian.PutUint64(b[w*8:], k)
		}
		c.m[string(b)] += n
		c.total += int64(n)
	}
	return c
}

// AppendCells appends cells in a binary form that ReadCells reads back (little-endian: bins
// u32, dims u32, dims x {min f64, max f64}, cells u64, cells x words x key u64, cells x count
// i32). It carries no checksum: the caller's envelope does (the model topic's SHA-256).
func AppendCells(b []byte, cells *Cells) []byte {
	g := cells.Grid
	b = binary.LittleEndian.AppendUint32(b, uint32(g.Bins))
	b = binary.LittleEndian.AppendUint32(b, uint32(g.Dims()))
	for j := range g.Dims() {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(g.Min[j]))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(g.Max[j]))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(cells.Len()))
	for _, k := range cells.Keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	for _, n := range cells.Count {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	return b
}

// ReadCells reads what AppendCells wrote, checking every length and that the keys ascend and
// lie in the grid, so that a damaged input is an error, never a panic or a wrong count.
func ReadCells(b []byte) (*Cells, error) {
	bad := func(what string) (*Cells, error) { return nil, fmt.Errorf("hypercube.ReadCells: %s", what) }
	if len(b) < 8 {
		return bad("short header")
	}
	bins, dims := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	b = b[8:]
	if dims < 1 || dims > MaxDims || len(b) < dims*16+8 {
		return bad(fmt.Sprintf("%d dimensions, %d bytes left", dims, len(b)))
	}
	lo, hi := make([]float64, dims), make([]float64, dims)
	for j := range dims {
		lo[j], hi[j] = math.Float64frombits(binary.LittleEndian.Uint64(b)), math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
		b = b[16:]
	}
	g, err := NewGrid(bins, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("hypercube.ReadCells: %w", err)
	}
	n := binary.LittleEndian.Uint64(b)
	b = b[8:]
	W := g.words
	if n > uint64(len(b)) || uint64(len(b)) != n*uint64(W*8+4) {
		return bad(fmt.Sprintf("%d cells of %d words in %d bytes", n, W, len(b)))
	}
	cells := &Cells{Grid: g, Keys: make([]uint64, int(n)*W), Count: make([]int32, n)}
	for i := range cells.Keys {
		cells.Keys[i] = binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for i := range cells.Count {
		if cells.Count[i] = int32(binary.LittleEndian.Uint32(b)); cells.Count[i] <= 0 {
			return bad(fmt.Sprintf("cell %d counts %d", i, cells.Count[i]))
		}
		b = b[4:]
	}
	for i := range cells.Len() {
		k := cells.Key(i)
		for j := range dims {
			if int(g.Field(k, j)) >= bins {
				return bad(fmt.Sprintf("cell %d outside the grid in dimension %d", i, j))
			}
		}
		if i > 0 && slices.Compare(cells.Key(i-1), k) >= 0 {
			return bad(fmt.Sprintf("cell keys not ascending at %d", i))
		}
	}
	return cells, nil
}
