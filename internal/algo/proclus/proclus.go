// Package proclus is projected clustering by PROCLUS (Aggarwal et al. 1999) in the form of
// GPU-FAST-PROCLUS (Jørgensen et al. 2022; ALGORITHMS.md §4): k medoids, each with its own
// subspace of about l dimensions, and the points that lie outside every medoid's sphere as
// outliers. Its per-cluster subspaces are what the density test uses to test a record in the
// dimensions where its cluster is tight (Result.Assign gives a new record's cluster and subspace).
//
// The algorithm (Run): a seeded random sample of A*k rows, B*k candidate medoids picked from it
// farthest-first; an iterative phase over sets of k current medoids (localities, per-dimension
// average distances X, Z-scores, the k*l lowest Z with at least 2 per medoid, Manhattan segmental
// assignment, cost, bad medoids replaced) that stops after ItrPat rounds without a better cost;
// a refinement phase (dimensions from the best clusters, reassignment, outliers).
//
// The O(n) passes run behind the Engine interface: this package's CPU engine and the CUDA engine
// in gpukern produce identical integers, so the host control flow (shared, in RunEngine) makes
// the same choices on both: same medoids, dimensions, assignment and cost for the same seed.
// Exactness comes from fixed-point sums: every per-point term (|x_pj - m_ij|, x_pj) is rounded
// once to an int64 on a per-dimension power-of-two grid (Scales), and int64 addition is
// associative, so neither the parallel order nor the FAST incremental updates (theorem 3.2:
// H += λ·ΣΔL) change a bit. Distances are float32 with a fixed operation order and no FMA
// (euclid.Squared), as in the kernels.
//
// Restarts: PROCLUS is a randomised local search that often ends in a local optimum (two medoids
// in one planted cluster, another cluster missed) at a visibly higher cost; Run makes
// Params.Restarts runs, each from its own seed (RestartSeed), and keeps the one of lowest
// FullCost (equation 2 with every row clustered: Cost leaves the outliers out, which favours a
// run that misses a cluster and sets its rows aside).
//
// Determinism: one PCG stream seeded by a run's seed drives every random choice of that run;
// every tie (the farthest candidate, the lowest Z, the nearest medoid, the smallest cluster, the
// lowest cost among restarts) goes to the lowest index.
package proclus

import (
	"errors"
	"fmt"
	"math"
)

// Params are PROCLUS's parameters in the paper's names. Default gives the paper's defaults.
type Params struct {
	// K is the number of clusters (medoids); 1 <= K <= rows. Default 10.
	K int
	// L is the average number of dimensions per cluster: K*L dimensions are chosen in all, at
	// least 2 per cluster (1 when the data has one dimension); 1 <= L <= dims. Default 5.
	L int
	// A sets the random sample the candidates come from: A*K rows (all rows when fewer). A larger
	// sample finds small clusters more surely; the greedy pick costs O(A*K*B*K*dims). Default 100.
	A int
	// B sets the candidate medoids: B*K picked farthest-first from the sample; 1 <= B <= A. More
	// candidates give the replacement step more choice and cost more distance rows (the GPU caches
	// one row of rows floats per candidate used). Default 10.
	B int
	// MinDev marks a medoid bad when its cluster has fewer than rows/K*MinDev points; >= 0.
	// Default 0.7.
	MinDev float64
	// ItrPat is the patience: the iterative phase stops after ItrPat rounds without a lower cost;
	// >= 1. Default 5.
	ItrPat int
	// Seed seeds the PCG stream of the sample, the first medoid and the replacements; restart r
	// uses RestartSeed(Seed, r) (restart 0 uses Seed itself).
	Seed uint64
	// Restarts is the number of runs, each from its own seed (RestartSeed), of which the one of
	// lowest FullCost is returned (ties to the lowest restart); 1..MaxRestarts. Default
	// DefaultRestarts.
	Restarts int
}

// Default returns the paper's defaults (k = 10, l = 5, A = 100, B = 10, minDev = 0.7, itrPat =
// 5) with seed 1 and DefaultRestarts restarts.
func Default() Params {
	return Params{K: 10, L: 5, A: 100, B: 10, MinDev: 0.7, ItrPat: 5, Seed: 1, Restarts: DefaultRestarts}
}

// Validate checks the parameters against a data set of rows x dims and returns every problem,
// each naming the parameter and its valid range.
func (p Params) Validate(rows, dims int) error {
	var errs []error
	if dims < 1 {
		errs = append(errs, fmt.Errorf("the data has no dimensions"))
	}
	if rows < 1 {
		errs = append(errs, fmt.Errorf("the data has no rows"))
	}
	if rows > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("at most %d rows, got %d", math.MaxInt32, rows))
	}
	if p.K < 1 || p.K > rows {
		errs = append(errs, fmt.Errorf("k must be in [1, %d] (the row count), got %d", max(rows, 1), p.K))
	}
	if p.L < 1 || p.L > dims {
		errs = append(errs, fmt.Errorf("l must be in [1, %d] (the dimension count), got %d", max(dims, 1), p.L))
	}
	if p.B < 1 || p.B > p.A {
		errs = append(errs, fmt.Errorf("b must be in [1, a=%d], got %d", p.A, p.B))
	}
	if p.A < 1 {
		errs = append(errs, fmt.Errorf("a must be >= 1, got %d", p.A))
	}
	if p.A > 0 && p.K > 0 && p.A > math.MaxInt32/p.K {
		errs = append(errs, fmt.Errorf("a*k must be at most %d, got a=%d k=%d", math.MaxInt32, p.A, p.K))
	}
	if math.IsNaN(p.MinDev) || math.IsInf(p.MinDev, 0) || p.MinDev < 0 {
		errs = append(errs, fmt.Errorf("min-dev must be finite and >= 0, got %v", p.MinDev))
	}
	if p.ItrPat < 1 {
		errs = append(errs, fmt.Errorf("itr-pat must be >= 1, got %d", p.ItrPat))
	}
	if p.Restarts < 1 || p.Restarts > MaxRestarts {
		errs = append(errs, fmt.Errorf("restarts must be in [1, %d], got %d", MaxRestarts, p.Restarts))
	}
	return errors.Join(errs...)
}

// Result is a PROCLUS clustering. It is also a model: Assign places new records with the same
// rule that made Assignment (nearest medoid in its subspace, outside every sphere = outlier).
type Result struct {
	// Medoids are the rows of the k medoids; cluster i is Medoids[i].
	Medoids []int
	// Dims[i] are the dimensions of cluster i's subspace (0-based, ascending).
	Dims [][]int
	// Centers[i] are medoid i's coordinates (all dimensions), for Assign.
	Centers [][]float32
	// Radius[i] is Δ_i, medoid i's sphere: the Manhattan segmental distance in Dims[i] to the
	// nearest other medoid (+Inf when k = 1: no outliers).
	Radius []float64
	// Assignment[r] is row r's cluster, -1 for an outlier.
	Assignment []int32
	// Sizes[i] is the number of rows in cluster i (outliers excluded).
	Sizes []int
	// Outliers is the number of rows with cluster -1.
	Outliers int
	// Cost is equation (2) of the paper for the returned clusters: the mean over the clustered
	// rows of the Manhattan segmental distance to their cluster's centroid in its subspace.
	Cost float64
	// FullCost is equation 2 for the returned medoids and subspaces with every row in its
	// nearest cluster (no outliers set aside): the restarts' criterion (see Params.Restarts).
	FullCost float64
	// BestCost is the lowest cost of the iterative phase (before refinement, all rows clustered).
	BestCost float64
	// Iterations is the number of rounds of the iterative phase.
	Iterations int
	// Restart is the restart this result comes from (0-based) and Seed its seed
	// (RestartSeed(Params.Seed, Restart)); RestartCosts[r] is restart r's FullCost, for all
	// Params.Restarts restarts.
	Restart      int
	Seed         uint64
	RestartCosts []float64
}

// Segmental is the Manhattan segmental distance between x and c in dims: Σ_{j∈dims}|x_j - c_j| /
// |dims|, summed in float64 in the order of dims (the kernels' order).
func Segmental(x, c []float32, dims []int) float64 {
	s := 0.0
	for _, j := range dims {
		s += math.Abs(float64(x[j]) - float64(c[j]))
	}
	return s / float64(len(dims))
}

// Nearest returns the cluster whose medoid is nearest to record x (one value per dimension) in
// Manhattan segmental distance within the cluster's own subspace (ties to the lowest cluster), and
// whether x lies outside every medoid's sphere (a PROCLUS outlier). A caller that tests every
// record in some subspace (the density test) uses the nearest cluster's Dims even for an outlier.
func (r *Result) Nearest(x []float32) (cluster int, outlier bool) {
	best, bestD, inside := 0, math.Inf(1), false
	for i, c := range r.Centers {
		s := Segmental(x, c, r.Dims[i])
		if s < bestD {
			best, bestD = i, s
		}
		if s <= r.Radius[i] {
			inside = true
		}
	}
	return best, !inside
}

// AssignRecord returns the cluster of record x as the run assigned its rows: Nearest's cluster, or
// -1 when x is an outlier.
func (r *Result) AssignRecord(x []float32) int {
	c, out := r.Nearest(x)
	if out {
		return -1
	}
	return c
}

// SubspaceNames returns cluster c's dimensions as feature names (features in column order), nil
// for c out of range: the words of a flag's explanation.
func (r *Result) SubspaceNames(c int, features []string) []string {
	dims := r.Subspace(c)
	if dims == nil {
		return nil
	}
	out := make([]string, len(dims))
	for t, j := range dims {
		out[t] = features[j]
	}
	return out
}

// Assign writes to dst[i] the cluster of row i of the column-major records cols (cols[j][i]; the
// clustering's dimensions), -1 for an outlier: AssignRecord for every row.
func (r *Result) Assign(cols [][]float32, dst []int32) error {
	if len(r.Centers) == 0 {
		return fmt.Errorf("proclus.Assign: empty model")
	}
	d := len(r.Centers[0])
	if len(cols) != d {
		return fmt.Errorf("proclus.Assign: %d dimensions, the model has %d", len(cols), d)
	}
	for j, c := range cols {
		if len(c) != len(dst) {
			return fmt.Errorf("proclus.Assign: dimension %d has %d rows, len(dst) = %d", j, len(c), len(dst))
		}
	}
	x := make([]float32, d)
	for i := range dst {
		for j := range x {
			x[j] = cols[j][i]
		}
		dst[i] = int32(r.AssignRecord(x))
	}
	return nil
}

// Subspace returns cluster c's dimensions, nil for the outlier cluster -1 (or any c out of range).
func (r *Result) Subspace(c int) []int {
	if c < 0 || c >= len(r.Dims) {
		return nil
	}
	return r.Dims[c]
}
