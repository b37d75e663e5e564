package detect

import "math/bits"

// flagRing is a ring of n flags, a bit each: a key's significance marks (keyState.sig) and
// alarm flags (alarmCap). As []bool a ring of 200 was 208 bytes of heap, as bits 32: the two
// rings' 352 bytes a key kept a key under 16,000 bytes with the calibrations' indexes
// (docs/BENCHMARKS.md §13.1.10).
type flagRing struct {
	bits []uint64
	n    int32
}

func newFlagRing(n int) flagRing { return flagRing{bits: make([]uint64, (n+63)/64), n: int32(n)} }

// len is the ring's length, n.
func (f flagRing) len() int { return int(f.n) }

// at is flag i (0 <= i < n).
func (f flagRing) at(i int) bool { return f.bits[i>>6]&(1<<(i&63)) != 0 }

// set sets flag i to v.
func (f flagRing) set(i int, v bool) {
	w, m := &f.bits[i>>6], uint64(1)<<(i&63)
	if v {
		*w |= m
	} else {
		*w &^= m
	}
}

// count is how many of the flags lo..hi-1 are set (0 <= lo <= hi <= n).
func (f flagRing) count(lo, hi int) int {
	c := 0
	for lo < hi {
		w := lo >> 6
		end := min(hi, (w+1)<<6) // the flags of this word: lo..end-1
		word := f.bits[w] >> (lo & 63)
		if k := end - lo; k < 64 {
			word &= 1<<k - 1
		}
		c += bits.OnesCount64(word)
		lo = end
	}
	return c
}

// word is flag i's word (for a prefetch of it).
func (f flagRing) word(i int) *uint64 { return &f.bits[i>>6] }

// clone is an independent copy.
func (f flagRing) clone() flagRing {
	return flagRing{bits: append([]uint64(nil), f.bits...), n: f.n}
}
