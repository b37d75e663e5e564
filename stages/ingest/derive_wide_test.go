package ingest

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestWideAddAgreesWithBig: wideAdd64, wideAddSigned, wideAddTo and wideSubFrom (one loop for
// additions and subtractions since derive28: acc - v as acc + ^v + 1) agree with math/big modulo
// 2^(64 len(acc)) on random words, shifts up to the accumulator's end (wideAddSigned's words past
// it dropped, its unrolled path and its loop's) and words of all ones or zeros, where a carry or a
// borrow runs through every word above.
func TestWideAddAgreesWithBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 4))
	word := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return ^uint64(0)
		}
		return rng.Uint64()
	}
	for range 20000 {
		n := 2 + rng.IntN(8)
		acc := make([]uint64, n)
		for i := range acc {
			acc[i] = word()
		}
		mod := new(big.Int).Lsh(big.NewInt(1), uint(64*n))
		want := wideBig(acc)
		hi, lo, neg := word(), word(), rng.IntN(2) == 0
		var term *big.Int
		switch op := rng.IntN(3); op {
		case 0: // wideAdd64: a word above shift's
			shift := uint(rng.IntN(64 * (n - 1)))
			wideAdd64(acc, lo, shift, neg)
			term = new(big.Int).Lsh(new(big.Int).SetUint64(lo), shift)
		case 1:
			shift := uint(rng.IntN(64 * n))
			wideAddSigned(acc, hi, lo, shift, neg)
			term = new(big.Int).Lsh(new(big.Int).Or(new(big.Int).Lsh(new(big.Int).SetUint64(hi), 64), new(big.Int).SetUint64(lo)), shift)
		default: // wideAddTo / wideSubFrom of a span of b
			b := make([]uint64, n)
			sp := wideSpan{rng.IntN(n), 0}
			sp.hi = sp.lo + rng.IntN(n-sp.lo+1)
			for i := sp.lo; i < sp.hi; i++ {
				b[i] = word()
			}
			if neg {
				wideSubFrom(acc, b, sp)
			} else {
				wideAddTo(acc, b, sp)
			}
			term = wideBig(b)
		}
		if neg {
			want.Sub(want, term)
		} else {
			want.Add(want, term)
		}
		want.Mod(want, mod)
		if got := wideBig(acc); got.Cmp(want) != 0 {
			t.Fatalf("%d words, neg %v: got %x, want %x", n, neg, got, want)
		}
	}
}
