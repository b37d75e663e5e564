package ingest

import (
	"math"
	"math/bits"
)

// Exact sums for the std kind (derive_std.go): float32 values, their squares and (with
// uncertainty) products with their sds' squares, held as wide fixed-point integers, so that a
// value leaving the window is removed exactly and the spread is computed from exact sums in
// O(1) whatever the window's length.
//
// A float32 is M 2^(s - 149) with M < 2^24 and 0 <= s <= 253 (f32Fixed): an integer in units
// of 2^-149, below 2^277. A product of k such values is an integer in units of 2^(-149 k),
// below 2^(277 k); a sum of at most 100000 (< 2^17) of them, below 2^(277 k + 17). The
// accumulators are little-endian uint64 words, two's complement where the terms have a sign
// (the values, x sd^2), wide enough for that bound plus the sign:
//
//	sum x        units 2^-149   5 words (< 2^294 and a sign: 295 bits)
//	sum x^2      units 2^-298   9 words (< 2^571)
//	sum sd^2     units 2^-298   9 words
//	sum x sd^2   units 2^-447  14 words (< 2^848 and a sign)
//	sum x^2 sd^2 units 2^-596  18 words (< 2^1125)
//
// Adding and removing a term is exact (integer arithmetic modulo 2^(64 words), with no
// overflow within those bounds), so the sums never drift and hold no residue of values that
// left: a window of one repeated value gives a variance numerator of exactly 0.
const (
	wideS  = 5  // sum x
	wideQ  = 9  // sum x^2 (and sum sd^2)
	wideB  = 14 // sum x sd^2
	wideC  = 18 // sum x^2 sd^2
	wideP  = 20 // the propagation's numerator: m^2 C - 2 m S B + S^2 A, each below 2^1162
	wideT  = 10 // the variance's numerator: m Q - S^2, below 2^(571 + 17)
	wideSq = 10 // S^2: below 2^590
)

// f32Fixed is v as mant 2^(shift - 149), mant < 2^24, shift <= 253, and its sign (-0 reads as
// 0, positive). v is finite (the decoder makes NaN and Inf dead letters, and every derived
// column is finite); an Inf or a NaN would read as +-(1 + f) 2^128, within the bounds above.
func f32Fixed(v float32) (mant uint64, shift uint, neg bool) {
	b := math.Float32bits(v)
	e, f := (b>>23)&0xff, uint64(b&0x7fffff)
	if e == 0 { // zero or subnormal: f 2^-149
		return f, 0, b>>31 != 0 && f != 0
	}
	return f | 1<<23, uint(e - 1), b>>31 != 0
}

// The additions below add or subtract (neg) in one loop: acc - v is acc + ^v + 1, the words of
// ^v above v's own all ones, so past v a carry runs on (an increment) only where an addition left
// one, and a borrow (a decrement) only where a subtraction left none (wideRunOn).

// wideAddAt adds the words v to acc from its word i on, or subtracts them (neg), modulo
// 2^(64 len(acc)) (v's words past acc's end are dropped).
func wideAddAt(acc []uint64, i int, v []uint64, neg bool) {
	var flip, c uint64
	if neg {
		flip, c = ^uint64(0), 1
	}
	for _, x := range v {
		if i == len(acc) {
			return
		}
		acc[i], c = bits.Add64(acc[i], x^flip, c)
		i++
	}
	if c != flip&1 {
		wideRunOn(acc, i, flip)
	}
}

// wideRunOn carries 1 into acc from its word i up (flip 0), or borrows 1 (flip ^0): an
// addition's carry out, a subtraction's borrow.
func wideRunOn(acc []uint64, i int, flip uint64) {
	step := flip | 1 // +1, or -1 modulo 2^64
	for ; i < len(acc); i++ {
		acc[i] += step
		if acc[i] != flip { // (it wrapped only where it now reads 0 up, ^0 down: flip)
			return
		}
	}
}

// wideAddSigned adds (hi 2^64 + lo) 2^shift to acc, or subtracts it where neg, modulo
// 2^(64 len(acc)). (wideAddAt unrolled for its three words where acc holds them: the sums' hot
// path with uncertainty.)
func wideAddSigned(acc []uint64, hi, lo uint64, shift uint, neg bool) {
	w, b := int(shift/64), shift%64
	v0, v1, v2 := lo<<b, lo>>(64-b)|hi<<b, hi>>(64-b) // Go: a shift by 64 is 0
	if w+3 > len(acc) {
		v := [3]uint64{v0, v1, v2}
		wideAddAt(acc, w, v[:], neg)
		return
	}
	var flip, c uint64
	if neg {
		flip, c = ^uint64(0), 1
	}
	acc[w], c = bits.Add64(acc[w], v0^flip, c)
	acc[w+1], c = bits.Add64(acc[w+1], v1^flip, c)
	acc[w+2], c = bits.Add64(acc[w+2], v2^flip, c)
	if c != flip&1 {
		wideRunOn(acc, w+3, flip)
	}
}

// wideAdd64 adds v 2^shift to acc, or subtracts it where neg, modulo 2^(64 len(acc)); acc has a
// word above shift's. (wideAddAt's loop unrolled for its two words: the sums' hot path.)
func wideAdd64(acc []uint64, v uint64, shift uint, neg bool) {
	w, b := int(shift/64), shift%64
	var flip, c uint64
	if neg {
		flip, c = ^uint64(0), 1
	}
	acc[w], c = bits.Add64(acc[w], v<<b^flip, c)
	acc[w+1], c = bits.Add64(acc[w+1], v>>(64-b)^flip, c) // Go: a shift by 64 is 0
	if c != flip&1 {
		wideRunOn(acc, w+2, flip)
	}
}

// wideNeg negates a two's complement acc in place.
func wideNeg(acc []uint64) {
	c := uint64(1)
	for i, x := range acc {
		acc[i], c = bits.Add64(^x, 0, c)
	}
}

// wideIsNeg is whether the two's complement acc is negative.
func wideIsNeg(acc []uint64) bool { return acc[len(acc)-1]>>63 != 0 }

// wideAbs copies |a| (a two's complement) to dst (as long), and says whether a was negative.
func wideAbs(dst, a []uint64) bool {
	copy(dst, a)
	if wideIsNeg(a) {
		wideNeg(dst)
		return true
	}
	return false
}

// wideSpan is a superset of the words of an unsigned number that are not zero: [lo, hi).
type wideSpan struct{ lo, hi int }

// spanOf is the span of t from its lowest nonzero word to its highest ({0, 0} for 0).
func spanOf(t []uint64) wideSpan {
	hi := len(t)
	for hi > 0 && t[hi-1] == 0 {
		hi--
	}
	lo := 0
	for lo < hi && t[lo] == 0 {
		lo++
	}
	return wideSpan{lo, hi}
}

// wideSubFrom subtracts the unsigned b (span sb) from acc (as long; acc >= b); acc's words
// outside sb and the borrow's are unchanged.
func wideSubFrom(acc, b []uint64, sb wideSpan) { wideAddAt(acc, sb.lo, b[sb.lo:sb.hi], true) }

// wideAddTo adds the unsigned b (span sb) to acc (as long); acc's words outside sb and the
// carry's are unchanged.
func wideAddTo(acc, b []uint64, sb wideSpan) { wideAddAt(acc, sb.lo, b[sb.lo:sb.hi], false) }

// wideMul sets dst's words in the product's span to a b (unsigned; a and b of spans sa, sb)
// and returns that span; dst's other words are left as they were (the caller reads the span
// only, or dst was zero there); dst must not share memory with a or b, and holds the span.
func wideMul(dst, a []uint64, sa wideSpan, b []uint64, sb wideSpan) wideSpan {
	sp := wideSpan{sa.lo + sb.lo, min(sa.hi+sb.hi, len(dst))}
	if sa.lo >= sa.hi || sb.lo >= sb.hi {
		return wideSpan{}
	}
	clear(dst[sp.lo:sp.hi])
	for i := sa.lo; i < sa.hi; i++ {
		x := a[i]
		if x == 0 {
			continue
		}
		var carry uint64
		k := i + sb.lo
		for j := sb.lo; j < sb.hi && k < sp.hi; j++ {
			hi, lo := bits.Mul64(x, b[j])
			var c uint64
			lo, c = bits.Add64(lo, carry, 0)
			hi += c
			dst[k], c = bits.Add64(dst[k], lo, 0)
			carry = hi + c
			k++
		}
		for ; carry != 0 && k < sp.hi; k++ {
			dst[k], carry = bits.Add64(dst[k], carry, 0)
		}
	}
	return sp
}

// wideMulSmall sets dst to a m for an unsigned a of span sa, all of dst (the words outside the
// product's span zero), and returns the product's span; dst holds a word above sa's; dst may
// be a.
func wideMulSmall(dst, a []uint64, sa wideSpan, m uint64) wideSpan {
	var carry uint64
	for i := sa.lo; i < sa.hi; i++ {
		h, l := bits.Mul64(a[i], m)
		var c uint64
		dst[i], c = bits.Add64(l, carry, 0)
		carry = h + c
	}
	clear(dst[:sa.lo])
	dst[sa.hi] = carry
	clear(dst[sa.hi+1:])
	return wideSpan{sa.lo, sa.hi + 1}
}

// wideIsZero is whether acc is 0.
func wideIsZero(acc []uint64) bool {
	for _, x := range acc {
		if x != 0 {
			return false
		}
	}
	return true
}

// wideBitsAt is the 64 bits of the unsigned t from bit pos up (bits outside t read 0).
func wideBitsAt(t []uint64, pos int) uint64 {
	w := pos >> 6 // floor, pos may be negative
	b := uint(pos & 63)
	at := func(i int) uint64 {
		if i < 0 || i >= len(t) {
			return 0
		}
		return t[i]
	}
	return at(w)>>b | at(w+1)<<(64-b)
}

// wideQuoFloat is t / d 2^exp2 rounded to the nearest float64 (ties to even), for the unsigned
// t and 0 < d < 2^40, where the result is a normal float64 or 0 (t = 0): the callers' sums
// keep it within 2^-700 and 2^600. The quotient of t's top 128 bits by d has at least 88 bits
// (t's top bit set, d < 2^40); whether the rest of the exact quotient is zero (the division's
// remainder and t's lower bits) is the sticky bit, so rounding its top 64 bits to 53 with it is
// the correct rounding of the exact quotient.
func wideQuoFloat(t []uint64, d uint64, exp2 int) float64 {
	top := len(t) - 1
	for top >= 0 && t[top] == 0 {
		top--
	}
	if top < 0 {
		return 0
	}
	k := 64*top + 63 - bits.LeadingZeros64(t[top]) - 127 // t = W 2^k + low, W of 128 bits
	hi, lo := wideBitsAt(t, k+64), wideBitsAt(t, k)
	sticky := false
	if k > 0 { // t's bits below k
		w := k >> 6
		for i := range w {
			sticky = sticky || t[i] != 0
		}
		sticky = sticky || t[w]&(1<<uint(k&63)-1) != 0
	}
	q1, r1 := hi/d, hi%d
	q0, r0 := bits.Div64(r1, lo, d)
	sticky = sticky || r0 != 0
	// The exact t / d lies in [Q 2^k, (Q + 1) 2^k), Q = q1 2^64 + q0 >= 2^87 (so q1 > 0),
	// equal to its lower end where nothing is sticky.
	lz := uint(bits.LeadingZeros64(q1))
	m64 := q1<<lz | q0>>(64-lz)
	sticky = sticky || q0<<lz != 0
	e := k + 64 - int(lz) + 11 + exp2 // t / d 2^exp2 ~ (m64 / 2^11) 2^e
	mant, rem := m64>>11, m64&0x7ff
	if rem > 0x400 || rem == 0x400 && (sticky || mant&1 == 1) {
		mant++
	}
	if mant == 1<<53 {
		mant, e = 1<<52, e+1
	}
	// mant 2^e with 2^52 <= mant < 2^53: a normal float64 (the callers' range).
	return math.Float64frombits(uint64(e+52+1023)<<52 | mant&(1<<52-1))
}

// wideDouble doubles acc in place, modulo 2^(64 len(acc)) (two's complement too).
func wideDouble(acc []uint64) {
	for i := len(acc) - 1; i > 0; i-- {
		acc[i] = acc[i]<<1 | acc[i-1]>>63
	}
	acc[0] <<= 1
}
