package solvingset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// knnSelectRef is the select path as it was before the drain work (issue 12 item 6): every
// squared distance dimension by dimension in float32, the self point skipped once, a
// quickselect of the k smallest, their square roots sorted ascending and summed in float64.
// It pins the optimised knnSelect bit for bit.
func knnSelectRef(Q, R [][]float32, k int, skipSelf bool, out []float64) {
	nq, nr, dims := len(Q[0]), len(R[0]), len(R)
	d2 := make([]float32, nr)
	b := make([]uint32, nr)
	for i := range nq {
		for s := range nr {
			t := Q[0][i] - R[0][s]
			d2[s] = float32(t * t)
		}
		for j := 1; j < dims; j++ {
			for s := range nr {
				t := Q[j][i] - R[j][s]
				d2[s] += float32(t * t)
			}
		}
		n := nr
		if skipSelf {
			for s := range n {
				if d2[s] == 0 {
					d2[s], d2[n-1] = d2[n-1], d2[s]
					n--
					break
				}
			}
		}
		if n < k {
			out[i] = math.Inf(1)
			continue
		}
		for s, v := range d2[:n] {
			b[s] = math.Float32bits(v)
		}
		slices.Sort(b[:n])
		sel := make([]float32, k)
		for t, v := range b[:k] {
			sel[t] = sqrt32(math.Float32frombits(v))
		}
		slices.Sort(sel)
		var sum float64
		for _, v := range sel {
			sum += float64(v)
		}
		out[i] = sum
	}
}

// TestKNNSelectMatchesReference pins the select path (KNNWeights below the heap crossover and
// KNNWeightsMembers) to knnSelectRef bit for bit: the pipeline's shapes (|R| = 2048, k = 100;
// |S| = 300, k = 50, 8-D), ties on a grid, members (the self point at distance 0), duplicates,
// and values spread over many octaves (the exact-sum shortcut must fall back to sorting).
func TestKNNSelectMatchesReference(t *testing.T) {
	native2, native512 := hasAVX2, hasAVX512
	defer func() { hasAVX2, hasAVX512 = native2, native512 }()
	r := rand.New(rand.NewPCG(21, 22))
	type shape struct{ nR, nQ, dims, k int }
	for _, c := range []shape{
		{2048, 300, 8, 100}, {300, 300, 8, 50}, {2000, 100, 10, 50}, {1, 3, 1, 1}, {7, 20, 3, 7},
		{103, 50, 2, 5}, {4096, 40, 4, 3}, {65, 30, 5, 64}, {2050, 60, 1, 100},
	} {
		for _, kind := range []string{"normal", "grid", "octaves", "dups"} {
			gen := func(n int) [][]float32 {
				cols := make([][]float32, c.dims)
				for j := range cols {
					cols[j] = make([]float32, n)
					for i := range cols[j] {
						switch kind {
						case "grid": // many equal distances (ties)
							cols[j][i] = float32(r.IntN(4))
						case "octaves": // distances from 1e-6 to 1e6: sums that are not exact in float64
							cols[j][i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(13)-6)))
						case "dups": // few distinct points: many zero distances
							cols[j][i] = float32(r.IntN(3)) * 0.1
						default:
							cols[j][i] = float32(r.NormFloat64())
						}
					}
				}
				return cols
			}
			R := gen(c.nR)
			Q := gen(c.nQ)
			// Members: the first half of the queries are rows of R.
			M := make([][]float32, c.dims)
			for j := range M {
				M[j] = slices.Clone(Q[j])
				for i := range min(c.nQ/2, c.nR) {
					M[j][i] = R[j][(i*7)%c.nR]
				}
			}
			for _, tc := range []struct{ members, avx2, avx512 bool }{
				{false, native2, native512}, {true, native2, native512}, // the CPU's widest kernel
				{false, native2, false}, {true, native2, false}, // AVX2 where the CPU also has AVX-512
				{false, false, false}, {true, false, false}, // SSE
			} {
				members := tc.members
				hasAVX2, hasAVX512 = tc.avx2, tc.avx512
				q := Q
				if members {
					q = M
				}
				want, got := make([]float64, c.nQ), make([]float64, c.nQ)
				knnSelectRef(q, R, c.k, members, want)
				if members {
					KNNWeightsMembers(R, q, c.k, 2, got)
				} else {
					knnSelectWeights(q, R, c.k, 2, got)
				}
				for i := range want {
					if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
						t.Fatalf("%+v %s members=%v avx2=%v avx512=%v: query %d: reference %v (%x), got %v (%x)",
							c, kind, members, hasAVX2, hasAVX512, i, want[i], math.Float64bits(want[i]), got[i], math.Float64bits(got[i]))
					}
				}
			}
		}
	}
}

// TestSumSqrtBitsOrder: the sum skips the sort only where float64 adds exactly; where the
// order matters (roots many octaves apart, so the small ones are lost when added after the
// large one), it must still give the ascending sum, whatever the order of sel.
func TestSumSqrtBitsOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	bits := func(d2 ...float32) []uint32 {
		out := make([]uint32, len(d2))
		for i, v := range d2 {
			out[i] = math.Float32bits(v)
		}
		return out
	}
	ascending := func(sel []uint32) float64 {
		roots := make([]float32, len(sel))
		for i, v := range sel {
			roots[i] = sqrt32(math.Float32frombits(v))
		}
		slices.Sort(roots)
		var s float64
		for _, v := range roots {
			s += float64(v)
		}
		return s
	}
	var lost []float32 // 1 and 99 roots of 3e-17: the order decides whether they count
	lost = append(lost, 1)
	for range 99 {
		lost = append(lost, 9e-34)
	}
	var near []float32 // roots within a factor of 10: the fast path
	for range 100 {
		near = append(near, float32(1+99*r.Float64()))
	}
	cases := map[string][]uint32{
		"lost": bits(lost...), "near": bits(near...), "zeros": bits(0, 0, 0),
		"zero and some": bits(0, 4, 0, 9, 1e-20), "inf": bits(1, float32(math.Inf(1)), 2),
	}
	if s := ascending(cases["lost"]); s == 1 {
		t.Fatalf("the lost case does not depend on the order (%v): fix the test", s)
	}
	for name, sel := range cases {
		for range 20 {
			r.Shuffle(len(sel), func(i, j int) { sel[i], sel[j] = sel[j], sel[i] })
			want := ascending(sel)
			got := sumSqrtBits(slices.Clone(sel), make([]float32, len(sel)))
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s: sum %v, ascending %v", name, got, want)
			}
		}
	}
}

// BenchmarkKNNSelectDrain: the pipeline's two k-NN scorings per batch of 1000 records, 8-D, one
// worker: the ranking score against the window sample (|R| = 2048, k = 100) and the solving
// set's weight (|S| = 300, k = 50). ns/op is per query.
//
//	go test -run '^$' -bench KNNSelectDrain -count 5 ./internal/algo/solvingset/
func BenchmarkKNNSelectDrain(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ nR, k int }{{2048, 100}, {300, 50}} {
		R, Q := gaussCols(r, c.nR, 8, 1), gaussCols(r, 1000, 8, 1)
		out := make([]float64, 1000)
		b.Run(fmt.Sprintf("R%d_k%d", c.nR, c.k), func(b *testing.B) {
			for b.Loop() {
				knnSelectWeights(Q, R, c.k, 1, out)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/query")
		})
	}
}

// TestKNNSelectPrefilterFallback: the sample of every 8th reference point holds the nearest
// points, so fewer than k distances lie below the sample's threshold and the selection must
// fall back to all of them; and packLE keeps exactly the values <= t, in order, and partition
// splits there (both paths).
func TestKNNSelectPrefilterFallback(t *testing.T) {
	defer func(a, b bool) { hasAVX2, hasAVX512 = a, b }(hasAVX2, hasAVX512)
	const n, k = 2048, 100
	R := [][]float32{make([]float32, n), make([]float32, n)}
	for s := range n {
		if s%prefilterStride == 0 {
			R[0][s], R[1][s] = 0.001*float32(s), 0
		} else {
			R[0][s], R[1][s] = 100+float32(s), 1
		}
	}
	Q := [][]float32{{0, 0.5, 3000}, {0, 0, 1}}
	sc := getSelectScratch(n, k, 2)
	defer selectScratchPool.Put(sc)
	r := rand.New(rand.NewPCG(9, 10))
	for _, avx := range []bool{true, false} {
		hasAVX2 = avx && cpuHasAVX2()
		hasAVX512 = false
		want, got := make([]float64, 3), make([]float64, 3)
		knnSelectRef(Q, R, k, false, want)
		knnSelectWeights(Q, R, k, 1, got)
		for i := range want {
			if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
				t.Fatalf("avx2=%v query %d: reference %v, got %v", hasAVX2, i, want[i], got[i])
			}
		}
		b := make([]uint32, n)
		for s := range b {
			b[s] = math.Float32bits(float32(s % 300))
		}
		if c := sc.prefilterBits(b, k); len(c) < k {
			t.Fatalf("a uniform spread should pass the prefilter, got %d candidates", len(c))
		}
		for s := range b {
			b[s] = math.Float32bits(float32(1000 + s))
			if s%prefilterStride == 0 {
				b[s] = math.Float32bits(float32(s))
			}
		}
		if c := sc.prefilterBits(b, k); c != nil {
			t.Fatalf("the strided sample holds the smallest: want the fallback (nil), got %d candidates", len(c))
		}
		for _, ln := range []int{0, 1, 7, 8, 9, 63, 64, 1000} {
			src := make([]uint32, ln)
			for s := range src {
				src[s] = math.Float32bits(float32(r.IntN(20)))
			}
			th := math.Float32bits(float32(r.IntN(20)))
			var want []uint32
			for _, v := range src {
				if v <= th {
					want = append(want, v)
				}
			}
			dst := make([]uint32, ln)
			if m := packLE(dst, src, th); !slices.Equal(dst[:m], want) {
				t.Fatalf("avx2=%v len %d: packLE kept %v, want %v", hasAVX2, ln, dst[:m], want)
			}
			var wantGT []uint32
			for _, v := range src {
				if v > th {
					wantGT = append(wantGT, v)
				}
			}
			le, gt := make([]uint32, ln), make([]uint32, ln)
			if m := partition(le, gt, src, th); !slices.Equal(le[:m], want) || !slices.Equal(gt[:ln-m], wantGT) {
				t.Fatalf("avx2=%v len %d: partition split %v | %v, want %v | %v", hasAVX2, ln, le[:m], gt[:ln-m], want, wantGT)
			}
		}
	}
}
