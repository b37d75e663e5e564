// Package density finds outliers in uncertain data by density sampling over micro-clusters
// (Matsumoto, Hung, Yiu, algorithms 1, 3, 4; ALGORITHMS.md §2).
//
// The per-dimension density of the data, compressed into q micro-clusters, is
//
//	f_j(u) = (1/N) sum_c n_c phi(u; mu_cj, h_j^2 + Delta_cj)
//
// with phi the normal pdf, h_j = 1.06 sigma_j N^(-1/5) (Silverman) and Delta_cj the cluster's
// uncertainty. An object (a micro-cluster, or a record with mean x and uncertainty psi) has in a
// subspace A the eta-probability P((1/|A|) sum_{j in A} f_j(X_j) > eta), X_j ~ N(x_j, psi_j^2),
// estimated from s samples; it is a (delta, eta)-outlier if that is below delta in any tested
// subspace. The four modes choose the subspaces (see Mode).
//
// Where a choice was needed:
//   - flagged objects leave the testing, not the density: every object is tested against the same
//     model, so a verdict depends only on the object, the model, the parameters and the seed
//     (never on the other objects or the processing order), which a stream of records requires;
//   - Params.Exact replaces sampling in 1-D subspaces by the exact probability (see exact.go);
//     subspaces of two or more dimensions are always sampled.
package density

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/outlierd/outlierd/internal/algo/microcluster"
)

// minVariance floors a kernel variance h^2 + Delta. It is reached only by a dimension in which all
// data agree and carry no uncertainty (sigma = 0, Delta = 0), where the density is a point mass;
// the floor (sd 1e-6 on the [0,1] scale) turns it into a very tall, narrow peak, so objects on the
// point are dense and the rest are not, as the point mass would say.
const minVariance = 1e-12

// silvermanFactor is the 1.06 of Silverman's rule of thumb h = 1.06 sigma N^(-1/5).
const silvermanFactor = 1.06

// Silverman returns the bandwidth 1.06 * sigma * n^(-1/5).
func Silverman(sigma float64, n int64) float64 {
	return silvermanFactor * sigma * math.Pow(float64(n), -0.2)
}

// Bandwidths returns the Silverman bandwidth of every dimension, sigma_j being the population
// standard deviation of the member means, computed from the summed tuples:
// sigma^2 = sum CF2 / N - (sum CF1 / N)^2 (clamped at 0 like Delta, for the same rounding reason).
func Bandwidths(mc *microcluster.MicroClusters) ([]float64, error) {
	if mc == nil || mc.Dims() == 0 {
		return nil, errors.New("density: no micro-clusters")
	}
	n := mc.Total()
	if n <= 0 {
		return nil, errors.New("density: the micro-clusters summarise no objects")
	}
	h := make([]float64, mc.Dims())
	for j := range h {
		var s1, s2 float64
		for c := range mc.N {
			s1 += mc.CF1[j][c]
			s2 += mc.CF2[j][c]
		}
		mu := s1 / float64(n)
		v := s2/float64(n) - float64(mu*mu)
		if v < 0 {
			v = 0
		}
		h[j] = Silverman(math.Sqrt(v), n)
	}
	return h, nil
}

// Model is the cluster density of every dimension, built once from micro-clusters and read
// concurrently by the detectors. Only clusters with members take part.
type Model struct {
	// H is the bandwidth of each dimension.
	H []float64
	// N is the number of objects summarised.
	N int64
	// dims is r; k the number of non-empty clusters.
	dims, k int
	// Per dimension j, per non-empty cluster: mean, kernel variance h^2 + Delta, the factor
	// (n_c / N) / sqrt(2 pi var) and 1 / (2 var), so f_j(u) = sum coef * exp(-(u-mu)^2 * inv2).
	mu, variance, coef, inv2 [][]float64
	// The tested objects of cluster granularity, for all q clusters: centroid, sqrt(Delta), n.
	clusterMean, clusterSD [][]float64
	clusterN               []int64

	mu2     sync.Mutex
	regions map[float64][]region // exact-method regions per eta

	boundsOnce sync.Once
	bounds     *Bounds // the sampled path's density bounds (bounds.go), built on first use
	noBounds   bool    // the plain loop instead (benchmarks of the paper's algorithm)
}

// NewModel builds the density model from micro-clusters and per-dimension bandwidths h (for
// example Bandwidths(mc)).
func NewModel(mc *microcluster.MicroClusters, h []float64) (*Model, error) {
	if mc == nil || mc.Dims() == 0 || mc.Q() == 0 {
		return nil, errors.New("density: no micro-clusters")
	}
	r := mc.Dims()
	if len(h) != r {
		return nil, fmt.Errorf("%w: %d bandwidths for %d dimensions", ErrShape, len(h), r)
	}
	for j, v := range h {
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("density: bandwidth of dimension %d is %v, want finite >= 0", j, v)
		}
	}
	n := mc.Total()
	if n <= 0 {
		return nil, errors.New("density: the micro-clusters summarise no objects")
	}
	m := &Model{H: append([]float64(nil), h...), N: n, dims: r, regions: map[float64][]region{}}
	alloc := func() [][]float64 {
		a := make([][]float64, r)
		for j := range a {
			a[j] = make([]float64, 0, mc.Q())
		}
		return a
	}
	m.mu, m.variance, m.coef, m.inv2 = alloc(), alloc(), alloc(), alloc()
	m.clusterMean, m.clusterSD = make([][]float64, r), make([][]float64, r)
	m.clusterN = append([]int64(nil), mc.N...)
	for j := range r {
		m.clusterMean[j] = make([]float64, mc.Q())
		m.clusterSD[j] = make([]float64, mc.Q())
		for c := range mc.N {
			m.clusterMean[j][c] = mc.Centroid(j, c)
			delta := mc.Delta(j, c)
			m.clusterSD[j][c] = math.Sqrt(delta)
			if mc.N[c] == 0 {
				continue
			}
			v := max(float64(h[j]*h[j])+delta, minVariance)
			w := float64(mc.N[c]) / float64(n)
			m.mu[j] = append(m.mu[j], mc.Centroid(j, c))
			m.variance[j] = append(m.variance[j], v)
			m.coef[j] = append(m.coef[j], w/math.Sqrt(2*math.Pi*v))
			m.inv2[j] = append(m.inv2[j], 1/(2*v))
		}
	}
	m.k = len(m.mu[0])
	return m, nil
}

// Dims is the number of dimensions r.
func (m *Model) Dims() int { return m.dims }

// Density is f_j(u), the cluster density of dimension j at u.
func (m *Model) Density(j int, u float64) float64 {
	mu, coef, inv2 := m.mu[j], m.coef[j], m.inv2[j]
	coef = coef[:len(mu)]
	inv2 = inv2[:len(mu)]
	var f float64
	for c, x := range mu {
		d := u - x
		e := d * d * inv2[c]
		if e < 745 { // exp(-745) is below the smallest float64: skip the call
			f += float64(coef[c] * math.Exp(-e))
		}
	}
	return f
}
