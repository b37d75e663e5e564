package density

import "math/bits"

// Random numbers, specified exactly so that a GPU kernel reproduces every draw.
//
// Generator: xorshift64* (Vigna 2016; Marsaglia's xorshift, the paper's choice, with a
// multiplicative output scramble that removes its weak low bits):
//
//	x ^= x >> 12; x ^= x << 25; x ^= x >> 27; out = x * 0x2545F4914F6CDD1D
//
// Seeding: object i (a cluster index, or FirstIndex + row for records) gets its own stream with
// state = SplitMix64(seed ^ SplitMix64(i)), replaced by 0x9E3779B97F4A7C15 in the (2^-64) case
// that it is 0, the one state xorshift cannot leave. Objects are therefore independent of each
// other and of the order and the thread in which they are processed.
//
// Uniform: (out >> 11) as a 53-bit integer, plus 0.5, times 2^-53: a float64 in the open interval
// (0, 1), so PhiInv never sees 0 or 1.
//
// Draw order within one object's stream (DrawOrder documents it for the GPU twin):
//  1. mode Independent only: the random dimension order, a Fisher-Yates shuffle of 0..r-1 from
//     the top, k = r-1 down to 1: swap(perm[k], perm[Bounded(k+1)]), r-1 draws;
//  2. then each tested subspace in test order, sample-major: for sample 1..s, for each dimension
//     of the subspace in increasing position, one Uniform. A subspace computed exactly (Params.Exact
//     on a 1-D subspace) draws nothing.

// DrawOrder is the documented order in which an object's stream is consumed (see the comment
// above): the permutation draws of mode Independent, then per tested subspace s samples, each of
// one uniform per subspace dimension. The GPU twin follows it.
const DrawOrder = "permutation (independent: Fisher-Yates k=r-1..1, Bounded(k+1)), then per subspace: sample-major, dimension within the subspace"

// SplitMix64 is Steele, Lea and Flood's splitmix64 output function applied to z (one step of the
// generator from state z): z += 0x9E3779B97F4A7C15, then two xor-shift-multiply rounds. It is the
// seed-mixing function of ObjectStream.
func SplitMix64(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// XorShift64Star is the xorshift64* generator; the zero value is not valid (use ObjectStream).
type XorShift64Star struct{ s uint64 }

// ObjectStream returns the stream of object index under seed (see the package comment).
func ObjectStream(seed, index uint64) XorShift64Star {
	s := SplitMix64(seed ^ SplitMix64(index))
	if s == 0 {
		s = 0x9E3779B97F4A7C15
	}
	return XorShift64Star{s: s}
}

// Next returns the next 64-bit output.
func (g *XorShift64Star) Next() uint64 {
	x := g.s
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	g.s = x
	return x * 0x2545F4914F6CDD1D
}

// Uniform returns a float64 in the open interval (0, 1): ((Next() >> 11) + 0.5) * 2^-53.
func (g *XorShift64Star) Uniform() float64 {
	return (float64(g.Next()>>11) + 0.5) * 0x1p-53
}

// Bounded returns an integer in [0, n) as the high word of Next() * n (Lemire's multiply-shift
// without rejection; its bias, below n / 2^64, is immaterial for shuffling r <= 64 dimensions).
func (g *XorShift64Star) Bounded(n uint64) uint64 {
	hi, _ := bits.Mul64(g.Next(), n)
	return hi
}
