package hypercube

import (
	"slices"
	"strings"
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

func sub(cols [][]float32, lo, hi int) [][]float32 {
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = c[lo:hi]
	}
	return out
}

// TestCountsSlidingWindow: adding each batch and removing the one that leaves the window gives,
// after every step, the cells and counts that Distinct builds from scratch on the window's rows,
// and Score's w equals the brute-force neighbour count against the window (with values outside
// the grid's range clamped to the edge cells, as the frozen grid does).
func TestCountsSlidingWindow(t *testing.T) {
	r := newRand(t, 7)
	for _, c := range []struct {
		name       string
		d, bins    int
		batch, win int
	}{
		{"4-D b=7", 4, 7, 97, 5},
		{"18-D b=5", 18, 5, 120, 4},
		{"128-D b=3", 128, 3, 40, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			const batches = 14
			data := testcols.Blobs(r, c.batch*batches, c.d, 4)
			// Freeze the grid on the first window; later batches reach outside it.
			g, err := FitGrid(sub(data, 0, c.batch*c.win), c.bins)
			if err != nil {
				t.Fatal(err)
			}
			cnt := NewCounts(g)
			queries := testcols.Blobs(r, 60, c.d, 4)
			for b := range batches {
				if err := cnt.Add(sub(data, b*c.batch, (b+1)*c.batch)); err != nil {
					t.Fatal(err)
				}
				if b >= c.win {
					old := b - c.win
					if err := cnt.Remove(sub(data, old*c.batch, (old+1)*c.batch)); err != nil {
						t.Fatal(err)
					}
				}
				lo := max(0, b-c.win+1) * c.batch
				win := sub(data, lo, (b+1)*c.batch)
				n := len(win[0])
				if cnt.Total() != int64(n) {
					t.Fatalf("batch %d: total %d, window %d", b, cnt.Total(), n)
				}
				keys := make([]uint64, n*g.Words())
				g.Encode(win, keys)
				want := Distinct(g, keys, n)
				got := cnt.Cells()
				if !slices.Equal(got.Keys, want.Keys) || !slices.Equal(got.Count, want.Count) {
					t.Fatalf("batch %d: counts differ from a build from scratch (%d vs %d cells)", b, got.Len(), want.Len())
				}
				checkCountsScore(t, g, cnt, win, queries)                             // mostly empty cells: tree walks
				checkCountsScore(t, g, cnt, win, sub(data, b*c.batch, (b+1)*c.batch)) // the batch just added: occupied cells
			}
		})
	}
}

// checkCountsScore compares Score with the brute-force neighbour count of each query against the
// window, on the frozen grid, and O with 1 - w/w_max clamped at 0.
func checkCountsScore(t *testing.T, g *Grid, cnt *Counts, win, queries [][]float32) {
	t.Helper()
	coord := func(cols [][]float32, i int) []int {
		c := make([]int, len(cols))
		for j := range cols {
			c[j] = int(g.Coord(j, cols[j][i]))
		}
		return c
	}
	near := func(a, b []int) bool {
		for j := range a {
			if a[j]-b[j] > 1 || b[j]-a[j] > 1 {
				return false
			}
		}
		return true
	}
	n := len(win[0])
	wc := make([][]int, n)
	for i := range wc {
		wc[i] = coord(win, i)
	}
	var wMax int64
	for _, a := range wc {
		var w int64
		for _, b := range wc {
			if near(a, b) {
				w++
			}
		}
		wMax = max(wMax, w)
	}
	nq := len(queries[0])
	w := make([]int64, nq)
	o := make([]float64, nq)
	if err := cnt.Score(queries, w, o); err != nil {
		t.Fatal(err)
	}
	for q := range nq {
		a := coord(queries, q)
		var want int64
		for _, b := range wc {
			if near(a, b) {
				want++
			}
		}
		if w[q] != want {
			t.Fatalf("query %d: w %d, brute force %d", q, w[q], want)
		}
		if wo := max(0, 1-float64(want)/float64(wMax)); o[q] != wo {
			t.Fatalf("query %d: O %v, want %v", q, o[q], wo)
		}
	}
}

func TestCountsRemoveUnknownChangesNothing(t *testing.T) {
	g, err := NewGrid(4, []float64{0, 0}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	cnt := NewCounts(g)
	if err := cnt.Add([][]float32{{0.1, 0.1, 0.9}, {0.1, 0.1, 0.9}}); err != nil {
		t.Fatal(err)
	}
	err = cnt.Remove([][]float32{{0.1, 0.1, 0.1}, {0.1, 0.1, 0.1}}) // three rows of a cell that holds two
	if err == nil || !strings.Contains(err.Error(), "not added") {
		t.Fatalf("removing more than was added: %v", err)
	}
	if cnt.Total() != 3 || cnt.Len() != 2 || !slices.Equal(cnt.Cells().Count, []int32{2, 1}) {
		t.Fatalf("a refused Remove changed the counts: total %d, cells %d, counts %v", cnt.Total(), cnt.Len(), cnt.Cells().Count)
	}
	if err := cnt.Add([][]float32{{0.5}}); err == nil || !strings.Contains(err.Error(), "1 dimensions, the grid has 2") {
		t.Fatalf("wrong dimensions: %v", err)
	}
	if err := cnt.Remove([][]float32{{0.1, 0.1, 0.9}, {0.1, 0.1, 0.9}}); err != nil {
		t.Fatal(err)
	}
	w, o := make([]int64, 1), make([]float64, 1)
	if err := cnt.Score([][]float32{{0.5}, {0.5}}, w, o); err != nil || w[0] != 0 || o[0] != 1 {
		t.Fatalf("empty counts: w %d, O %v, err %v; want 0, 1", w[0], o[0], err)
	}
}

// TestCellsRoundTrip: counts written by AppendCells, read by ReadCells and made Counts again by
// CountsOf score every query exactly as the original (18 dimensions: keys of two words), and
// damaged bytes (cut short, a count of zero, keys out of order) are errors.
func TestCellsRoundTrip(t *testing.T) {
	r := newRand(t, 11)
	data := testcols.Blobs(r, 3000, 18, 4)
	g, err := FitGrid(data, 5)
	if err != nil {
		t.Fatal(err)
	}
	orig := NewCounts(g)
	if err := orig.Add(data); err != nil {
		t.Fatal(err)
	}
	enc := AppendCells(nil, orig.Cells())
	cells, err := ReadCells(enc)
	if err != nil {
		t.Fatal(err)
	}
	got := CountsOf(cells)
	if got.Total() != orig.Total() || got.Len() != orig.Len() {
		t.Fatalf("read back %d rows in %d cells, want %d in %d", got.Total(), got.Len(), orig.Total(), orig.Len())
	}
	q := testcols.Blobs(r, 200, 18, 4)
	w1, o1, w2, o2 := make([]int64, 200), make([]float64, 200), make([]int64, 200), make([]float64, 200)
	if err := orig.Score(q, w1, o1); err != nil {
		t.Fatal(err)
	}
	if err := got.Score(q, w2, o2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w1, w2) || !slices.Equal(o1, o2) {
		t.Fatal("scores of the counts read back differ from the original's")
	}
	W := g.Words()
	zero := slices.Clone(enc)
	clear(zero[len(zero)-4:]) // the last cell's count
	swapped := slices.Clone(enc)
	head := 8 + 18*16 + 8
	copy(swapped[head:head+8*W], enc[head+8*W:head+16*W]) // cell 0's key := cell 1's
	for name, b := range map[string][]byte{"cut short": enc[:len(enc)-3], "zero count": zero, "keys out of order": swapped, "empty": nil} {
		if _, err := ReadCells(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestScoreCountingSelf: ScoreCounting's rows marked self read one more neighbour than Score
// gives them (the query counting itself) and O from that w against the same w_max; the other
// rows read Score's w and O; with nothing counted a self row reads 1 and O 1.
func TestScoreCountingSelf(t *testing.T) {
	r := newRand(t, 3)
	data := testcols.Blobs(r, 400, 3, 2)
	g, err := FitGrid(data, 5)
	if err != nil {
		t.Fatal(err)
	}
	cnt := NewCounts(g)
	q := testcols.Blobs(r, 50, 3, 2)
	self := make([]bool, 50)
	for i := range self {
		self[i] = i%3 == 0
	}
	w0, o0, w1, o1 := make([]int64, 50), make([]float64, 50), make([]int64, 50), make([]float64, 50)
	if err := cnt.ScoreCounting(q, self, w1, o1); err != nil {
		t.Fatal(err)
	}
	for i := range w1 {
		if want := int64(0); self[i] {
			want = 1
			if w1[i] != want || o1[i] != 1 {
				t.Fatalf("nothing counted, self row %d: w %d, O %v; want 1, 1", i, w1[i], o1[i])
			}
		}
	}
	if err := cnt.Add(data); err != nil {
		t.Fatal(err)
	}
	if err := cnt.Score(q, w0, o0); err != nil {
		t.Fatal(err)
	}
	if err := cnt.ScoreCounting(q, self, w1, o1); err != nil {
		t.Fatal(err)
	}
	wMax := int64(0) // (O = 1 - w / w_max: w_max from a row Score gives O < 1)
	for i := range w0 {
		if o0[i] > 0 && o0[i] < 1 {
			wMax = int64(float64(w0[i])/(1-o0[i]) + 0.5)
			break
		}
	}
	if wMax == 0 {
		t.Fatal("no query with 0 < O < 1")
	}
	for i := range w0 {
		want := w0[i]
		if self[i] {
			want++
		}
		if w1[i] != want || o1[i] != max(0, Score(want, wMax)) {
			t.Errorf("row %d (self %v): w %d O %v; want %d, %v", i, self[i], w1[i], o1[i], want, max(0, Score(want, wMax)))
		}
	}
	if err := cnt.ScoreCounting(q, self[:3], w1, o1); err == nil {
		t.Error("a self of 3 rows for 50 queries was accepted")
	}
}
