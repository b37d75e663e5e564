package solvingset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Tolerances: none. Every path computes each distance with the same float32 operations in the
// same order (d(a,b) == d(b,a) bit for bit) and every weight as the float64 sum of the same k
// float32 values in ascending order, so SolvingSet, BruteForce, Weights, KNNWeights and the
// naive reference below agree exactly; an exact comparison is the strongest test and decides
// ties at w* identically. A difference of one ulp would reveal a path that computes differently.

// naiveWeights is the reference: for every row, all distances to the other rows, sorted, the
// k smallest summed in ascending order.
func naiveWeights(cols [][]float32, k int) []float64 {
	rows := len(cols[0])
	out := make([]float64, rows)
	all := make([]float32, 0, rows)
	for i := range rows {
		all = all[:0]
		for j := range rows {
			if j != i {
				all = append(all, sqrt32(sqDistRows(cols, i, j)))
			}
		}
		slices.Sort(all)
		var s float64
		for _, d := range all[:k] {
			s += float64(d)
		}
		out[i] = s
	}
	return out
}

// dataSet is a named generator of column-major test data.
type dataSet struct {
	name string
	gen  func(r *rand.Rand) [][]float32
}

func gaussCols(r *rand.Rand, rows, dims int, scale float64) [][]float32 {
	c := make([][]float32, dims)
	for j := range c {
		c[j] = make([]float32, rows)
		for i := range c[j] {
			c[j][i] = float32(r.NormFloat64() * scale)
		}
	}
	return c
}

// The huge scale is 1e17: N(0,1) coordinates then reach about 5e17, squared differences about
// 1e36 per dimension, inside float32 (max 3.4e38) with room for 3 dimensions and the factor 4
// that validateCols keeps; 1e30 itself would overflow float32 squares (1e60), so no
// float32-distance code can handle it. The tiny scale 1e-15 keeps squared differences (~1e-30)
// above float32's smallest normal number (1.2e-38), so distances keep their precision.
var dataSets = []dataSet{
	{"gauss2d", func(r *rand.Rand) [][]float32 { return gaussCols(r, 400, 2, 1) }},
	{"gauss5d", func(r *rand.Rand) [][]float32 { return gaussCols(r, 300, 5, 1) }},
	{"one-dim", func(r *rand.Rand) [][]float32 { return gaussCols(r, 300, 1, 1) }},
	{"duplicates", func(r *rand.Rand) [][]float32 {
		// 250 rows drawn from 12 distinct points: many zero distances and tied weights.
		base := gaussCols(r, 12, 2, 1)
		c := [][]float32{make([]float32, 250), make([]float32, 250)}
		for i := range 250 {
			b := r.IntN(12)
			c[0][i], c[1][i] = base[0][b], base[1][b]
		}
		return c
	}},
	{"all-equal", func(r *rand.Rand) [][]float32 {
		c := [][]float32{make([]float32, 60), make([]float32, 60), make([]float32, 60)}
		for j := range c {
			for i := range c[j] {
				c[j][i] = 3.25
			}
		}
		return c
	}},
	{"grid-ties", func(r *rand.Rand) [][]float32 {
		// A 15x15 integer grid: by symmetry many points share a weight, ties at w* included.
		c := [][]float32{make([]float32, 225), make([]float32, 225)}
		for i := range 225 {
			c[0][i], c[1][i] = float32(i%15), float32(i/15)
		}
		return c
	}},
	{"clusters+far", func(r *rand.Rand) [][]float32 {
		c := gaussCols(r, 320, 3, 0.01)
		for i := range c[0] {
			ctr := float32(i % 4 * 10)
			for j := range c {
				c[j][i] += ctr
			}
		}
		for i := range 8 { // far points, some at the same place
			for j := range c {
				c[j][i*7] = float32(1000 + (i/2)*50*(j+1))
			}
		}
		return c
	}},
	{"huge", func(r *rand.Rand) [][]float32 { return gaussCols(r, 300, 2, 1e17) }},
	{"tiny", func(r *rand.Rand) [][]float32 { return gaussCols(r, 300, 2, 1e-15) }},
}

func TestBruteForceMatchesNaive(t *testing.T) {
	t.Parallel()
	for si, ds := range dataSets {
		cols := ds.gen(rand.New(rand.NewPCG(uint64(si), 7)))
		rows := len(cols[0])
		for _, k := range []int{1, 5, rows - 1} {
			want := naiveWeights(cols, k)
			for _, w := range []int{1, 3} {
				if got := bruteForceWeights(cols, k, w); !slices.Equal(got, want) {
					t.Errorf("%s k=%d workers=%d: BruteForce weights differ from the naive reference", ds.name, k, w)
				}
				if got := Weights(cols, k, w); !slices.Equal(got, want) {
					t.Errorf("%s k=%d workers=%d: Weights differ from the naive reference", ds.name, k, w)
				}
			}
		}
	}
}

// checkResult compares a SolvingSet result with the oracle and checks the solving-set property.
func checkResult(t *testing.T, label string, cols [][]float32, p Params, got, want Result) {
	t.Helper()
	if got.WStar != want.WStar {
		t.Errorf("%s: w* = %v, BruteForce %v", label, got.WStar, want.WStar)
	}
	if !slices.Equal(got.Outliers, want.Outliers) {
		t.Errorf("%s: outliers %v, BruteForce %v", label, got.Outliers, want.Outliers)
	}
	if len(got.Outliers) < p.N {
		t.Errorf("%s: %d outliers for n=%d", label, len(got.Outliers), p.N)
	}
	// S holds distinct rows, every outlier, and is a solving set: every y outside S has
	// w_k(y, S) < w*.
	in := make(map[int]bool, len(got.SolvingSet))
	for _, r := range got.SolvingSet {
		if in[r] {
			t.Fatalf("%s: row %d twice in S", label, r)
		}
		in[r] = true
	}
	for _, o := range got.Outliers {
		if !in[o.Row] {
			t.Errorf("%s: outlier row %d not in S", label, o.Row)
		}
	}
	if len(in) < p.K {
		return // w_k(y, S) is +Inf: only possible when S = D
	}
	S := gather(cols, got.SolvingSet)
	var rest []int
	for i := range cols[0] {
		if !in[i] {
			rest = append(rest, i)
		}
	}
	wS := make([]float64, len(rest))
	KNNWeights(S, gather(cols, rest), p.K, 2, wS)
	for i, w := range wS {
		if w >= got.WStar {
			t.Errorf("%s: row %d outside S has w_k(y,S) = %v >= w* = %v: S is not a solving set", label, rest[i], w, got.WStar)
			break
		}
	}
}

func gather(cols [][]float32, rows []int) [][]float32 {
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = make([]float32, len(rows))
		for i, r := range rows {
			out[j][i] = c[r]
		}
	}
	return out
}

func TestSolvingSetMatchesBruteForce(t *testing.T) {
	t.Parallel()
	for si, ds := range dataSets {
		cols := ds.gen(rand.New(rand.NewPCG(uint64(si), 7)))
		rows := len(cols[0])
		type kn struct{ k, n int }
		for _, c := range []kn{{1, 1}, {5, 10}, {50, 10}, {7, rows - 1}, {rows - 1, 3}, {3, rows}} {
			want, err := BruteForce(cols, Params{K: c.k, N: c.n, M: 1, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []int{1, 7, 100, rows + 5} {
				for _, w := range []int{1, 2, 5} {
					if m == 1 && c.k > 10 && w != 1 {
						continue // m = 1 with large k is slow and adds nothing over workers = 1
					}
					p := Params{K: c.k, N: c.n, M: m, Workers: w, Seed: uint64(m*10 + w)}
					label := fmt.Sprintf("%s rows=%d k=%d n=%d m=%d workers=%d", ds.name, rows, c.k, c.n, m, w)
					iters := 0
					got, err := SolvingSet(cols, p, func(it, active int) { iters = it })
					if err != nil {
						t.Fatalf("%s: %v", label, err)
					}
					if iters != got.Iterations {
						t.Errorf("%s: progress saw %d iterations, result says %d", label, iters, got.Iterations)
					}
					checkResult(t, label, cols, p, got, want)
				}
			}
		}
	}
}

// TestSolvingSetLarger runs bigger random sets against the naive-free oracle (Weights), where
// the chunking (several chunks per iteration), early exits and pruning all take part.
func TestSolvingSetLarger(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rows, dims, k, m int }{{30000, 2, 10, 100}, {8000, 4, 20, 50}, {5000, 2, 50, 3}} {
		r := rand.New(rand.NewPCG(uint64(c.rows), 3))
		cols := gaussCols(r, c.rows, c.dims, 1)
		p := Params{K: c.k, N: 10, M: c.m, Seed: 9, Workers: 2}
		want := topN(Weights(cols, c.k, 2), p.N)
		got, err := SolvingSet(cols, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		label := fmt.Sprintf("rows=%d dims=%d k=%d m=%d", c.rows, c.dims, c.k, c.m)
		if got.WStar != want.WStar || !slices.Equal(got.Outliers, want.Outliers) {
			t.Errorf("%s: got w*=%v %v, want w*=%v %v", label, got.WStar, got.Outliers, want.WStar, want.Outliers)
		}
		full := int64(c.rows) * int64(c.rows-1) / 2
		if got.DistanceComputations >= full {
			t.Errorf("%s: %d distances, no fewer than the nested loop's %d", label, got.DistanceComputations, full)
		}
		t.Logf("%s: %d iterations, |S| = %d, distances %.4f of N(N-1)/2", label, got.Iterations, len(got.SolvingSet), float64(got.DistanceComputations)/float64(full))
	}
}

func TestSolvingSetDeterministic(t *testing.T) {
	t.Parallel()
	cols := gaussCols(rand.New(rand.NewPCG(1, 1)), 3000, 2, 1)
	var first Result
	for i, w := range []int{1, 2, 5} {
		got, err := SolvingSet(cols, Params{K: 10, N: 5, M: 20, Seed: 42, Workers: w}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
			continue
		}
		if !slices.Equal(got.SolvingSet, first.SolvingSet) || got.Iterations != first.Iterations {
			t.Errorf("workers=%d: solving set differs from workers=1", w)
		}
	}
}

func TestKNNWeights(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 5))
	S := gaussCols(r, 700, 3, 1)
	Q := gaussCols(r, 300, 3, 1.5)
	copy(Q[0][:10], S[0][:10]) // some queries duplicate points of S: distance 0 counts
	copy(Q[1][:10], S[1][:10])
	copy(Q[2][:10], S[2][:10])
	for _, k := range []int{1, 13, 700} {
		got := make([]float64, 300)
		KNNWeights(S, Q, k, 3, got)
		all := make([]float32, 700)
		for q := range 300 {
			for s := range 700 {
				var d2 float32
				for j := range 3 {
					t := Q[j][q] - S[j][s]
					d2 += float32(t * t)
				}
				all[s] = sqrt32(d2)
			}
			slices.Sort(all)
			var want float64
			for _, d := range all[:k] {
				want += float64(d)
			}
			if got[q] != want {
				t.Fatalf("k=%d query %d: %v, want %v", k, q, got[q], want)
			}
		}
	}
	over := make([]float64, 300)
	KNNWeights(S, Q, 701, 1, over)
	if !math.IsInf(over[0], 1) {
		t.Errorf("k > |S|: weight %v, want +Inf", over[0])
	}
}

// TestPredictionNeverMisses: for held-out q, w_k(q,S) >= w_k(q,D), and every q that is an
// outlier by the exact rule is flagged by the model.
func TestPredictionNeverMisses(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 11))
	cols := gaussCols(r, 4000, 2, 1)
	p := Params{K: 20, N: 10, M: 50, Seed: 3}
	res, err := SolvingSet(cols, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	model := NewModel(cols, []string{"x1", "x2"}, res, p.K)
	Q := gaussCols(r, 3000, 2, 1.6) // wider than the training data: many exact outliers
	wD := make([]float64, 3000)
	KNNWeights(cols, Q, p.K, 2, wD)
	wS := make([]float64, 3000)
	model.ScoreBatch(Q, wS, 2)
	exact, flagged := 0, 0
	for i := range wD {
		if wS[i] < wD[i] {
			t.Fatalf("query %d: w_k(q,S) = %v < w_k(q,D) = %v", i, wS[i], wD[i])
		}
		if one := model.Score([]float32{Q[0][i], Q[1][i]}); one != wS[i] {
			t.Fatalf("query %d: Score %v, ScoreBatch %v", i, one, wS[i])
		}
		if wD[i] >= res.WStar {
			exact++
			if !model.IsOutlier(wS[i]) {
				t.Fatalf("query %d: exact outlier (w=%v >= w*=%v) not flagged", i, wD[i], res.WStar)
			}
		}
		if model.IsOutlier(wS[i]) {
			flagged++
		}
	}
	if exact == 0 {
		t.Fatal("no held-out exact outliers: the test would prove nothing")
	}
	t.Logf("|S| = %d of %d; %d exact outliers, %d flagged", len(res.SolvingSet), len(cols[0]), exact, flagged)
}

func TestModelNormalisation(t *testing.T) {
	t.Parallel()
	m := &Model{Features: []string{"a"}, K: 1, WStar: 1, Points: [][]float32{{0, 10}},
		Offset: []float32{100}, Scale: []float32{0.5}}
	// raw 104 -> (104-100)*0.5 = 2: nearest point 0 at distance 2.
	if got := m.Score([]float32{104}); got != 2 {
		t.Errorf("Score = %v, want 2", got)
	}
	out := make([]float64, 1)
	m.ScoreBatch([][]float32{{104}}, out, 1)
	if out[0] != 2 {
		t.Errorf("ScoreBatch = %v, want 2", out[0])
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    Params
		rows int
		want []string // substrings, all required
	}{
		{Params{K: 5, N: 3, M: 10}, 100, nil},
		{Params{K: 99, N: 100, M: 1}, 100, nil},
		{Params{K: 100, N: 3, M: 10}, 100, []string{"k must be < rows"}},
		{Params{K: 5, N: 101, M: 10}, 100, []string{"n must be <= rows"}},
		{Params{K: 0, N: 0, M: 0, Workers: -1}, 100, []string{"k must be >= 1", "n must be >= 1", "m must be >= 1", "workers must be >= 0"}},
		{Params{K: -3, N: 1, M: 1}, 100, []string{"k must be >= 1"}},
		{Params{K: 1, N: 1, M: 1}, 1, []string{"at least 2 rows", "k must be < rows"}},
	}
	for _, c := range cases {
		err := c.p.Validate(c.rows)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%+v rows=%d: unexpected error %v", c.p, c.rows, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v rows=%d: no error, want %q", c.p, c.rows, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v rows=%d: error %q lacks %q", c.p, c.rows, err, w)
			}
		}
	}
}

func TestBadData(t *testing.T) {
	t.Parallel()
	good := Params{K: 1, N: 1, M: 1}
	cases := []struct {
		name string
		cols [][]float32
		want string
	}{
		{"no columns", nil, "no columns"},
		{"ragged", [][]float32{{1, 2, 3}, {1, 2}}, "column 1 has 2 rows"},
		{"nan", [][]float32{{1, float32(math.NaN()), 3}}, "not finite"},
		{"inf", [][]float32{{1, 2, float32(math.Inf(-1))}}, "not finite"},
		{"overflowing span", [][]float32{{-1e19, 1e19, 0}}, "span too large"},
	}
	for _, c := range cases {
		for name, run := range map[string]func() error{
			"SolvingSet": func() error { _, err := SolvingSet(c.cols, good, nil); return err },
			"BruteForce": func() error { _, err := BruteForce(c.cols, good); return err },
		} {
			err := run()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: error %v, want %q", name, c.name, err, c.want)
			}
		}
	}
	if _, err := SolvingSet([][]float32{{1, 2, 3}}, Params{K: 3, N: 1, M: 1}, nil); err == nil {
		t.Error("SolvingSet accepted k = rows")
	}
}

// TestMergePending: merging a queue of squared distances into a neighbour heap gives the
// multiset that inserting them one by one gives, on both paths (short queues inserted, long ones
// selected) and after either (a loose heap merged again), for full heaps and for heaps still
// holding +Inf, with ties.
func TestMergePending(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{1, 5, 50} {
		for _, nq := range []int{0, 1, mergeBatch - 1, mergeBatch, 100} {
			for _, fill := range []int{0, k / 2, k} {
				h := make([]float32, k)
				fillInf(h)
				for range fill {
					if d := float32(r.IntN(8)); d < h[0] {
						heapReplaceTop(h, d)
					}
				}
				pend := make([]float32, nq)
				for i := range pend {
					pend[i] = float32(r.IntN(64)) // squared distances; sqrt32 of squares is exact
				}
				want := slices.Clone(h)
				for _, d2 := range pend {
					if d := sqrt32(d2); d < want[0] {
						heapReplaceTop(want, d)
					}
				}
				sc := &tileScratch{buf: make([]uint32, 0, k+nq)}
				got := slices.Clone(h)
				loose := false
				mergePending(got, pend, sc, &loose)
				for i := 1; i < k; i++ {
					if loose && got[i] > got[0] {
						t.Fatalf("k=%d queue=%d fill=%d: loose heap without its maximum on top: %v", k, nq, fill, got)
					}
					if !loose && got[(i-1)/2] < got[i] {
						t.Fatalf("k=%d queue=%d fill=%d: not a max-heap: %v", k, nq, fill, got)
					}
				}
				// A second merge into the result (loose or not) must still match.
				pend2 := []float32{0, 1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121, 144}
				for _, d2 := range pend2 {
					if d := sqrt32(d2); d < want[0] {
						heapReplaceTop(want, d)
					}
				}
				cut := r.IntN(len(pend2) + 1) // one part short, the other possibly long
				mergePending(got, pend2[:cut], sc, &loose)
				mergePending(got, pend2[cut:], sc, &loose)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("k=%d queue=%d fill=%d: merged %v, one by one %v", k, nq, fill, got, want)
				}
			}
		}
	}
}

// TestSolvingSetCountsEachPairOnce: DistanceComputations counts a pair of rows once, so it never
// exceeds the nested loop's N(N-1)/2 (topn prints it as a share of that). Step b evaluates a
// pair of candidates from both sides and counted both: 150 rows with m=100 printed "15004 (134%
// of N(N-1)/2)"; with every row a candidate at once the count is exactly N(N-1)/2.
func TestSolvingSetCountsEachPairOnce(t *testing.T) {
	t.Parallel()
	const rows = 150
	cols := gaussCols(rand.New(rand.NewPCG(5, 5)), rows, 2, 1)
	full := int64(rows) * int64(rows-1) / 2
	for _, m := range []int{100, rows, 1000} {
		got, err := SolvingSet(cols, Params{K: 5, N: 5, M: m, Seed: 1, Workers: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.DistanceComputations > full || (m >= rows && got.DistanceComputations != full) {
			t.Errorf("m=%d: %d distances; want at most N(N-1)/2 = %d (exactly, when every row is a candidate)", m, got.DistanceComputations, full)
		}
	}
}
