package hypercube

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

func newRand(t testing.TB, seed uint64) *rand.Rand {
	t.Helper()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x6879706572))
}

// bruteCoords computes every row's cell independently of Grid: x normalised to [0,1] by the
// column's min and max, times b, floored, x = max clamped to b-1, a constant column in cell 0.
func bruteCoords(cols [][]float32, b int) [][]int {
	n := len(cols[0])
	coords := make([][]int, n)
	for i := range coords {
		coords[i] = make([]int, len(cols))
	}
	for j, c := range cols {
		lo, hi := slices.Min(c), slices.Max(c)
		for i, x := range c {
			if hi == lo {
				continue
			}
			v := int(math.Floor((float64(x) - float64(lo)) / (float64(hi) - float64(lo)) * float64(b)))
			coords[i][j] = min(max(v, 0), b-1)
		}
	}
	return coords
}

// bruteW is the O(n^2 d) reference: for every row, the number of rows whose cell is within +-1
// of its cell in every dimension (itself included).
func bruteW(coords [][]int) []int64 {
	w := make([]int64, len(coords))
	for i, a := range coords {
		for _, b := range coords {
			near := true
			for j := range a {
				if a[j]-b[j] > 1 || b[j]-a[j] > 1 {
					near = false
					break
				}
			}
			if near {
				w[i]++
			}
		}
	}
	return w
}

// checkAgainstBrute runs Detect and compares every row's w and score with the reference.
func checkAgainstBrute(t *testing.T, cols [][]float32, p Params) *Result {
	t.Helper()
	res, err := Detect(cols, p)
	if err != nil {
		t.Fatal(err)
	}
	coords := bruteCoords(cols, p.Bins)
	want := bruteW(coords)
	wMax := slices.Max(want)
	if res.WMax != wMax {
		t.Fatalf("w_max %d, reference %d", res.WMax, wMax)
	}
	distinct := map[string]bool{}
	for i, c := range coords {
		distinct[fmt.Sprint(c)] = true
		got := res.W[res.Cells.RowCell[i]]
		if got != want[i] {
			t.Fatalf("row %d (cell %v): w %d, reference %d", i, c, got, want[i])
		}
		if s := 1 - float64(want[i])/float64(wMax); res.Scores[i] != s {
			t.Fatalf("row %d: score %v, reference %v", i, res.Scores[i], s)
		}
		for j := range c {
			if f := int(res.Grid.Field(res.Cells.Key(int(res.Cells.RowCell[i])), j)); f != c[j] {
				t.Fatalf("row %d dimension %d: cell coordinate %d, reference %d", i, j, f, c[j])
			}
		}
	}
	if res.Cells.Len() != len(distinct) {
		t.Fatalf("%d distinct cells, reference %d", res.Cells.Len(), len(distinct))
	}
	return res
}

func TestDetectMatchesBruteForce(t *testing.T) {
	cases := []struct {
		name string
		bins int
		make func(r *rand.Rand) [][]float32
	}{
		{"uniform 3-D b=7", 7, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 2000, 3) }},
		{"uniform 10-D b=4", 4, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 1500, 10) }},
		{"blobs 6-D b=7", 7, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 2000, 6, 5) }},
		{"blobs 18-D b=7", 7, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 1500, 18, 4) }},
		{"b=2", 2, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 800, 5) }},
		{"one dimension", 7, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 1000, 1, 3) }},
		{"one dimension b=1000", 1000, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 1000, 1) }},
		{"duplicates", 5, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 1200, 4)
			for j := range c {
				for i := range c[j] {
					c[j][i] = c[j][i%9] // 9 distinct points, each repeated
				}
			}
			return c
		}},
		{"all points in one cell", 7, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 300, 3)
			for j := range c {
				for i := range c[j] {
					c[j][i] = 0.5 // every dimension constant: one cell
				}
			}
			return c
		}},
		{"one constant dimension", 6, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 700, 3)
			for i := range c[1] {
				c[1][i] = -3
			}
			return c
		}},
		{"empty neighbours b=50", 50, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 300, 4) }},
		{"x exactly at 0, 1/b boundaries and 1.0", 4, func(r *rand.Rand) [][]float32 {
			c := testcols.Uniform(r, 1000, 3)
			for j := range c {
				for i := range c[j] {
					c[j][i] = float32(r.IntN(9)) / 8 // 0, 0.125, ..., 1.0: edges of the 4 bins and x = 1
				}
			}
			return c
		}},
		{"d=128 b=3 clustered", 3, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 600, 128, 3) }},
		{"d=128 b=7 uniform", 7, func(r *rand.Rand) [][]float32 { return testcols.Uniform(r, 400, 128) }},
		{"d=40 b=300 (multi-word, 9 bits)", 300, func(r *rand.Rand) [][]float32 { return testcols.Blobs(r, 800, 40, 2) }},
		{"negative and large values", 7, func(r *rand.Rand) [][]float32 {
			c := testcols.Blobs(r, 1000, 5, 3)
			for j := range c {
				for i := range c[j] {
					c[j][i] = c[j][i]*1e6 - 3e5
				}
			}
			return c
		}},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cols := c.make(newRand(t, uint64(10+ci)))
			// The tree's MinSplit changes the work, never the result: full tree, default, one leaf.
			for _, m := range []int{1, 0, 3, 1 << 30} {
				checkAgainstBrute(t, cols, Params{Bins: c.bins, MinSplit: m, Workers: 3})
			}
		})
	}
}

// TestJointOutlier: a point ordinary in every dimension alone but in an empty region of the
// joint space (the diagonal data, the anti-diagonal point) gets the highest score.
func TestJointOutlier(t *testing.T) {
	r := newRand(t, 2)
	const n = 3000
	cols := [][]float32{make([]float32, n+1), make([]float32, n+1)}
	for i := range n {
		x := r.Float32()
		cols[0][i] = x
		cols[1][i] = min(1, max(0, x+float32(0.02*r.NormFloat64())))
	}
	cols[0][n], cols[1][n] = 0.1, 0.9
	res := checkAgainstBrute(t, cols, Params{Bins: 7})
	for i := range n {
		if res.Scores[i] >= res.Scores[n] {
			t.Fatalf("row %d on the diagonal scores %v >= the off-diagonal point's %v", i, res.Scores[i], res.Scores[n])
		}
	}
	if res.Scores[n] != Score(1, res.WMax) {
		t.Fatalf("the isolated point's w is not 1: score %v", res.Scores[n])
	}
}

func TestGrid(t *testing.T) {
	for _, c := range []struct{ bins, bits, per int }{{2, 1, 62}, {3, 2, 31}, {7, 3, 20}, {8, 3, 20}, {9, 4, 15}, {1000, 10, 6}, {MaxBins, 16, 3}} {
		g, err := NewGrid(c.bins, []float64{0}, []float64{1})
		if err != nil {
			t.Fatal(err)
		}
		if g.Bits() != c.bits || g.PerWord() != c.per {
			t.Errorf("b=%d: %d bits, %d per word; want %d, %d", c.bins, g.Bits(), g.PerWord(), c.bits, c.per)
		}
		if got := g.Coord(0, 1); got != uint32(c.bins-1) {
			t.Errorf("b=%d: x = 1.0 in cell %d, want the last (%d)", c.bins, got, c.bins-1)
		}
	}
	g, err := NewGrid(7, []float64{0, 2, -1}, []float64{1, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		j    int
		x    float32
		want uint32
	}{
		{0, 0, 0}, {0, 0.5, 3}, {0, 1.0 / 7, 1}, {0, 0.999, 6}, {0, 1, 6},
		{0, -5, 0}, {0, 7, 6}, // outside the fitted range: the edge cells
		{1, 2, 0}, {1, 100, 0}, // constant dimension: cell 0 whatever the value
		{2, 0, 3}, {2, -1, 0}, {2, 1, 6},
	} {
		if got := g.Coord(c.j, c.x); got != c.want {
			t.Errorf("Coord(%d, %v) = %d, want %d", c.j, c.x, got, c.want)
		}
	}
	if g.Words() != 1 {
		t.Errorf("3 dims of 3 bits: %d words", g.Words())
	}
	mins, maxs := make([]float64, 128), make([]float64, 128)
	for j := range maxs {
		maxs[j] = 1
	}
	if g, _ := NewGrid(7, mins, maxs); g.Words() != 7 { // 20 dims per word
		t.Errorf("128 dims of 3 bits: %d words, want 7", g.Words())
	}
	if g, _ := NewGrid(MaxBins, mins, maxs); g.Words() != 43 || maxWords != 43 { // 3 dims per word
		t.Errorf("128 dims of 16 bits: %d words (maxWords %d), want 43", g.Words(), maxWords)
	}
}

func TestErrors(t *testing.T) {
	ok := [][]float32{{0, 1}, {1, 2}}
	wide := make([][]float32, MaxDims+1)
	for j := range wide {
		wide[j] = []float32{0, 1}
	}
	cases := []struct {
		name string
		cols [][]float32
		bins int
		want string
	}{
		{"bins=1", ok, 1, "bins must be in [2, 65536], got 1"},
		{"bins too many", ok, MaxBins + 1, "bins must be in"},
		{"129 dims", wide, 7, "129 dimensions, at most 128"},
		{"NaN", [][]float32{{0, float32(math.NaN())}}, 7, "row 1 dimension 0 is NaN"},
		{"Inf", [][]float32{{0, 1}, {float32(math.Inf(1)), 0}}, 7, "row 0 dimension 1 is +Inf"},
		{"ragged", [][]float32{{0, 1}, {0}}, 7, "dimension 1 has 1 rows"},
		{"no dims", nil, 7, "no dimensions"},
		{"no rows", [][]float32{{}}, 7, "no rows"},
	}
	for _, c := range cases {
		_, err := Detect(c.cols, Params{Bins: c.bins})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Detect(wide, Params{Bins: 7}); !errors.Is(err, ErrTooManyDims) {
		t.Errorf("129 dims: %v does not wrap ErrTooManyDims", err)
	}
	// The shape is microcluster.CheckColumns's check, its errors under hypercube's sentinel.
	for _, cols := range [][][]float32{nil, {{0, 1}, {0}}} {
		if _, err := Detect(cols, Params{Bins: 7}); !errors.Is(err, errShape) {
			t.Errorf("%v: %v does not wrap errShape", cols, err)
		}
	}
}

// TestDistinctOrder: keys strictly ascending, lexicographic in the coordinates, counts sum to the
// rows, and every row's cell has the row's key.
func TestDistinctOrder(t *testing.T) {
	r := newRand(t, 5)
	for _, bins := range []int{2, 7, 300} {
		cols := testcols.Blobs(r, 5000, 30, 3)
		g, err := FitGrid(cols, bins)
		if err != nil {
			t.Fatal(err)
		}
		W := g.Words()
		keys := make([]uint64, 5000*W)
		g.Encode(cols, keys)
		c := Distinct(g, keys, 5000)
		var sum int32
		for i := range c.Len() {
			sum += c.Count[i]
			if i > 0 {
				a, b := c.Key(i-1), c.Key(i)
				if slices.Compare(a, b) >= 0 {
					t.Fatalf("b=%d: keys %d and %d not ascending", bins, i-1, i)
				}
				ca, cb := make([]uint32, 30), make([]uint32, 30)
				for j := range 30 {
					ca[j], cb[j] = g.Field(a, j), g.Field(b, j)
				}
				if slices.Compare(ca, cb) >= 0 {
					t.Fatalf("b=%d: coordinates of cells %d, %d not lexicographically ascending", bins, i-1, i)
				}
			}
		}
		if sum != 5000 {
			t.Fatalf("counts sum to %d", sum)
		}
		for i, cell := range c.RowCell {
			if !slices.Equal(c.Key(int(cell)), keys[i*W:(i+1)*W]) {
				t.Fatalf("row %d: its cell's key differs from its own", i)
			}
		}
	}
}

// TestNearMatchesScalar: the word-parallel neighbour test equals the per-dimension definition on
// keys whose coordinates differ by -2..2 (and sit at 0 and b-1, where a carry or borrow would
// show), for every key width and every starting dimension.
func TestNearMatchesScalar(t *testing.T) {
	r := newRand(t, 11)
	for _, bins := range []int{2, 3, 4, 5, 7, 8, 9, 16, 17, 300, 1 << 15, MaxBins} {
		for _, d := range []int{1, 5, 20, 21, 64, 128} {
			mins, maxs := make([]float64, d), make([]float64, d)
			g, err := NewGrid(bins, mins, maxs)
			if err != nil {
				t.Fatal(err)
			}
			W := g.Words()
			for range 400 {
				ca, cb := make([]int, d), make([]int, d)
				a, b := make([]uint64, W), make([]uint64, W)
				for j := range d {
					switch r.IntN(4) {
					case 0:
						ca[j] = 0
					case 1:
						ca[j] = bins - 1
					default:
						ca[j] = r.IntN(bins)
					}
					cb[j] = min(bins-1, max(0, ca[j]+r.IntN(5)-2))
					if r.IntN(3) > 0 {
						cb[j] = min(bins-1, max(0, ca[j]+r.IntN(3)-1)) // mostly near: whole keys pass too
					}
					a[j/g.perWord] |= uint64(ca[j]) << g.shift(j)
					b[j/g.perWord] |= uint64(cb[j]) << g.shift(j)
				}
				from := r.IntN(d + 1)
				want := true
				for j := from; j < d; j++ {
					if ca[j]-cb[j] > 1 || cb[j]-ca[j] > 1 {
						want = false
					}
				}
				if got := g.near(a, b, from); got != want {
					t.Fatalf("b=%d d=%d from %d: near %v, definition %v\n%v\n%v", bins, d, from, got, want, ca, cb)
				}
			}
		}
	}
}

// TestDistinctParallelMatchesStableSort: the chunked radix sort and unique give the cells, counts
// and row cells of a plain stable sort, with cells that span chunk boundaries (few distinct keys,
// many rows) and with nearly all keys distinct, for one- and multi-word keys.
func TestDistinctParallelMatchesStableSort(t *testing.T) {
	defer func(p func() int, m int) { parallelism, minChunk = p, m }(parallelism, minChunk)
	parallelism, minChunk = func() int { return 7 }, 100
	r := newRand(t, 13)
	for _, c := range []struct {
		name    string
		cols    [][]float32
		bins    int
		workers int
	}{
		{"few cells, 1 word", testcols.Blobs(r, 20000, 3, 2), 3, 7},
		{"few cells, 3 words", testcols.Blobs(r, 20000, 50, 2), 3, 5},
		{"distinct, 2 words", testcols.Uniform(r, 30000, 28), 7, 7},
		{"16-bit fields", testcols.Uniform(r, 10000, 7), MaxBins, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			parallelism = func() int { return c.workers }
			g, err := FitGrid(c.cols, c.bins)
			if err != nil {
				t.Fatal(err)
			}
			n, W := len(c.cols[0]), g.Words()
			keys := make([]uint64, n*W)
			g.Encode(c.cols, keys)
			got := Distinct(g, keys, n)
			idx := make([]int, n)
			for i := range idx {
				idx[i] = i
			}
			slices.SortStableFunc(idx, func(a, b int) int { return slices.Compare(keys[a*W:a*W+W], keys[b*W:b*W+W]) })
			var wantKeys []uint64
			var wantCount []int32
			wantCell := make([]int32, n)
			for p, i := range idx {
				if p == 0 || !slices.Equal(keys[i*W:i*W+W], wantKeys[len(wantKeys)-W:]) {
					wantKeys = append(wantKeys, keys[i*W:i*W+W]...)
					wantCount = append(wantCount, 0)
				}
				wantCount[len(wantCount)-1]++
				wantCell[i] = int32(len(wantCount) - 1)
			}
			if !slices.Equal(got.Keys, wantKeys) || !slices.Equal(got.Count, wantCount) || !slices.Equal(got.RowCell, wantCell) {
				t.Fatalf("differs from a stable sort: %d cells, want %d", got.Len(), len(wantCount))
			}
			t.Logf("%d cells", got.Len())
		})
	}
}

// TestBuildTreeRefusesOverflow: a tree that could need 2^31 nodes (32-bit indices) is refused
// before it is built, with the way out in the message.
func TestBuildTreeRefusesOverflow(t *testing.T) {
	mins, maxs := make([]float64, 128), make([]float64, 128)
	g, err := NewGrid(7, mins, maxs)
	if err != nil {
		t.Fatal(err)
	}
	// 16,647,161 cells * (1 + 128/1) >= 2^31 - 1: only the count is read before the refusal.
	c := &Cells{Grid: g, Count: make([]int32, 16_647_161)}
	if _, err := BuildTree(c, 1); err == nil || !strings.Contains(err.Error(), "raise MinSplit") {
		t.Fatalf("complete tree over 16.6M cells at d = 128: %v, want a refusal", err)
	}
}
