package microcluster

import (
	"fmt"
	"math/rand/v2"
)

// Cluster builds q micro-clusters from column-major means (and optional sds; nil = certain
// data) as in the paper: q initial centroids are distinct rows drawn at random (seeded), then
// `iterations` passes of nearest-centroid assignment (Euclidean on the means) and recomputation,
// with no convergence test. It returns the tuples of the last recomputation and the assignment
// they summarise (the assignment of the last pass, so the tuples are exactly the sums of the
// members listed there).
//
// Empty clusters: a cluster that wins no rows in a pass keeps its previous centre (stored in
// Anchor, so it can win rows back in the next pass) and n = 0; the density model skips it
// because it carries no mass. Re-seeding it elsewhere would make the pass order matter and is not
// in the paper.
//
// The result is deterministic for a seed whatever workers is (<= 0 means GOMAXPROCS).
//
// Passes after the first compute only the row-centre distances that Elkan bounds cannot rule out
// (see bounds.go; the bounds take n*q bytes, up to maxBoundBytes): the skips are exact for the
// float32 distance, so the result is bit for bit that of assigning every row with Assign in every
// pass (and of gpukern.Cluster).
func Cluster(means, sds [][]float32, q, iterations int, seed uint64, workers int) (*MicroClusters, []int32, error) {
	return cluster(means, sds, q, iterations, seed, workers, true, nil)
}

// clusterPlain is Cluster assigning every row with Assign in every pass: the reference for the
// bounded passes, kept for the tests and BenchmarkCluster.
func clusterPlain(means, sds [][]float32, q, iterations int, seed uint64, workers int) (*MicroClusters, []int32, error) {
	return cluster(means, sds, q, iterations, seed, workers, false, nil)
}

// cluster is Cluster, with bounded passes or not. When computed is non-nil it receives, per pass
// after the first, the number of exact row-centre distances the bounded pass computed.
func cluster(means, sds [][]float32, q, iterations int, seed uint64, workers int, bounded bool,
	computed *[]int) (*MicroClusters, []int32, error) {
	cent, err := InitialCentroids(means, sds, q, iterations, seed)
	if err != nil {
		return nil, nil, err
	}
	n, r := len(means[0]), len(means)
	assign := make([]int32, n)
	var bs *elkanState
	if bounded && n*((q+7)/8*8) <= maxBoundBytes && r <= maxBoundDims {
		bs = newElkanState(means, cent, n, q)
	}
	var mc *MicroClusters
	var prevCent [][]float32 // the centres of the previous pass
	for it := range iterations {
		switch {
		case bs == nil:
			if err := Assign(means, cent, assign, workers); err != nil {
				return nil, nil, fmt.Errorf("microcluster: pass %d: %w", it, err)
			}
		case it == 0:
			bs.assignFirst(means, cent, assign, workers)
		default:
			k := bs.assignNext(means, prevCent, cent, assign, workers)
			if computed != nil {
				*computed = append(*computed, k)
			}
		}
		mc, err = Reduce(means, sds, assign, q, workers)
		if err != nil {
			return nil, nil, fmt.Errorf("microcluster: pass %d: %w", it, err)
		}
		for j := range r {
			for c := range q {
				if mc.N[c] == 0 {
					mc.Anchor[j][c] = float64(cent[j][c])
				}
			}
		}
		prevCent = cent
		cent = mc.Centroids()
	}
	return mc, assign, nil
}

// MaxIterations bounds Cluster's passes (and detect.density.iterations, density --iterations):
// an overflow-sized count made every clustering, so every model build, run for ever.
const MaxIterations = 1000

// InitialCentroids checks Cluster's input (shapes, finite means, 1 <= q <= rows, 1 <= iterations
// <= MaxIterations)
// and returns the centres Cluster starts from: q distinct rows of means drawn from seed,
// column-major [dim][cluster]. A device that runs the passes itself (gpukern.Cluster) starts from
// them to give Cluster's result, and refuses what Cluster refuses.
func InitialCentroids(means, sds [][]float32, q, iterations int, seed uint64) ([][]float32, error) {
	n, err := checkData(means, sds)
	if err != nil {
		return nil, err
	}
	if q <= 0 || iterations <= 0 || iterations > MaxIterations {
		return nil, fmt.Errorf("microcluster: need q >= 1 and iterations in [1, %d], got q=%d iterations=%d", MaxIterations, q, iterations)
	}
	if q > n {
		return nil, fmt.Errorf("microcluster: q=%d initial centroids need at least %d distinct rows, have %d", q, q, n)
	}
	cent := make([][]float32, len(means))
	for j := range cent {
		cent[j] = make([]float32, q)
	}
	for c, i := range sampleDistinct(n, q, seed) {
		for j := range cent {
			cent[j][c] = means[j][i]
		}
	}
	return cent, nil
}

// sampleDistinct draws q distinct row indices from [0, n) (Floyd's algorithm: O(q) time and
// memory however large n is), in draw order, from a PCG stream seeded by seed.
func sampleDistinct(n, q int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x6d6963726f636c75)) // second word: "microclu"
	chosen := make(map[int]struct{}, q)
	out := make([]int, 0, q)
	for k := n - q; k < n; k++ {
		t := rng.IntN(k + 1)
		if _, dup := chosen[t]; dup {
			t = k
		}
		chosen[t] = struct{}{}
		out = append(out, t)
	}
	return out
}

// AssignNearest writes to out the nearest current centre for each row of a new batch (ties to the
// lowest index), the streaming step before Add. Empty clusters compete at their anchors.
func (m *MicroClusters) AssignNearest(means [][]float32, out []int32, workers int) error {
	if len(means) != m.Dims() {
		return fmt.Errorf("%w: batch has %d dimensions, clusters have %d", errShape, len(means), m.Dims())
	}
	return Assign(means, m.Centroids(), out, workers)
}

// Add adds a batch's contribution (rows with assignment in [0, q); -1 rows are skipped) to the
// tuples. sds may be nil (certain data). The batch is first reduced on its own (deterministically,
// see Reduce) and then added once per tuple entry, so a later Remove of the same batch subtracts
// exactly the value that was added.
func (m *MicroClusters) Add(means, sds [][]float32, assign []int32) error {
	b, err := m.batch(means, sds, assign)
	if err != nil {
		return fmt.Errorf("microcluster: add: %w", err)
	}
	for j := range m.CF1 {
		for c := range m.N {
			m.CF1[j][c] += b.CF1[j][c]
			m.CF2[j][c] += b.CF2[j][c]
			m.EF2[j][c] += b.EF2[j][c]
		}
	}
	for c, v := range b.N {
		m.N[c] += v
	}
	return nil
}

// Remove subtracts an evicted batch's contribution (the same rows, uncertainties and assignment
// that were added). A cluster whose count reaches 0 has its sums reset to exactly 0 (dropping
// rounding residue) and keeps its last centre as its anchor. Removing more members than a
// cluster has is an error and leaves the tuples unchanged.
func (m *MicroClusters) Remove(means, sds [][]float32, assign []int32) error {
	b, err := m.batch(means, sds, assign)
	if err != nil {
		return fmt.Errorf("microcluster: remove: %w", err)
	}
	for c, v := range b.N {
		if v > m.N[c] {
			return fmt.Errorf("microcluster: remove: cluster %d has %d members, batch removes %d", c, m.N[c], v)
		}
	}
	if m.Anchor == nil {
		m.Anchor = make([][]float64, m.Dims())
		for j := range m.Anchor {
			m.Anchor[j] = make([]float64, m.Q())
		}
	}
	for c, v := range b.N {
		if v > 0 && v == m.N[c] {
			for j := range m.CF1 {
				m.Anchor[j][c] = m.Centroid(j, c)
			}
		}
	}
	for c, v := range b.N {
		m.N[c] -= v
		for j := range m.CF1 {
			if m.N[c] == 0 {
				m.CF1[j][c], m.CF2[j][c], m.EF2[j][c] = 0, 0, 0
				continue
			}
			m.CF1[j][c] -= b.CF1[j][c]
			m.CF2[j][c] -= b.CF2[j][c]
			m.EF2[j][c] -= b.EF2[j][c]
		}
	}
	return nil
}

// batch reduces a streaming batch after checking it against the tuples' shape.
func (m *MicroClusters) batch(means, sds [][]float32, assign []int32) (*MicroClusters, error) {
	if len(means) != m.Dims() {
		return nil, fmt.Errorf("%w: batch has %d dimensions, clusters have %d", errShape, len(means), m.Dims())
	}
	if _, err := checkData(means, sds); err != nil {
		return nil, err
	}
	return Reduce(means, sds, assign, m.Q(), 0)
}
