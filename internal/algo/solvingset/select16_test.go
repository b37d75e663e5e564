package solvingset

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSmallest16MatchesGo: the AVX-512 kernel gives its Go twin's 16 smallest values, ascending,
// for 1 to 12 chunks of distinct values, ties, a few distinct values, and values up to
// MaxUint32 (the padding), and +0, denormals and +Inf in ties.
func TestSmallest16MatchesGo(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for trial := range 20000 {
		n := 16 * (1 + r.IntN(12))
		a := make([]uint32, n)
		for i := range a {
			switch trial % 5 {
			case 4: // +0, denormals, +Inf (a distance that overflowed), the padding, ties among them
				a[i] = [...]uint32{0, 1, 0x007fffff, 0x00800000, 0x7f800000, math.MaxUint32}[r.IntN(6)]
			case 0:
				a[i] = r.Uint32()
			case 1:
				a[i] = uint32(r.IntN(40))
			case 2:
				a[i] = uint32(r.IntN(3)) * (math.MaxUint32 / 2)
			default:
				a[i] = math.Float32bits(float32(r.ExpFloat64()))
			}
		}
		var got, want [16]uint32
		smallest16AVX512(a, &got, bitonic)
		smallest16Go(a, &want)
		if got != want {
			t.Fatalf("trial %d, %d values: %v, want %v", trial, n, got, want)
		}
	}
}
