package detect

import (
	"cmp"
	"math"
	"runtime"
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

// keyedRow is a window row and its key.
type keyedRow struct {
	key uint64
	row int32
}

// recordKeys is each row's key: a hash of its values (bits), seed and the copy's ordinal, in
// no particular order (smallestKeys returns rows).
func recordKeys(cols [][]float32, seed uint64) []keyedRow {
	workers := 1
	if len(cols[0]) >= keysParallelRows {
		workers = runtime.GOMAXPROCS(0)
	}
	return recordKeysOn(cols, seed, workers)
}

// recordKeysOn is recordKeys on workers goroutines: the value hashes in row chunks; then the
// rows are partitioned by their hash's top bits (in row order within a bucket), and each
// bucket counts its copies in an open-addressing table small enough for the cache (one table
// over the window was a cache miss per row: most of this function at W = 1M). Every copy of a
// value is in one bucket, counted in row order as one serial pass would: the same keys for any
// number of workers.
func recordKeysOn(cols [][]float32, seed uint64, workers int) []keyedRow {
	rows := len(cols[0])
	hashes := make([]uint64, rows)
	parallel(workers, func(w int) {
		lo, hi := rows*w/workers, rows*(w+1)/workers
		for i := lo; i < hi; i++ {
			hashes[i] = mix64(seed ^ 0x9e3779b97f4a7c15)
		}
		for _, c := range cols {
			for i, v := range c[lo:hi] {
				hashes[lo+i] = mix64(hashes[lo+i] ^ uint64(math.Float32bits(v)))
			}
		}
	})
	const buckets = 256
	var start [buckets + 1]int
	for _, h := range hashes {
		start[h>>56+1]++
	}
	for b := range buckets {
		start[b+1] += start[b]
	}
	part := make([]keyedRow, rows) // the value hash, then the key in place
	next := start
	for i, h := range hashes {
		part[next[h>>56]] = keyedRow{key: h, row: int32(i)}
		next[h>>56]++
	}
	parallel(workers, func(w int) {
		var tags []uint64 // slots hold hash|1 (0 is empty) and a count
		var counts []uint32
		for b := w; b < buckets; b += workers {
			bucket := part[start[b]:start[b+1]]
			size := 1
			for size < 2*len(bucket) {
				size <<= 1
			}
			if cap(tags) < size {
				tags, counts = make([]uint64, size), make([]uint32, size)
			}
			tags, counts = tags[:size], counts[:size]
			clear(tags)
			clear(counts)
			for t := range bucket {
				h := bucket[t].key
				tag := h | 1
				s := int(h) & (size - 1)
				for tags[s] != 0 && tags[s] != tag {
					s = (s + 1) & (size - 1)
				}
				tags[s] = tag
				bucket[t].key = mix64(h + uint64(counts[s])*0x9e3779b97f4a7c15)
				counts[s]++
			}
		}
	})
	return part
}

// keysParallelRows is the fewest rows recordKeys spreads over the cores.
const keysParallelRows = 1 << 16

// parallel runs f(w) for w < n, each on its own goroutine (one call: inline), and waits.
func parallel(n int, f func(w int)) {
	if n == 1 {
		f(0)
		return
	}
	onWorkers(n, f)
}

// smallestKeys returns the rows of the m smallest keys salted by salt, in ascending key order
// (so a sample's order is the records', not the window's). O(rows) plus a sort of the about
// 1.25 m candidates below a threshold the uniform keys put near the m-th smallest.
func smallestKeys(keys []keyedRow, m int, salt uint64) []int {
	rows := len(keys)
	m = min(m, rows)
	if m == 0 {
		return nil
	}
	frac := math.Min(1.25*float64(m)/float64(rows)+1e-6, 1)
	var cand []keyedRow
	for {
		limit := uint64(math.MaxUint64)
		if frac < 1 {
			limit = uint64(frac * math.MaxUint64)
		}
		cand = cand[:0]
		for _, k := range keys {
			if s := mix64(k.key ^ salt); s <= limit {
				cand = append(cand, keyedRow{key: s, row: k.row})
			}
		}
		if len(cand) >= m {
			break
		}
		frac = math.Min(2*frac, 1) // fewer than m below the limit (rare): raise it
	}
	slices.SortFunc(cand, func(a, b keyedRow) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.row, b.row) // a 64-bit collision
	})
	out := make([]int, m)
	for i := range out {
		out[i] = int(cand[i].row)
	}
	return out
}
