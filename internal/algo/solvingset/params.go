// Package solvingset finds exact distance-based outliers on the CPU: the nested-loop oracle
// BruteForce, the SolvingSet algorithm of Angiulli, Basta, Lodi and Sartori (parallel over all
// cores with the papers' split loop), exact k-NN weights, and the prediction Model that scores new
// points against a solving set (ALGORITHMS.md §1).
//
// Conventions (ALGORITHMS.md §1):
//   - w_k(p, D) is the sum of the distances from p to its k nearest neighbours in D \ {p}; a point is
//     never its own neighbour, duplicates are distinct objects at distance 0.
//   - Distances are Euclidean, computed in float32 exactly as the GPU kernels do (squared
//     differences accumulated in dimension order, then a correctly rounded sqrt); weights are the
//     float64 sum of the k float32 distances taken in ascending order, so that every code path
//     (BruteForce, SolvingSet, Weights, KNNWeights, Model) yields bit-identical weights.
//   - A neighbour heap holding fewer than k distances has upper bound +Inf.
//   - Ties at w*: every point with weight >= w* is an outlier.
//
// Data are column-major: cols[j][i] is row i in dimension j.
package solvingset

import (
	"errors"
	"fmt"
	"math"
	"runtime"
)

// Params are the parameters of BruteForce and SolvingSet, in the papers' names.
type Params struct {
	// K is the number of nearest neighbours summed into a weight (papers' default 50);
	// 1 <= K <= rows-1.
	K int
	// N is the number of top outliers wanted (papers' default 10); 1 <= N <= rows. Ties at the
	// n-th weight may return more.
	N int
	// M is the number of candidates per SolvingSet iteration (papers' default 100). Larger M means
	// fewer iterations but a solving set with more inliers in it; BruteForce ignores it.
	M int
	// Seed seeds the random draw of the first M candidates.
	Seed uint64
	// Workers is the number of goroutines; 0 means runtime.GOMAXPROCS(0).
	Workers int
}

// Validate reports every problem of p for a data set of rows points at once.
func (p Params) Validate(rows int) error {
	var errs []error
	if rows < 2 {
		errs = append(errs, fmt.Errorf("need at least 2 rows, got %d", rows))
	}
	switch {
	case p.K <= 0:
		errs = append(errs, fmt.Errorf("k must be >= 1, got %d", p.K))
	case p.K >= rows:
		errs = append(errs, fmt.Errorf("k must be < rows (a point is not its own neighbour): k=%d, rows=%d", p.K, rows))
	}
	switch {
	case p.N <= 0:
		errs = append(errs, fmt.Errorf("n must be >= 1, got %d", p.N))
	case p.N > rows:
		errs = append(errs, fmt.Errorf("n must be <= rows: n=%d, rows=%d", p.N, rows))
	}
	if p.M <= 0 {
		errs = append(errs, fmt.Errorf("m must be >= 1, got %d", p.M))
	}
	if p.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers must be >= 0 (0 = all cores), got %d", p.Workers))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("solvingset: invalid parameters: %w", errors.Join(errs...))
}

// Outlier is one top-n outlier: its row in the input and its exact weight w_k(row, D).
type Outlier struct {
	Row    int
	Weight float64
}

// Result is the outcome of BruteForce or SolvingSet.
type Result struct {
	// Outliers holds every row with weight >= WStar, sorted by weight descending, ties by row
	// ascending; at least N rows, more when weights tie at WStar.
	Outliers []Outlier
	// WStar is w*, the weight of the n-th outlier.
	WStar float64
	// SolvingSet holds the rows of the solving set S in the order they became candidates.
	// BruteForce returns all rows (D is always a solving set).
	SolvingSet []int
	// Iterations is the number of SolvingSet iterations (1 for BruteForce).
	Iterations int
	// DistanceComputations counts the pairs of rows whose distance was evaluated, each pair
	// once, so at most N(N-1)/2 (BruteForce's count, every pair): SolvingSet's step b
	// evaluates a pair of candidates from both sides (no heap shared between workers), an
	// m(m-1)/2 more per iteration that is not counted. (DistributedSolvingSet counts step b
	// only, on every node.)
	DistanceComputations int64
}

// workerCount resolves the Workers knob.
func workerCount(w int) int {
	if w <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return w
}

// maxSpan bounds sum_j (max_j - min_j)^2 so that no squared distance can overflow float32:
// every pairwise squared distance is at most that sum, and the float32 accumulation of d terms
// rounds up by at most a factor (1+2^-24)^d, far below the factor 4 of head-room kept here.
// Coordinates of magnitude up to about 1e18 pass in any dimension count that is not absurd.
const maxSpan = math.MaxFloat32 / 4

// validateCols checks the shape and values of a column-major data set.
func validateCols(cols [][]float32) (rows int, err error) {
	if len(cols) == 0 {
		return 0, errors.New("solvingset: data has no columns")
	}
	rows = len(cols[0])
	var span float64
	for j, c := range cols {
		if len(c) != rows {
			return 0, fmt.Errorf("solvingset: column %d has %d rows, column 0 has %d", j, len(c), rows)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, v := range c {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return 0, fmt.Errorf("solvingset: row %d, column %d: value %v is not finite", i, j, v)
			}
			lo, hi = min(lo, f), max(hi, f)
		}
		if rows > 0 {
			span += float64((hi - lo) * (hi - lo))
		}
	}
	if span > maxSpan {
		return 0, fmt.Errorf("solvingset: data span too large: squared distances up to %.3g would overflow float32 (limit %.3g); rescale the data", span, maxSpan)
	}
	return rows, nil
}
