package detect

import "math"

// A key's build sorts six arrays of a few hundred values (its d columns, its density, distance
// and combined calibration scores): comparison sorts of float32 and float64 spent most of their
// time on mispredicted comparisons and NaN checks (40% of a build once its logarithms were
// looked up). sortByKey sorts them by an integer key in the values' order, a byte at a time
// (LSD radix), and carries each value's row, so that a build also learns where each of its
// records landed (its rank in the column, its calibration score's place) without a search.
//
// Keys are the values' bits mapped so that unsigned order is numeric order (key32, key64): for
// finite values without -0, which keyBuild ensures for the columns and which the calibration
// scores are (sums of non-negative terms and -log10 of probabilities below 1: never -0, NaN or
// infinite), equal values have equal keys and equal bits, so every correct sort of them holds
// the same bits in the same places, slices.Sort's included.

// key32 maps a float32 to a key whose unsigned order is the float's numeric order (not NaN).
func key32(v float32) uint64 {
	u := math.Float32bits(v)
	if u>>31 != 0 {
		return uint64(^u)
	}
	return uint64(u | 1<<31)
}

// unkey32 is key32's inverse.
func unkey32(k uint64) float32 {
	u := uint32(k)
	if u>>31 != 0 {
		return math.Float32frombits(u &^ (1 << 31))
	}
	return math.Float32frombits(^u)
}

// key64 is key32 for a float64.
func key64(v float64) uint64 {
	u := math.Float64bits(v)
	if u>>63 != 0 {
		return ^u
	}
	return u | 1<<63
}

// unkey64 is key64's inverse.
func unkey64(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// radixScratch is sortByKey's second buffers.
type radixScratch struct {
	keys  []uint64
	rows  []uint16
	count [8][256]uint32
}

// sortByKey sorts keys ascending by their low width bytes (4 or 8), stably, moving rows[i] with
// keys[i] (len(rows) == len(keys) <= 65,536). A byte all keys share costs no pass.
func (rs *radixScratch) sortByKey(keys []uint64, rows []uint16, width int) {
	n := len(keys)
	if n == 0 {
		return
	}
	c := &rs.count
	for b := range width {
		clear(c[b][:])
	}
	for _, k := range keys {
		for b := range width {
			c[b][byte(k>>(8*b))]++
		}
	}
	rs.keys, rs.rows = grow(rs.keys, n), grow(rs.rows, n)
	src, srcRows, dst, dstRows := keys, rows, rs.keys, rs.rows
	for b := range width {
		cb := &c[b]
		if cb[byte(keys[0]>>(8*b))] == uint32(n) {
			continue // every key has this byte
		}
		var sum uint32
		for i := range cb {
			cb[i], sum = sum, sum+cb[i]
		}
		shift := 8 * uint(b)
		for i, k := range src {
			d := byte(k >> shift)
			dst[cb[d]], dstRows[cb[d]] = k, srcRows[i]
			cb[d]++
		}
		src, srcRows, dst, dstRows = dst, dstRows, src, srcRows
	}
	if &src[0] != &keys[0] { // an odd number of passes: the result is in the scratch
		copy(keys, src)
		copy(rows, srcRows)
	}
}
