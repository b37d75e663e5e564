package detect

import "math"

// A key's build sorts six arrays of a few hundred values (its d columns, its density, distance
// and combined calibration scores) and needs, besides the sorted values, each record's place
// in them: its counts in its column (its tail score) and its calibration scores' places (its
// calibrated scores), which a search per record found before. Each value's key and row are
// packed in one uint64 and sorted a byte at a time (LSD radix), which gives both at once and,
// unlike a comparison sort (slices.Sort: about 6 µs for 200 new values, its comparisons
// mispredicted), costs the same whatever the values.
//
// Keys are the values' bits mapped so that unsigned order is numeric order (key32, key64): for
// finite values without -0, which keyBuild ensures for the columns and which the calibration
// scores are (sums of non-negative terms and -log10 of probabilities below 1: never -0, NaN or
// infinite), equal values have equal keys and equal bits, so every correct sort of them holds
// the same bits in the same places, slices.Sort's of the floats included.

// rowBits is how many low bits of a packed key hold the row (keyBuildMaxRows rows).
const rowBits = 12

// rowOf is a packed key's row.
func rowOf(p uint64) int { return int(p & (1<<rowBits - 1)) }

// key32 maps a float32 to a key whose unsigned order is the float's numeric order (not NaN).
func key32(v float32) uint32 {
	u := math.Float32bits(v)
	if u>>31 != 0 {
		return ^u
	}
	return u | 1<<31
}

// key64 is key32 for a float64.
func key64(v float64) uint64 {
	u := math.Float64bits(v)
	if u>>63 != 0 {
		return ^u
	}
	return u | 1<<63
}

// radixScratch is a radix sort's second buffer and counts.
type radixScratch struct {
	tmp   []uint64
	count [4][256]uint32 // (bytes 4..7)
}

// sortRows32 sorts the rows of v by value into packed (len(v) <= 1<<rowBits): packed[t]>>32 is
// the t-th smallest value's key32, rowOf(packed[t]) its row; ties by row.
func (rs *radixScratch) sortRows32(v []float32, packed []uint64) {
	for i, x := range v {
		packed[i] = uint64(key32(x))<<32 | uint64(i)
	}
	rs.sort(packed) // (the rows are in order already)
}

// sortRows64 sorts the rows of v by value into packed (len(v) <= 1<<rowBits): v[rowOf(packed[t])]
// is the t-th smallest value; ties by row. The packed key keeps the key64's top 32 bits (sign,
// exponent and 20 bits of the fraction: values apart by more than a millionth of their size
// differ there) beside the row, so the radix sort takes three bytes of a calibration's scores
// (their top byte shared) rather than five: a build's three score sorts were a sixth of its
// host part (docs/BENCHMARKS.md §13.1.6). Values that share those bits (equal ones, and
// distinct ones within 2^32 ulps: rare, a pair at a time) are put in order by a pass of
// insertion on the whole key, which moves nothing otherwise: the order is (value, row), as a
// packed key of more bits gives.
func (rs *radixScratch) sortRows64(v []float64, packed []uint64) {
	for i, x := range v {
		packed[i] = key64(x)&^(1<<32-1) | uint64(i)
	}
	rs.sort(packed)
	for t := 1; t < len(packed); t++ {
		p := packed[t]
		if p>>32 != packed[t-1]>>32 {
			continue
		}
		k := key64(v[rowOf(p)])
		u := t
		for u > 0 && packed[u-1]>>32 == p>>32 && key64(v[rowOf(packed[u-1])]) > k {
			packed[u] = packed[u-1]
			u--
		}
		packed[u] = p
	}
}

// sort sorts a by its bytes 4..7, stably, skipping a byte all values share.
func (rs *radixScratch) sort(a []uint64) {
	n := len(a)
	if n < 2 {
		return
	}
	c := &rs.count
	clear(c[:])
	for _, k := range a {
		c[0][byte(k>>32)]++
		c[1][byte(k>>40)]++
		c[2][byte(k>>48)]++
		c[3][byte(k>>56)]++
	}
	rs.tmp = grow(rs.tmp, n)
	src, dst := a, rs.tmp[:n]
	for b := range c {
		cb := &c[b]
		shift := 32 + 8*uint(b)
		if cb[byte(a[0]>>shift)] == uint32(n) {
			continue // every value has this byte
		}
		var sum uint32
		for i := range cb {
			cb[i], sum = sum, sum+cb[i]
		}
		for _, k := range src {
			d := byte(k >> shift)
			dst[cb[d]] = k
			cb[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &a[0] { // an odd number of passes: the result is in the scratch
		copy(a, src)
	}
}
