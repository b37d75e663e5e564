package rank

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"unsafe"
)

// TestCalibrationIndexedSearch pins the calibration's two-level search (index, then one leaf)
// to the search of the whole sorted array it replaced (SearchFloat64s, and sort.SearchFloat64s
// for r not NaN), and Surprisal with the index to Surprisal without it, bit for bit: sizes
// around the index's stride (1 to 70, 199-201, 255-257, 4096, 5000), scores continuous, in a
// few tied values, constant, in runs that straddle the stride's boundaries, with ±0; searched
// at every score, the floats either side of it, between neighbours, below the smallest, above
// the largest, ±Inf and NaN. Also that Leaf holds every score the surprisal reads.
func TestCalibrationIndexedSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 9))
	var sizes []int
	for n := 1; n <= 70; n++ {
		sizes = append(sizes, n)
	}
	// 511-513, 527-529: the index's 32 and 33 entries either side of indexSearch's switch
	// from the count to the binary search (2*IndexStride entries).
	sizes = append(sizes, 199, 200, 201, 255, 256, 257, 511, 512, 513, 527, 528, 529, 4096, 5000)
	for _, n := range sizes {
		for _, kind := range []string{"normal", "ties", "constant", "runs", "zeros"} {
			s := make([]float64, n)
			for i := range s {
				switch kind {
				case "normal":
					s[i] = rng.NormFloat64() * 3
				case "ties":
					s[i] = float64(rng.IntN(4))
				case "constant":
					s[i] = 2.5
				case "runs": // runs of IndexStride-1 to IndexStride+1 equal scores
					s[i] = float64(i / (IndexStride - 1 + i%3))
				case "zeros":
					s[i] = []float64{math.Copysign(0, -1), 0, 1}[rng.IntN(3)]
				}
			}
			slices.Sort(s)
			c := CalibrationOf(s)
			if len(c.index) != IndexLen(n) {
				t.Fatalf("n=%d: index of %d, want %d", n, len(c.index), IndexLen(n))
			}
			whole := c
			whole.index = nil // (search falls back to the whole array)
			qs := []float64{math.Inf(-1), math.Inf(1), math.NaN(), s[0] - 1, s[n-1] + 1, math.Copysign(0, -1), 0}
			for i, v := range s {
				qs = append(qs, v, math.Nextafter(v, math.Inf(-1)), math.Nextafter(v, math.Inf(1)))
				if i > 0 {
					qs = append(qs, (s[i-1]+v)/2)
				}
			}
			for _, r := range qs {
				got, want := c.search(r), SearchFloat64s(s, r)
				if got != want {
					t.Fatalf("%s n=%d r=%v: indexed search %d, whole array %d", kind, n, r, got, want)
				}
				if !math.IsNaN(r) && got != sort.SearchFloat64s(s, r) {
					t.Fatalf("%s n=%d r=%v: %d, sort.SearchFloat64s %d", kind, n, r, got, sort.SearchFloat64s(s, r))
				}
				a, b := c.Surprisal(r), whole.Surprisal(r)
				if math.Float64bits(a) != math.Float64bits(b) {
					t.Fatalf("%s n=%d r=%v: surprisal %v with the index, %v without", kind, n, r, a, b)
				}
				checkLeaf(t, &c, r, got)
			}
		}
	}
}

// TestCalibrationIndexEmpty: an empty calibration (a model whose calibration records were all
// NaN or ±Inf: NewCalibrationIn drops them) has no index, reads no score and says 0.
func TestCalibrationIndexEmpty(t *testing.T) {
	for _, c := range []Calibration{CalibrationOf(nil), NewCalibrationIn(make([]float64, 0, 2), []float64{math.NaN(), math.Inf(1)})} {
		if len(c.Sorted) != 0 || len(c.Index()) != 0 {
			t.Fatalf("%d scores, index of %d", len(c.Sorted), len(c.Index()))
		}
		for _, r := range []float64{math.Inf(-1), 0, 1, math.Inf(1), math.NaN()} {
			if got := c.search(r); got != 0 {
				t.Fatalf("r=%v: search %d, want 0", r, got)
			}
			if c.Leaf(r) != nil || c.Surprisal(r) != 0 {
				t.Fatalf("r=%v: leaf %v, surprisal %v: want none and 0", r, c.Leaf(r), c.Surprisal(r))
			}
		}
	}
}

// checkLeaf: Leaf(r) holds the scores Surprisal(r) reads: s[i] and s[i-1] for r within the
// scores (i the search's answer), the largest score above them, none for NaN.
func checkLeaf(t *testing.T, c *Calibration, r float64, i int) {
	t.Helper()
	s, leaf := c.Sorted, c.Leaf(r)
	n := len(s)
	if math.IsNaN(r) {
		if leaf != nil {
			t.Fatalf("n=%d NaN: leaf of %d", n, len(leaf))
		}
		return
	}
	in := func(j int) bool {
		if len(leaf) == 0 {
			return false
		}
		p, lo := uintptr(unsafe.Pointer(&s[j])), uintptr(unsafe.Pointer(&leaf[0]))
		return p >= lo && p < lo+uintptr(len(leaf))*8
	}
	need := []int{n - 1}
	if r <= s[n-1] {
		need = []int{i}
		if i > 0 {
			need = append(need, i-1)
		}
	}
	for _, j := range need {
		if !in(j) {
			t.Fatalf("n=%d r=%v: score %d read, not in the leaf (%d scores)", n, r, j, len(leaf))
		}
	}
	if len(leaf) > IndexStride+1 {
		t.Fatalf("n=%d r=%v: leaf of %d scores, more than the stride's %d", n, r, len(leaf), IndexStride+1)
	}
}

// TestCalibrationInSharesStorage: CalibrationIn puts the index in the storage given (a key's
// model's three indexes in one allocation) and makes its own when that is too small.
func TestCalibrationInSharesStorage(t *testing.T) {
	s := make([]float64, 200)
	for i := range s {
		s[i] = float64(i)
	}
	buf := make([]float64, 3*IndexLen(200))
	c := CalibrationIn(s, buf[IndexLen(200):])
	if &c.index[0] != &buf[IndexLen(200)] {
		t.Fatal("index not in the storage given")
	}
	if c.index[12] != 192 || len(c.index) != 13 {
		t.Fatalf("index %v", c.index)
	}
	if d := CalibrationIn(s, buf[:2:2]); &d.index[0] == &buf[0] {
		t.Fatal("index written past the storage given")
	}
}
