package proclus

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Planted is a data set with known projected clusters, for tests, benchmarks and the recovery
// check: the paper's generator (section 5: values in [0, 100], Gaussian clusters in subspaces).
type Planted struct {
	// Cols is column-major (Cols[j][i]).
	Cols [][]float32
	// Label[i] is row i's planted cluster, -1 for a uniform outlier.
	Label []int32
	// Dims[c] is planted cluster c's subspace (ascending).
	Dims [][]int
}

// GeneratePlanted draws rows x dims values: each row belongs to one of k clusters (uniformly, rows
// interleaved) or, with probability outlierFrac, is an outlier uniform in [0, 100]^dims. Cluster c
// has its own random subspace of l dimensions and a centre uniform in [10, 90] there; its rows are
// Gaussian with standard deviation sd in the subspace and uniform in [0, 100] elsewhere, so the
// cluster exists only in its subspace. Deterministic for a seed.
func GeneratePlanted(rows, dims, k, l int, sd, outlierFrac float64, seed uint64) (*Planted, error) {
	if rows < 1 || dims < 1 || k < 1 || l < 1 || l > dims || sd < 0 || outlierFrac < 0 || outlierFrac >= 1 {
		return nil, fmt.Errorf("proclus.GeneratePlanted: need rows, dims, k >= 1, 1 <= l <= dims, sd >= 0, 0 <= outlierFrac < 1; got rows=%d dims=%d k=%d l=%d sd=%v outlierFrac=%v", rows, dims, k, l, sd, outlierFrac)
	}
	rng := rand.New(rand.NewPCG(seed, 0x706c616e746564)) // "planted"
	pl := &Planted{Cols: make([][]float32, dims), Label: make([]int32, rows), Dims: make([][]int, k)}
	centre := make([][]float64, k)
	for c := range k {
		pl.Dims[c] = slices.Sorted(slices.Values(rng.Perm(dims)[:l]))
		centre[c] = make([]float64, dims)
		for _, j := range pl.Dims[c] {
			centre[c][j] = 10 + float64(80*rng.Float64())
		}
	}
	for j := range pl.Cols {
		pl.Cols[j] = make([]float32, rows)
	}
	for i := range rows {
		c := int32(-1)
		if rng.Float64() >= outlierFrac {
			c = int32(rng.IntN(k))
		}
		pl.Label[i] = c
		for j := range dims {
			pl.Cols[j][i] = float32(100 * rng.Float64())
		}
		if c >= 0 {
			for _, j := range pl.Dims[c] {
				pl.Cols[j][i] = float32(centre[c][j] + float64(sd*rng.NormFloat64()))
			}
		}
	}
	return pl, nil
}
