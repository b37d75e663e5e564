package solvingset

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/core/fanout"
)

// BruteForce is the oracle: the papers' nested loop. Every pair i < j is computed once and
// updates both k-max-heaps. Rows are claimed dynamically by the workers; to need no locks each
// worker keeps private heaps for all rows, merged at the end, so memory is
// O(workers * rows * k) float32 — meant for test-sized data, not for millions of rows (use
// SolvingSet, or Weights for all weights in O(rows) memory).
// M and Seed are ignored; the solving set returned is D itself.
func BruteForce(cols [][]float32, p Params) (Result, error) {
	rows, err := validateCols(cols)
	if err != nil {
		return Result{}, err
	}
	if err := p.Validate(rows); err != nil {
		return Result{}, err
	}
	weights := bruteForceWeights(cols, p.K, p.Workers)
	res := topN(weights, p.N)
	res.SolvingSet = make([]int, rows)
	for i := range res.SolvingSet {
		res.SolvingSet[i] = i
	}
	res.Iterations = 1
	res.DistanceComputations = int64(rows) * int64(rows-1) / 2
	return res, nil
}

// bruteForceWeights is the nested loop behind BruteForce: every pair once, both heaps updated,
// per-worker private heaps merged at the end.
func bruteForceWeights(cols [][]float32, k, workers int) []float64 {
	rows := len(cols[0])
	workers = max(1, min(workerCount(workers), rows-1))
	private := make([][]float32, workers)
	for w := range private {
		private[w] = make([]float32, rows*k)
		fillInf(private[w])
	}
	fanout.EachWorker(workers, rows, func(w, i int) {
		heaps := private[w]
		hi := heaps[i*k : (i+1)*k]
		for j := i + 1; j < rows; j++ {
			d := sqrt32(sqDistRows(cols, i, j))
			if d < hi[0] {
				heapReplaceTop(hi, d)
			}
			if hj := heaps[j*k : (j+1)*k]; d < hj[0] {
				heapReplaceTop(hj, d)
			}
		}
	})

	// Merge: the k smallest of each row's workers*k distances are its k nearest neighbours.
	weights := make([]float64, rows)
	parallelFor(workers, rows, 1024, func(w, lo, hi int) {
		all := make([]float32, workers*k)
		for i := lo; i < hi; i++ {
			for v := range workers {
				copy(all[v*k:(v+1)*k], private[v][i*k:(i+1)*k])
			}
			slices.Sort(all)
			var s float64
			for _, d := range all[:k] {
				s += float64(d)
			}
			weights[i] = s // = canonicalWeight of the k nearest: same ascending order
		}
	})
	return weights
}

// topN picks w* = the n-th largest weight and every row with weight >= w*.
func topN(weights []float64, n int) Result {
	sorted := slices.Clone(weights)
	slices.SortFunc(sorted, func(a, b float64) int { return cmp.Compare(b, a) })
	wstar := sorted[n-1]
	var out []Outlier
	for i, w := range weights {
		if w >= wstar {
			out = append(out, Outlier{Row: i, Weight: w})
		}
	}
	sortOutliers(out)
	return Result{Outliers: out, WStar: wstar}
}

// sortOutliers orders by weight descending, ties by row ascending.
func sortOutliers(out []Outlier) {
	slices.SortFunc(out, func(a, b Outlier) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return cmp.Compare(a.Row, b.Row)
	})
}

// Weights returns the exact w_k(p, D) of every row p (a row is not its own neighbour), as used
// for ROC AUC. It evaluates all rows*(rows-1) ordered pairs, parallel over tiles of rows, in
// O(workers * k) extra memory. The data must satisfy the checks of SolvingSet and
// 1 <= k <= rows-1; otherwise it panics (use ValidateData first on untrusted input).
func Weights(cols [][]float32, k, workers int) []float64 {
	rows := mustData(cols)
	if k < 1 || k >= rows {
		panic(fmt.Sprintf("solvingset.Weights: k must be in [1, rows-1], got k=%d, rows=%d", k, rows))
	}
	out := make([]float64, rows)
	knnWeights(cols, cols, true, k, workers, out)
	return out
}

// KNNWeights writes w_k(q, S) for each query row q of Q into out (len(out) == rows of Q). The
// queries are not members of S: a query equal to a point of S has a neighbour at distance 0.
// A query meets fewer than k points when k > |S|; its weight is then +Inf (the UB convention).
// S and Q are column-major with the same number of columns; a shape mismatch is a programming
// error and panics with a message saying which.
func KNNWeights(S, Q [][]float32, k, workers int, out []float64) {
	switch {
	case len(S) == 0 || len(S) != len(Q):
		panic(fmt.Sprintf("solvingset.KNNWeights: S has %d columns, Q has %d (need the same, >= 1)", len(S), len(Q)))
	case k < 1:
		panic(fmt.Sprintf("solvingset.KNNWeights: k must be >= 1, got %d", k))
	}
	for j := range S {
		if len(S[j]) != len(S[0]) || len(Q[j]) != len(Q[0]) {
			panic(fmt.Sprintf("solvingset.KNNWeights: column %d has a different length than column 0", j))
		}
	}
	if len(out) != len(Q[0]) {
		panic(fmt.Sprintf("solvingset.KNNWeights: out has %d elements, Q has %d rows", len(out), len(Q[0])))
	}
	if len(S[0]) == 0 {
		for i := range out {
			out[i] = math.Inf(1)
		}
		return
	}
	if useKNNSelect(len(S[0]), k) {
		knnSelectWeights(Q, S, k, workers, out)
		return
	}
	knnWeights(Q, S, false, k, workers, out)
}

// ValidateData reports why cols cannot be processed: no columns, columns of different lengths,
// a non-finite value, or a span so wide that squared distances would overflow float32.
func ValidateData(cols [][]float32) error {
	_, err := validateCols(cols)
	return err
}

func mustData(cols [][]float32) int {
	rows, err := validateCols(cols)
	if err != nil {
		panic(err.Error())
	}
	return rows
}
