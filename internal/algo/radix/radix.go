// Package radix sorts float32 values by their bits (LSD radix sort, three passes of 11 bits): a
// model build sorts each feature of the window once (stages/detect), 8 sorts of 1M values at W =
// 1M, and comparison sorting took 70-270 ms of CPU each on the device machine's host (issue 12
// item 5: a third of a build's CPU); three linear passes take a quarter of the time (20 ms
// against 85 ms for 1M values on the development machine: BenchmarkFloat32s).
package radix

import "math"

// Float32s sorts x ascending in place, in the order of slices.Sort: NaNs first, then the
// numbers ascending (-Inf first, +Inf last); -0 sorts before +0 (slices.Sort treats them as equal
// and may place them either way). scratch, when it holds len(x) values, is used as the second
// buffer (else one is allocated); its contents are overwritten.
func Float32s(x, scratch []float32) {
	n := len(x)
	if n < 256 { // below a few hundred values the passes' counting costs more than it saves
		insertion(x)
		return
	}
	if len(scratch) < n {
		scratch = make([]float32, n)
	}
	// Keys: the bits mapped so that unsigned order is numeric order (negatives inverted,
	// positives with the sign bit set); NaNs are counted out first and placed in front.
	src, dst := x, scratch[:n]
	nan := 0
	var count [3][2048]int
	for _, v := range x {
		if v != v {
			nan++
			continue
		}
		k := key(v)
		count[0][k&2047]++
		count[1][(k>>11)&2047]++
		count[2][k>>22]++
	}
	if nan > 0 { // move the numbers to dst, keep the NaNs' bits in order at its front
		m := 0
		j := 0
		for _, v := range src {
			if v != v {
				dst[j] = v
				j++
			}
		}
		for _, v := range src {
			if v == v {
				dst[nan+m] = v
				m++
			}
		}
		copy(src, dst)
	}
	a, b := src[nan:], dst[nan:]
	for p := range 3 {
		shift := uint(11 * p)
		var sum int
		c := &count[p]
		for i := range c {
			c[i], sum = sum, sum+c[i]
		}
		for _, v := range a {
			d := (key(v) >> shift) & 2047
			b[c[d]] = v
			c[d]++
		}
		a, b = b, a
	}
	// Three passes: the result is in the other buffer; copy it back.
	copy(x[nan:], a)
}

// key maps a float32 to a uint32 whose unsigned order is the float's numeric order.
func key(v float32) uint32 {
	u := math.Float32bits(v)
	if u>>31 != 0 {
		return ^u
	}
	return u | 1<<31
}

// insertion sorts a short slice (NaNs first, -0 before +0, as Float32s).
func insertion(x []float32) {
	less := func(a, b float32) bool {
		if a != a {
			return b == b
		}
		return b == b && key(a) < key(b)
	}
	for i := 1; i < len(x); i++ {
		for j := i; j > 0 && less(x[j], x[j-1]); j-- {
			x[j], x[j-1] = x[j-1], x[j]
		}
	}
}
