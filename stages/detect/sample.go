package detect

import (
	"math"
	"slices"
)

// The ranking part's two samples of the window (the distance score's R and the calibration
// records) are chosen by what the records are, not by where they sit in the window: each row
// gets a key that is a hash of its feature values, of the copy's ordinal among the window's
// rows with the very same values (the first, second, ... copy), and of detect.seed, and a
// sample of m rows is the m rows of smallest key (salted per sample, so the two are independent
// as two draws). The multiset of keys depends only on the multiset of records, so the same
// records in another order (a shuffled replay file, partitions interleaved otherwise, another
// batch split) give the same samples, the same calibration and the same scores; keys are
// uniform, so a sample is a uniform sample of the window's records, copies counted (a value a
// stuck sensor repeats over half the window fills about half of R). The values are the
// identity because they are the only one a record keeps through a replay of a file, a shuffle,
// or a topic re-partitioned: (partition, offset) changes with each of those. Two different
// rows share a key only on a 64-bit hash collision (order could then decide between them).

// Salts of the two samples.
const (
	saltSample      = 0x72616e6b // "rank": R of the distance score
	saltCalibration = 0x63616c69 // "cali": the calibration records
)

// mix64 is SplitMix64's finaliser: a bijection of uint64 whose output bits each depend on all
// input bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// recordKeys is each row's key: a hash of its values (bits), seed and the copy's ordinal.
func recordKeys(cols [][]float32, seed uint64) []uint64 {
	rows := len(cols[0])
	keys := make([]uint64, rows)
	for i := range keys {
		keys[i] = mix64(seed ^ 0x9e3779b97f4a7c15)
	}
	for _, c := range cols {
		for i, v := range c {
			keys[i] = mix64(keys[i] ^ uint64(math.Float32bits(v)))
		}
	}
	// The ordinal of each copy, counted in an open-addressing table of the value hashes (a
	// Go map was 4/5 of this function at W = 1M): slots hold hash|1 (0 is empty) and a count.
	size := 1
	for size < 2*rows {
		size <<= 1
	}
	hashes, counts := make([]uint64, size), make([]uint32, size)
	for i, h := range keys {
		tag := h | 1
		s := int(h>>32) & (size - 1)
		for hashes[s] != 0 && hashes[s] != tag {
			s = (s + 1) & (size - 1)
		}
		hashes[s] = tag
		keys[i] = mix64(h + uint64(counts[s])*0x9e3779b97f4a7c15)
		counts[s]++
	}
	return keys
}

// smallestKeys returns the rows of the m smallest keys salted by salt, in ascending key order
// (so a sample's order is the records', not the window's). O(rows) plus a sort of the about
// 1.25 m candidates below a threshold the uniform keys put near the m-th smallest.
func smallestKeys(keys []uint64, m int, salt uint64) []int {
	rows := len(keys)
	m = min(m, rows)
	if m == 0 {
		return nil
	}
	salted := func(i int) uint64 { return mix64(keys[i] ^ salt) }
	frac := math.Min(1.25*float64(m)/float64(rows)+1e-6, 1)
	var cand []int
	for {
		limit := uint64(math.MaxUint64)
		if frac < 1 {
			limit = uint64(frac * math.MaxUint64)
		}
		cand = cand[:0]
		for i := range keys {
			if salted(i) <= limit {
				cand = append(cand, i)
			}
		}
		if len(cand) >= m {
			break
		}
		frac = math.Min(2*frac, 1) // fewer than m below the limit (rare): raise it
	}
	slices.SortFunc(cand, func(a, b int) int {
		ka, kb := salted(a), salted(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return a - b // a 64-bit collision
	})
	return cand[:m]
}
