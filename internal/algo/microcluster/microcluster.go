// Package microcluster compresses uncertain data into micro-clusters (Matsumoto, Hung, Yiu,
// §3.2.2 and §4.3; ALGORITHMS.md §2): each cluster is the tuple (CF1, CF2, EF2, n), per
// dimension the sum of member means, the sum of squared member means and the sum of squared
// member uncertainties, plus the member count.
//
// Layout: data are column-major float32 (means[j][i] is row i in dimension j, one contiguous
// slice per dimension, the layout of an Arrow Float32 column); the tuples are column-major
// float64 ([dim][cluster]). Distances are float32 as on the GPU; sums are float64.
//
// Determinism: Assign is an exact arg-min and needs no ordering. Reduce splits the rows into
// chunks whose boundaries depend only on the row count (never on the worker count), sums each
// chunk in row order and adds the chunk sums in chunk order, so every result is bit-identical for
// any number of workers.
//
// The primitives Assign and Reduce have twins of the same names in package gpukern.
package microcluster

import (
	"errors"
	"fmt"
	"math"
)

// MicroClusters holds q micro-cluster tuples over r dimensions, column-major ([dim][cluster]).
type MicroClusters struct {
	// CF1[j][c] is the sum of the member means of cluster c in dimension j.
	CF1 [][]float64
	// CF2[j][c] is the sum of the squared member means.
	CF2 [][]float64
	// EF2[j][c] is the sum of the squared member uncertainties (0 for certain data).
	EF2 [][]float64
	// N[c] is the member count of cluster c.
	N []int64
	// Anchor[j][c] is the centre of cluster c used while it has no members: Centroid returns it
	// when N[c] == 0. Cluster sets it to the previous centroid of a cluster that empties (so an
	// empty cluster keeps its place and can win members back); Remove sets it to the centroid the
	// cluster had before its last members left. It may be nil when no cluster is empty.
	Anchor [][]float64
}

// New returns q empty micro-clusters over dims dimensions.
func New(dims, q int) (*MicroClusters, error) {
	if dims <= 0 || q <= 0 {
		return nil, fmt.Errorf("microcluster: need dims > 0 and q > 0, got dims=%d q=%d", dims, q)
	}
	m := &MicroClusters{
		CF1:    make([][]float64, dims),
		CF2:    make([][]float64, dims),
		EF2:    make([][]float64, dims),
		N:      make([]int64, q),
		Anchor: make([][]float64, dims),
	}
	for j := range dims {
		m.CF1[j] = make([]float64, q)
		m.CF2[j] = make([]float64, q)
		m.EF2[j] = make([]float64, q)
		m.Anchor[j] = make([]float64, q)
	}
	return m, nil
}

// Dims is the number of dimensions r.
func (m *MicroClusters) Dims() int { return len(m.CF1) }

// Q is the number of clusters (empty ones included).
func (m *MicroClusters) Q() int { return len(m.N) }

// Total is the number of objects summarised, the sum of N.
func (m *MicroClusters) Total() int64 {
	var t int64
	for _, n := range m.N {
		t += n
	}
	return t
}

// Centroid is the centre of cluster c in dimension j: CF1/n, or the anchor of an empty cluster.
func (m *MicroClusters) Centroid(j, c int) float64 {
	if m.N[c] > 0 {
		return m.CF1[j][c] / float64(m.N[c])
	}
	if m.Anchor != nil {
		return m.Anchor[j][c]
	}
	return 0
}

// Delta is the uncertainty (a variance) of cluster c in dimension j, ALGORITHMS.md eq. 4:
// CF2/n - (CF1/n)^2 + EF2/n, the spread of the member means plus the mean member variance.
// The first two terms cancel catastrophically when the members agree (a cluster of identical
// means gives a true spread of 0 and a rounded one of about ±1e-16 * mean^2), so a negative
// result, which no variance can have, is rounding and is clamped to 0. Empty clusters have 0.
func (m *MicroClusters) Delta(j, c int) float64 {
	n := float64(m.N[c])
	if n == 0 {
		return 0
	}
	mu := m.CF1[j][c] / n
	d := m.CF2[j][c]/n - float64(mu*mu) + m.EF2[j][c]/n
	if d < 0 {
		return 0
	}
	return d
}

// Centroids returns the centres column-major as float32 ([dim][cluster]), the form Assign takes.
func (m *MicroClusters) Centroids() [][]float32 {
	out := make([][]float32, m.Dims())
	for j := range out {
		out[j] = make([]float32, m.Q())
		for c := range out[j] {
			out[j][c] = float32(m.Centroid(j, c))
		}
	}
	return out
}

// Clone returns a deep copy.
func (m *MicroClusters) Clone() *MicroClusters {
	cp := func(a [][]float64) [][]float64 {
		if a == nil {
			return nil
		}
		o := make([][]float64, len(a))
		for j := range a {
			o[j] = append([]float64(nil), a[j]...)
		}
		return o
	}
	return &MicroClusters{CF1: cp(m.CF1), CF2: cp(m.CF2), EF2: cp(m.EF2),
		N: append([]int64(nil), m.N...), Anchor: cp(m.Anchor)}
}

// errShape reports inconsistent column shapes.
var errShape = errors.New("microcluster: inconsistent shapes")

// CheckColumns validates the shapes of column-major means and optional sds (at least one
// dimension, every column of one length, nil sds or one column per dimension) and returns the
// row count. Its errors wrap shape, the caller's sentinel, so that each algorithm over this
// layout (density, hypercube and proclus too) checks it here and keeps its own error identity.
func CheckColumns(means, sds [][]float32, shape error) (int, error) {
	if len(means) == 0 {
		return 0, fmt.Errorf("%w: no dimensions", shape)
	}
	n := len(means[0])
	for j, col := range means {
		if len(col) != n {
			return 0, fmt.Errorf("%w: dimension %d has %d rows, dimension 0 has %d", shape, j, len(col), n)
		}
	}
	if sds != nil {
		if len(sds) != len(means) {
			return 0, fmt.Errorf("%w: %d uncertainty columns for %d dimensions", shape, len(sds), len(means))
		}
		for j, col := range sds {
			if len(col) != n {
				return 0, fmt.Errorf("%w: uncertainty column %d has %d rows, want %d", shape, j, len(col), n)
			}
		}
	}
	return n, nil
}

// checkData is CheckColumns plus a scan for non-finite means (they would poison every sum).
func checkData(means, sds [][]float32) (int, error) {
	n, err := CheckColumns(means, sds, errShape)
	if err != nil {
		return 0, err
	}
	for j, col := range means {
		for i, v := range col {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("microcluster: row %d dimension %d is %v", i, j, v)
			}
		}
	}
	return n, nil
}
