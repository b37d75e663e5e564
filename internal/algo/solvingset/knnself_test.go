package solvingset

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKNNWeightsSelfMatchesMembers pins KNNWeightsSelf to KNNWeightsMembers(P, P) bit for bit:
// a key's window (200 points, k = 10, 3-D) and other sizes, ties on a grid, duplicates (another
// point at distance 0 besides the point itself), values over many octaves (sumSqrtBits sorts),
// too few points for k (+Inf), and every distance kernel (AVX-512, AVX2, SSE alone).
func TestKNNWeightsSelfMatchesMembers(t *testing.T) {
	native2, native512 := hasAVX2, hasAVX512
	defer func() { hasAVX2, hasAVX512 = native2, native512 }()
	r := rand.New(rand.NewPCG(7, 8))
	type shape struct{ n, dims, k int }
	for _, c := range []shape{{200, 3, 10}, {50, 3, 10}, {1000, 5, 20}, {11, 2, 10}, {10, 2, 10}, {2, 1, 1}, {77, 8, 3}, {300, 3, 64}, {4096, 3, 10}} {
		for _, kind := range []string{"normal", "grid", "octaves", "dups", "constant", "nonfinite"} {
			P := make([][]float32, c.dims)
			for j := range P {
				P[j] = make([]float32, c.n)
				for i := range P[j] {
					switch kind {
					case "normal":
						P[j][i] = float32(r.NormFloat64())
					case "grid":
						P[j][i] = float32(r.IntN(4))
					case "octaves":
						P[j][i] = float32(math.Ldexp(r.Float64(), r.IntN(40)-20))
					case "dups":
						P[j][i] = float32(r.NormFloat64())
						if i%5 == 4 {
							P[j][i] = P[j][i-1]
						}
					case "constant":
						P[j][i] = 3
					case "nonfinite": // the own distance is NaN: another point's zero, or none, is skipped
						P[j][i] = float32(r.NormFloat64())
						switch i % 9 {
						case 2:
							P[j][i] = float32(math.Inf(1 - 2*(i%2)))
						case 5:
							P[j][i] = float32(math.NaN())
						case 7:
							P[j][i] = P[j][i-1]
						}
					}
				}
			}
			for _, kern := range []struct{ avx2, avx512 bool }{{native2, native512}, {native2, false}, {false, false}} {
				hasAVX2, hasAVX512 = kern.avx2, kern.avx512
				want, got := make([]float64, c.n), make([]float64, c.n)
				KNNWeightsMembers(P, P, c.k, 1, want)
				KNNWeightsSelf(P, c.k, got)
				for i := range want {
					if math.IsNaN(want[i]) && math.IsNaN(got[i]) {
						continue // (a NaN's payload is no result)
					}
					if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
						t.Fatalf("%+v %s avx2=%v avx512=%v: point %d: %v, want %v", c, kind, kern.avx2, kern.avx512, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// BenchmarkKNNWeightsSelf: a key's window's k-NN calibration (200 points, 3-D, k = 10), each
// point against the others: KNNWeightsMembers on one goroutine (members) against KNNWeightsSelf,
// and KNNWeightsSelf without AVX-512 (smallestK). 32 windows in turn (one window over and over
// lets the branch predictor learn its comparisons); ns/query is per point.
func BenchmarkKNNWeightsSelf(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200
	Ps := make([][][]float32, 32)
	for w := range Ps {
		Ps[w] = make([][]float32, 3)
		for j := range Ps[w] {
			Ps[w][j] = make([]float32, n)
			for i := range Ps[w][j] {
				Ps[w][j][i] = float32(r.NormFloat64())
			}
		}
	}
	out := make([]float64, n)
	native := hasAVX512
	defer func() { hasAVX512 = native }()
	for _, c := range []struct {
		name   string
		avx512 bool
		f      func(P [][]float32)
	}{
		{"members", native, func(P [][]float32) { KNNWeightsMembers(P, P, 10, 1, out) }},
		{"self", native, func(P [][]float32) { KNNWeightsSelf(P, 10, out) }},
		{"self-smallestK", false, func(P [][]float32) { KNNWeightsSelf(P, 10, out) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			hasAVX512 = c.avx512
			for i := range b.N {
				c.f(Ps[i%len(Ps)])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/query")
		})
	}
}
