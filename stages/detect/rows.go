package detect

import (
	"runtime"
	"slices"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The rows a stream-order pass over a batch needs, found on the cores for a large batch: the
// alarm cap, the deadband's series and the explanations each read few of a batch's rows.

// rowsWhere are the rows of scores for which keep holds, in order, found on the cores for a large
// batch (keep reads its own row only).
func rowsWhere(scores []batch.Score, keep func(sc *batch.Score) bool) []int {
	n := len(scores)
	workers := max(1, min(runtime.GOMAXPROCS(0), n/scoresGrain))
	parts := make([][]int, workers)
	find := func(w int) {
		var rows []int
		for i := n * w / workers; i < n*(w+1)/workers; i++ {
			if keep(&scores[i]) {
				rows = append(rows, i)
			}
		}
		parts[w] = rows
	}
	if workers == 1 {
		find(0)
		return parts[0]
	}
	onWorkers(workers, find)
	return slices.Concat(parts...)
}

// mergeRows is the ascending union of the ascending rows a and b.
func mergeRows(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default: // (a row in both)
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}
