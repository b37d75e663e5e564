package solvingset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/order"
)

// TestKNNSelectMatchesHeap: the select path must give bit-identical weights to the heap path
// (same float32 distance arithmetic, same canonical sum), including ties and duplicates.
func TestKNNSelectMatchesHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ nS, nQ, dims, k int }{
		{1, 5, 1, 1}, {50, 100, 2, 50}, {60, 300, 8, 50}, {300, 500, 8, 50}, {2000, 200, 10, 50}, {33, 70, 3, 7},
	} {
		for _, grid := range []bool{false, true} {
			gen := func(n int) [][]float32 {
				cols := make([][]float32, c.dims)
				for j := range cols {
					cols[j] = make([]float32, n)
					for i := range cols[j] {
						if grid { // integer grid: many equal distances (ties)
							cols[j][i] = float32(r.IntN(4))
						} else {
							cols[j][i] = float32(r.NormFloat64())
						}
					}
				}
				return cols
			}
			S, Q := gen(c.nS), gen(c.nQ)
			heap := make([]float64, c.nQ)
			sel := make([]float64, c.nQ)
			knnWeights(Q, S, false, c.k, 2, heap)
			knnSelectWeights(Q, S, c.k, 3, sel)
			for i := range heap {
				if math.Float64bits(heap[i]) != math.Float64bits(sel[i]) {
					t.Fatalf("%+v grid=%v: query %d: heap %v select %v", c, grid, i, heap[i], sel[i])
				}
			}
		}
	}
}

func TestSelectSmallest(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		n := 1 + r.IntN(300)
		k := 1 + r.IntN(n)
		a := make([]float32, n)
		for i := range a {
			a[i] = float32(r.IntN(20))
		}
		b := append([]float32(nil), a...)
		order.SelectNth(a, k-1)
		sortF(b)
		got := append([]float32(nil), a[:k]...)
		sortF(got)
		for i := range got {
			if got[i] != b[i] {
				t.Fatalf("n=%d k=%d: selected %v, want %v", n, k, got, b[:k])
			}
		}
	}
}

func sortF(a []float32) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// BenchmarkKNNSelectVsHeap measures both paths at the pipeline's shape (|S| a few hundred,
// k = 50, 8 dims) and at the prediction shape (|S| = 2000, 10 dims).
func BenchmarkKNNSelectVsHeap(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ nS, dims, k int }{{300, 8, 50}, {1000, 8, 50}, {2000, 10, 50}, {10000, 10, 50}} {
		gen := func(n int) [][]float32 {
			cols := make([][]float32, c.dims)
			for j := range cols {
				cols[j] = make([]float32, n)
				for i := range cols[j] {
					cols[j][i] = float32(r.NormFloat64())
				}
			}
			return cols
		}
		S, Q := gen(c.nS), gen(20000)
		out := make([]float64, 20000)
		for _, path := range []string{"heap", "select"} {
			b.Run(fmt.Sprintf("S=%d/d=%d/%s", c.nS, c.dims, path), func(b *testing.B) {
				for range b.N {
					if path == "heap" {
						knnWeights(Q, S, false, c.k, 1, out)
					} else {
						knnSelectWeights(Q, S, c.k, 1, out)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/20000, "ns/query")
			})
		}
	}
}

// TestKNNWeightsMembersNeverBelowExact: for every point p of D, the weight against the solving
// set with p itself skipped is >= its exact weight w_k(p, D \ {p}), so every top-n outlier of D
// is flagged when D's own records are scored against its model. KNNWeights (for new queries)
// would count p at distance 0 when p is in S; the test shows that this loses outliers.
func TestKNNWeightsMembersNeverBelowExact(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dup := range []bool{false, true} {
		n := 2000
		cols := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
		for i := range n {
			for j := range cols {
				cols[j][i] = float32(r.NormFloat64())
				if dup && i%7 == 3 { // duplicates of the previous point: distinct objects at distance 0
					cols[j][i] = cols[j][i-1]
				}
			}
		}
		p := Params{K: 10, N: 20, M: 50, Seed: 3}
		res, err := SolvingSet(cols, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		S := make([][]float32, len(cols))
		for j := range cols {
			for _, row := range res.SolvingSet {
				S[j] = append(S[j], cols[j][row])
			}
		}
		exact := Weights(cols, p.K, 0)
		member := make([]float64, n)
		KNNWeightsMembers(S, cols, p.K, 2, member)
		naive := make([]float64, n)
		KNNWeights(S, cols, p.K, 2, naive)
		lost := 0
		for i := range n {
			if member[i] < exact[i] {
				t.Fatalf("dup=%v point %d: member weight %v < exact %v", dup, i, member[i], exact[i])
			}
			if exact[i] >= res.WStar && naive[i] < res.WStar {
				lost++
			}
		}
		for _, o := range res.Outliers {
			if member[o.Row] < res.WStar {
				t.Fatalf("top outlier %d not flagged: %v < w* %v", o.Row, member[o.Row], res.WStar)
			}
		}
		// Every top outlier is in S, so scoring it as a new query counts itself at distance 0.
		if lost == 0 {
			t.Errorf("dup=%v: expected the naive scoring to lose some top outliers (the bug this guards against)", dup)
		}
	}
}

// TestSelectSmallestBits checks the branch-free selection against a sort on the bit patterns
// of non-negative floats: few distinct values (ties, ranges made of one value), many distinct
// values, +0 and +Inf included.
func TestSelectSmallestBits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	gens := map[string]func() float32{
		"ties":   func() float32 { return float32(r.IntN(5)) },
		"normal": func() float32 { return float32(math.Abs(r.NormFloat64())) },
		"zero+inf": func() float32 {
			return [...]float32{0, 1, float32(math.Inf(1))}[r.IntN(3)]
		},
	}
	for name, gen := range gens {
		for range 2000 {
			n := 1 + r.IntN(300)
			k := 1 + r.IntN(n)
			a := make([]uint32, n)
			for i := range a {
				a[i] = math.Float32bits(gen())
			}
			want := slices.Clone(a)
			slices.Sort(want)
			selectSmallestBits(a, k)
			got := slices.Clone(a[:k])
			slices.Sort(got)
			if !slices.Equal(got, want[:k]) {
				t.Fatalf("%s n=%d k=%d: selected %v, want %v", name, n, k, got, want[:k])
			}
			if a[k-1] != want[k-1] {
				t.Fatalf("%s n=%d k=%d: a[k-1] = %v, not the largest selected %v", name, n, k, a[k-1], want[k-1])
			}
		}
	}
}

// TestSmallestK checks the partitioning selection against a sort, as TestSelectSmallestBits,
// on ranges long enough for several partition rounds (and the values equal to a pivot that is
// the maximum), with and without AVX2.
func TestSmallestK(t *testing.T) {
	defer func(a bool) { hasAVX2 = a }(hasAVX2)
	r := rand.New(rand.NewPCG(9, 8))
	gens := map[string]func() float32{
		"ties":   func() float32 { return float32(r.IntN(5)) },
		"normal": func() float32 { return float32(math.Abs(r.NormFloat64())) },
		"zero+inf": func() float32 {
			return [...]float32{0, 1, float32(math.Inf(1))}[r.IntN(3)]
		},
	}
	for _, avx := range []bool{true, false} {
		hasAVX2 = avx && cpuHasAVX2()
		for name, gen := range gens {
			for range 1000 {
				n := 1 + r.IntN(2100)
				k := 1 + r.IntN(min(n, 120))
				sc := getSelectScratch(n, k, 1)
				a := make([]uint32, n)
				for i := range a {
					a[i] = math.Float32bits(gen())
				}
				want := slices.Clone(a)
				slices.Sort(want)
				got := slices.Clone(sc.smallestK(a, k))
				slices.Sort(got)
				if !slices.Equal(got, want[:k]) {
					t.Fatalf("avx2=%v %s n=%d k=%d: selected %v, want %v", hasAVX2, name, n, k, got, want[:k])
				}
				selectScratchPool.Put(sc)
			}
		}
	}
}

// BenchmarkSelectSmallestBits compares the two selections at the shapes of mergePending (the k
// = 50 smallest of 100 or 150 distances).
func BenchmarkSelectSmallestBits(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{100, 150} {
		src := make([][]float32, 1024)
		for i := range src {
			src[i] = make([]float32, n)
			for j := range src[i] {
				src[i][j] = float32(math.Abs(r.NormFloat64()))
			}
		}
		fl := make([]float32, n)
		bits := make([]uint32, n)
		b.Run(fmt.Sprintf("float/n=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				copy(fl, src[i%len(src)])
				order.SelectNth(fl, 49)
				i++
			}
		})
		b.Run(fmt.Sprintf("bits/n=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				for j, v := range src[i%len(src)] {
					bits[j] = math.Float32bits(v)
				}
				selectSmallestBits(bits, 50)
				i++
			}
		})
	}
}
