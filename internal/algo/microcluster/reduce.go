package microcluster

import (
	"fmt"

	"github.com/outlierd/outlierd/internal/core/fanout"
)

// Chunking of Reduce. The chunk boundaries depend only on the row count, so the float64 sums are
// bit-identical for any number of workers: each chunk is summed in row order and the chunk sums
// are added in chunk order. At most maxReduceChunks chunks bound the scratch memory to
// maxReduceChunks * (3r+1) * q * 8 bytes (3 MB for r = 10, q = 200); at least minReduceChunkRows
// rows per chunk keep the per-chunk zeroing and merging negligible next to the summing.
const (
	maxReduceChunks    = 64
	minReduceChunkRows = 8192
)

// ReduceChunkRows is the number of rows per Reduce chunk for n rows. The GPU twin (gpukern)
// chunks its reduction by it, so that its float64 sums are bit-identical to Reduce's.
func ReduceChunkRows(n int) int {
	return max(minReduceChunkRows, (n+maxReduceChunks-1)/maxReduceChunks)
}

// Reduce computes the micro-cluster tuples (CF1, CF2, EF2, n) of q clusters from the rows and their
// assignment. sds may be nil (certain data: EF2 = 0). A row whose assignment is outside [0, q)
// (by convention -1) belongs to no cluster and is skipped. Anchors are left at 0: the caller
// (Cluster) knows the previous centres of clusters that came out empty. workers <= 0 means
// runtime.GOMAXPROCS(0); the result does not depend on it. Every column must have len(assign)
// rows, else Reduce returns an error.
func Reduce(means, sds [][]float32, assign []int32, q int, workers int) (*MicroClusters, error) {
	r := len(means)
	n := len(assign)
	m, err := New(r, q)
	if err != nil {
		return nil, err
	}
	rows, err := CheckColumns(means, sds, errShape)
	if err != nil {
		return nil, err
	}
	if rows != n {
		return nil, fmt.Errorf("%w: %d rows but %d assignments", errShape, rows, n)
	}
	cr := ReduceChunkRows(n)
	nChunks := (n + cr - 1) / cr
	if nChunks == 0 {
		return m, nil
	}
	// Scratch per chunk: [CF1 r*q | CF2 r*q | EF2 r*q] float64 and q counts.
	stride := 3 * r * q
	sums := make([]float64, nChunks*stride)
	counts := make([]int64, nChunks*q)
	fanout.Each(resolveWorkers(workers), nChunks, func(k int) {
		lo, hi := k*cr, min((k+1)*cr, n)
		reduceChunk(means, sds, assign[lo:hi], lo, q, sums[k*stride:(k+1)*stride], counts[k*q:(k+1)*q])
	})
	for k := range nChunks {
		s := sums[k*stride : (k+1)*stride]
		for j := range r {
			cf1, cf2, ef2 := s[j*q:(j+1)*q], s[(r+j)*q:(r+j+1)*q], s[(2*r+j)*q:(2*r+j+1)*q]
			for c := range q {
				m.CF1[j][c] += cf1[c]
				m.CF2[j][c] += cf2[c]
				m.EF2[j][c] += ef2[c]
			}
		}
		for c, v := range counts[k*q : (k+1)*q] {
			m.N[c] += v
		}
	}
	return m, nil
}

// reduceChunk sums rows [lo, lo+len(assign)) in row order into s and counts.
func reduceChunk(means, sds [][]float32, assign []int32, lo, q int, s []float64, counts []int64) {
	r := len(means)
	for _, c := range assign {
		if c >= 0 && int(c) < q {
			counts[c]++
		}
	}
	for j := range r {
		col := means[j][lo : lo+len(assign)]
		cf1, cf2 := s[j*q:(j+1)*q], s[(r+j)*q:(r+j+1)*q]
		for i, c := range assign {
			if c < 0 || int(c) >= q {
				continue
			}
			// A float32 converted to float64 is exact and so is its square (48 significant bits).
			v := float64(col[i])
			cf1[c] += v
			cf2[c] += float64(v * v)
		}
		if sds != nil {
			ecol := sds[j][lo : lo+len(assign)]
			ef2 := s[(2*r+j)*q : (2*r+j+1)*q]
			for i, c := range assign {
				if c < 0 || int(c) >= q {
					continue
				}
				v := float64(ecol[i])
				ef2[c] += float64(v * v)
			}
		}
	}
}
