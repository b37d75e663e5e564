package radix

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFloat32sIsSlicesSort: on data with NaNs, infinities, signed zeros, denormals, duplicates and
// every magnitude, Float32s gives slices.Sort's order value for value (bits, except that -0 and
// +0, equal to slices.Sort, come -0 first), for lengths on both sides of the insertion-sort cut.
func TestFloat32sIsSlicesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1, -1}
	for _, n := range []int{0, 1, 2, 255, 256, 257, 1000, 100_000} {
		x := make([]float32, n)
		for i := range x {
			switch r.IntN(4) {
			case 0:
				x[i] = special[r.IntN(len(special))]
			case 1:
				x[i] = math.Float32frombits(r.Uint32()) // any bits, NaN payloads too
			case 2:
				x[i] = float32(r.IntN(10)) // many ties
			default:
				x[i] = float32(r.NormFloat64() * 1e3)
			}
		}
		want := slices.Clone(x)
		slices.Sort(want)
		got := slices.Clone(x)
		Float32s(got, nil)
		for i := range got {
			g, w := got[i], want[i]
			same := math.Float32bits(g) == math.Float32bits(w) || (g != g && w != w) || (g == 0 && w == 0)
			if !same {
				t.Fatalf("n=%d: position %d is %v, slices.Sort has %v", n, i, g, w)
			}
			if i > 0 && g == 0 && got[i-1] == 0 && math.Signbit(float64(g)) && !math.Signbit(float64(got[i-1])) {
				t.Fatalf("n=%d: +0 before -0 at %d", n, i)
			}
		}
	}
}

// BenchmarkFloat32s: one feature of a 1M window, against slices.Sort.
func BenchmarkFloat32s(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 1_000_000)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	work, scratch := make([]float32, len(x)), make([]float32, len(x))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(work, x)
			Float32s(work, scratch)
		}
	})
	b.Run("slices.Sort", func(b *testing.B) {
		for b.Loop() {
			copy(work, x)
			slices.Sort(work)
		}
	})
}
