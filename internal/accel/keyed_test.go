package accel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// keyedStoreFixture is a store of d with three keys' models of two features in slots 5, 0 and 2
// (k 3, 4, 5), and n records of those keys (which: a record's slot, model: its key), two of them
// not finite and every 11th far past its key's window (rank's log1p: the host's tail).
type keyedStoreFixture struct {
	st         *KeyedStore
	tails      []*rank.Tail
	refs       []*solvingset.Model
	centers    [][]float64
	units      [][]float64
	x          [][]float32
	which      []int32
	model      []int
	tail, dist []float64 // the CPU's scores of the records
}

func newKeyedStoreFixture(t *testing.T, d *Device, n int) *keyedStoreFixture {
	t.Helper()
	st, err := d.KeyedStore(2, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &keyedStoreFixture{st: st, tails: make([]*rank.Tail, 3), refs: make([]*solvingset.Model, 3),
		centers: make([][]float64, 3), units: make([][]float64, 3)}
	r := rand.New(rand.NewPCG(4, 21))
	slots := []int32{5, 0, 2}
	for m := range slots {
		cols := [][]float32{make([]float32, 80), make([]float32, 80)}
		for j := range cols {
			for i := range cols[j] {
				cols[j][i] = float32(100*m) + float32(r.NormFloat64())
			}
		}
		f.tails[m] = rank.NewTail(cols)
		f.centers[m], f.units[m] = []float64{float64(100 * m), 0}, []float64{1, 2}
		f.refs[m] = &solvingset.Model{Points: space(cols, f.centers[m], f.units[m]), K: 3 + m}
	}
	if err := st.Install(slots, f.tails, f.refs, f.centers, f.units); err != nil {
		t.Fatal(err)
	}
	f.x = [][]float32{make([]float32, n), make([]float32, n)}
	f.which, f.model = make([]int32, n), make([]int, n)
	f.tail, f.dist = make([]float64, n), make([]float64, n)
	for i := range n {
		f.model[i] = r.IntN(3)
		f.which[i] = slots[f.model[i]]
		for j := range f.x {
			f.x[j][i] = float32(100*f.model[i]) + float32(3*r.NormFloat64())
		}
		if i%11 == 4 {
			f.x[1][i] += 500
		}
	}
	f.x[0][7], f.x[1][9] = float32(math.NaN()), float32(math.Inf(1))
	for i := range n {
		m := f.model[i]
		one := [][]float32{f.x[0][i : i+1], f.x[1][i : i+1]}
		wt, wd := make([]float64, 1), make([]float64, 1)
		f.tails[m].Score(one, wt)
		solvingset.KNNWeights(f.refs[m].Points, space(one, f.centers[m], f.units[m]), f.refs[m].K, 1, wd)
		f.tail[i], f.dist[i] = wt[0], wd[0]
	}
	return f
}

// check fails t unless tail and dist are the CPU's scores of the fixture's records.
func (f *keyedStoreFixture) check(t *testing.T, what string, tail, dist []float64) {
	t.Helper()
	for i := range f.tail {
		if math.Float64bits(tail[i]) != math.Float64bits(f.tail[i]) || math.Float64bits(dist[i]) != math.Float64bits(f.dist[i]) {
			t.Fatalf("%s: record %d (slot %d): %v %v, the CPU's %v %v", what, i, f.which[i], tail[i], dist[i], f.tail[i], f.dist[i])
		}
	}
}

// checkScores fails t unless Score gives the CPU's scores of the fixture's records given as one
// part (rows nil: x's rows in order) and given in parts (scoreInParts).
func (f *keyedStoreFixture) checkScores(t *testing.T) {
	t.Helper()
	n := len(f.which)
	tail, dist := make([]float64, n), make([]float64, n)
	if err := f.st.Score([][]int32{f.which}, [][]int32{nil}, f.x, [][]float64{tail}, [][]float64{dist}); err != nil {
		t.Fatal(err)
	}
	f.check(t, "one part", tail, dist)
	tail, dist = f.scoreInParts(t)
	f.check(t, "in parts", tail, dist)
}

// scoreInParts scores the fixture's records with Score in four parts, the second empty (a
// worker with no records queued) and every third record in each of the others (by row: each
// key's records in all three), and returns the scores by record.
func (f *keyedStoreFixture) scoreInParts(t *testing.T) (tail, dist []float64) {
	t.Helper()
	n := len(f.which)
	const parts = 4
	slots, rows := make([][]int32, parts), make([][]int32, parts)
	for i := range n {
		w := []int{0, 2, 3}[i%3]
		slots[w] = append(slots[w], f.which[i])
		rows[w] = append(rows[w], int32(i))
	}
	pt, pd := make([][]float64, parts), make([][]float64, parts)
	for w := range parts {
		pt[w], pd[w] = make([]float64, len(rows[w])), make([]float64, len(rows[w]))
	}
	if err := f.st.Score(slots, rows, f.x, pt, pd); err != nil {
		t.Fatal(err)
	}
	tail, dist = make([]float64, n), make([]float64, n)
	for w := range parts {
		for r, i := range rows[w] {
			tail[i], dist[i] = pt[w][r], pd[w][r]
		}
	}
	return tail, dist
}

// TestKeyedStoreOnCPU: without a GPU (and so after a device failure or for a model the kernels do
// not take) a KeyedStore scores every record on the CPU with its slot's model: rank.Tail.Score's
// and solvingset.KNNWeights's bits in R's space, non-finite values included, slots in any order;
// the same records given in parts (each part's rows of x) get the same scores, and a
// slot that holds no model is an error.
func TestKeyedStoreOnCPU(t *testing.T) {
	f := newKeyedStoreFixture(t, &Device{name: "cpu", log: zerolog.Nop()}, 300)
	f.checkScores(t)
	for _, sl := range []int32{1, 6, -1} {
		if err := f.st.Score([][]int32{{0, sl}}, [][]int32{nil}, [][]float32{{1, 2}, {1, 2}}, [][]float64{make([]float64, 2)}, [][]float64{make([]float64, 2)}); err == nil {
			t.Fatalf("slot %d (no model) accepted", sl)
		}
	}
}

// TestKeyedStoreScoreRefusesBadRecords: records that do not fit the store (a feature count not
// the store's, columns of unequal length, a row outside the columns) are an error naming the
// part, not a panic on a part's goroutine (which no caller can recover) nor scores read from the
// wrong values (the device's row-major layout takes its record width from the store).
func TestKeyedStoreScoreRefusesBadRecords(t *testing.T) {
	f := newKeyedStoreFixture(t, &Device{name: "cpu", log: zerolog.Nop()}, 10)
	one := func(n int) [][]float64 { return [][]float64{make([]float64, n)} }
	for _, c := range []struct {
		what  string
		x     [][]float32
		slots []int32
		rows  []int32
	}{
		{"three features for two", [][]float32{{1, 2}, {1, 2}, {1, 2}}, []int32{0, 5}, nil},
		{"one feature for two", [][]float32{{1, 2}}, []int32{0, 5}, nil},
		{"columns of unequal length", [][]float32{{1, 2}, {1}}, []int32{0, 5}, []int32{0, 1}},
		{"a row past the columns", [][]float32{{1, 2}, {1, 2}}, []int32{0, 5}, []int32{0, 2}},
		{"a negative row", [][]float32{{1, 2}, {1, 2}}, []int32{0, 5}, []int32{-1, 0}},
		{"more records than rows, rows nil", [][]float32{{1, 2}, {1, 2}}, []int32{0, 5, 2}, nil},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic %v, want an error", c.what, p)
				}
			}()
			if err := f.st.Score([][]int32{c.slots}, [][]int32{c.rows}, c.x, one(len(c.slots)), one(len(c.slots))); err == nil {
				t.Errorf("%s: accepted", c.what)
			}
		}()
	}
}

// space maps columns to a key's distance space (detect's distanceSpace).
func space(cols [][]float32, center, unit []float64) [][]float32 {
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = make([]float32, len(c))
		for i, v := range c {
			out[j][i] = float32(max(-gpukern.KeyedLimit, min(gpukern.KeyedLimit, (float64(v)-center[j])/unit[j])))
		}
	}
	return out
}

// keyBuildSets are point sets as the stage's key builds hand them over (a window of 200 in the
// distance space, some copies), and shapes past the kernels (k = 65).
func keyBuildSets(r *rand.Rand) ([][][]float32, []int, [][]float64) {
	var sets [][][]float32
	var ks []int
	var out [][]float64
	for s := range 40 {
		n := 50 + r.IntN(200)
		set := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
		for j := range set {
			for i := range set[j] {
				set[j][i] = float32(r.NormFloat64())
				if i%9 == 4 {
					set[j][i] = set[j][i-1]
				}
			}
		}
		sets, ks, out = append(sets, set), append(ks, []int{10, 1, 40}[s%3]), append(out, make([]float64, n))
	}
	return sets, ks, out
}

// checkSelfWeights fails t unless out[s] holds solvingset.KNNWeightsSelf's bits of each set.
func checkSelfWeights(t *testing.T, what string, sets [][][]float32, ks []int, out [][]float64) {
	t.Helper()
	for s, set := range sets {
		want := make([]float64, len(set[0]))
		solvingset.KNNWeightsSelf(set, ks[s], want)
		for i := range want {
			if math.Float64bits(out[s][i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s: set %d (k=%d) point %d: %v, want %v", what, s, ks[s], i, out[s][i], want[i])
			}
		}
	}
}

// TestKeyedSelfWeightsOnCPU: without a GPU, KeyedSelfWeights is solvingset.KNNWeightsSelf of
// each set; a store's SelfWeights is the device's, and says it is not covered.
func TestKeyedSelfWeightsOnCPU(t *testing.T) {
	d := &Device{name: "cpu", log: zerolog.Nop()}
	sets, ks, out := keyBuildSets(rand.New(rand.NewPCG(4, 22)))
	st, err := d.KeyedStore(3, 256)
	if err != nil {
		t.Fatal(err)
	}
	if st.SelfWeightsCovered(3, 10) {
		t.Fatal("a CPU store claims the device builds")
	}
	if err := st.SelfWeights(sets, ks, out); err != nil {
		t.Fatal(err)
	}
	checkSelfWeights(t, "on the CPU", sets, ks, out)
	if err := d.KeyedSelfWeights(sets[:1], []int{0}, out[:1]); err == nil {
		t.Fatal("k = 0 accepted")
	}
}

// TestKeyedSelfWeightsRaggedSet: a set whose features hold different numbers of points is the
// caller's error, reported as one (not handed to the CPU's KNNWeightsSelf, which panicked on a
// shorter feature, nor to the GPU, whose refusal counted as a device failure and fell back).
func TestKeyedSelfWeightsRaggedSet(t *testing.T) {
	d := &Device{name: "cpu", log: zerolog.Nop()}
	for _, set := range [][][]float32{
		{{1, 2, 3}, {1, 2}},       // a shorter feature
		{{1, 2, 3}, {1, 2, 3, 4}}, // a longer one
	} {
		out := [][]float64{make([]float64, 3)}
		if err := d.KeyedSelfWeights([][][]float32{set}, []int{1}, out); err == nil {
			t.Fatalf("features of %d and %d points accepted", len(set[0]), len(set[1]))
		}
	}
	if f := d.Fallbacks(); f != 0 {
		t.Fatalf("%d fallbacks for the caller's error", f)
	}
}
