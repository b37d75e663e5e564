package gpukern

import (
	"math"
	"sync"
	"unsafe"
)

// parallelFiniteMin is the number of values from which firstNonFinite checks the columns
// concurrently, a goroutine each.
const parallelFiniteMin = 1 << 20

// firstNonFinite returns the first NaN or ±Inf of cols, by dimension and then row (the order of
// a plain scan), and whether there is one. A column is first tested whole, two values at a time
// and without branches, and large inputs a column per goroutine: the plain loop (math.IsNaN ||
// math.IsInf per value) took 25 ms of every 1M x 10 SolvingSet call on the development machine
// (issue 22), this one the test's share of a millisecond.
func firstNonFinite(cols [][]float32) (row, dim int, found bool) {
	bad := make([]bool, len(cols))
	total := 0
	for _, c := range cols {
		total += len(c)
	}
	if total >= parallelFiniteMin && len(cols) > 1 {
		var wg sync.WaitGroup
		for j, c := range cols {
			wg.Add(1)
			go func() {
				defer wg.Done()
				bad[j] = !allFinite(c)
			}()
		}
		wg.Wait()
	} else {
		for j, c := range cols {
			bad[j] = !allFinite(c)
		}
	}
	for j, b := range bad {
		if !b {
			continue
		}
		for i, v := range cols[j] {
			if nonFinite32(v) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// nonFinite32 says whether v is NaN or ±Inf: its exponent bits are all ones.
func nonFinite32(v float32) bool { return math.Float32bits(v)&0x7f800000 == 0x7f800000 }

// allFinite says whether every value of c is finite. (bits & 0x7f800000) + 0x00800000 reaches
// bit 31 exactly when the exponent bits are all ones, and stays below bit 32, so two values
// packed in a uint64 are tested at once and the results ORed.
func allFinite(c []float32) bool {
	const mask, one, sign = 0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000
	var acc uint64
	if len(c) > 0 && uintptr(unsafe.Pointer(&c[0]))%8 != 0 { // align the pairs
		acc |= uint64(math.Float32bits(c[0])&0x7f800000) + 0x00800000
		c = c[1:]
	}
	if n := len(c) / 2; n > 0 {
		for _, x := range unsafe.Slice((*uint64)(unsafe.Pointer(&c[0])), n) {
			acc |= x&mask + one
		}
	}
	if len(c)%2 == 1 {
		acc |= uint64(math.Float32bits(c[len(c)-1])&0x7f800000) + 0x00800000
	}
	return acc&sign == 0
}
