package gpukern

import (
	"errors"
	"fmt"
	"math"

	"github.com/outlierd/outlierd/stages/detect/density"
)

// DensityMaxDims is the largest dimension count of DetectRecords (the per-thread permutation).
const DensityMaxDims = 64

// DensityModel is the per-dimension cluster density f_j(u) = sum_c coef_jc exp(-(u-mu_jc)^2 inv2_jc)
// over the non-empty micro-clusters (ALGORITHMS.md §2), built exactly as density.NewModel builds its
// own, so that both evaluate bit-identical densities on the host.
type DensityModel struct {
	dims, k        int
	mu, coef, inv2 []float64 // [j*k + c]
}

// densityMinVariance is density's minVariance: the floor of a kernel variance h^2 + Delta.
const densityMinVariance = 1e-12

// NewDensityModel builds the model from cluster features and per-dimension bandwidths h (for
// example density.Bandwidths of the same clusters), with density.NewModel's arithmetic: cluster
// c of n_c > 0 members contributes mean CF1/n_c, variance max(h^2 + Delta, 1e-12) with Delta =
// max(0, CF2/n - mu^2 + EF2/n), weight n_c/N.
func NewDensityModel(f *ClusterFeatures, h []float64) (*DensityModel, error) {
	if f == nil || len(f.CF1) == 0 || len(f.N) == 0 {
		return nil, errors.New("gpukern.NewDensityModel: no micro-clusters")
	}
	r, q := len(f.CF1), len(f.N)
	if len(f.CF2) != r || len(f.EF2) != r {
		return nil, fmt.Errorf("gpukern.NewDensityModel: %w: CF1, CF2, EF2 have %d, %d, %d dimensions", errShape, r, len(f.CF2), len(f.EF2))
	}
	for j := range r {
		if len(f.CF1[j]) != q || len(f.CF2[j]) != q || len(f.EF2[j]) != q {
			return nil, fmt.Errorf("gpukern.NewDensityModel: %w: dimension %d does not have %d clusters", errShape, j, q)
		}
	}
	if len(h) != r {
		return nil, fmt.Errorf("gpukern.NewDensityModel: %w: %d bandwidths for %d dimensions", errShape, len(h), r)
	}
	for j, v := range h {
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("gpukern.NewDensityModel: bandwidth of dimension %d is %v, want finite >= 0", j, v)
		}
	}
	var total int64
	for _, n := range f.N {
		total += n
	}
	if total <= 0 {
		return nil, errors.New("gpukern.NewDensityModel: the micro-clusters summarise no objects")
	}
	k := 0
	for _, n := range f.N {
		if n > 0 {
			k++
		}
	}
	m := &DensityModel{dims: r, k: k, mu: make([]float64, 0, r*k), coef: make([]float64, 0, r*k), inv2: make([]float64, 0, r*k)}
	for j := range r {
		for c, nc := range f.N {
			if nc == 0 {
				continue
			}
			n := float64(nc)
			mu := f.CF1[j][c] / n
			delta := f.CF2[j][c]/n - mu*mu + f.EF2[j][c]/n
			if delta < 0 {
				delta = 0
			}
			v := max(h[j]*h[j]+delta, densityMinVariance)
			w := float64(nc) / float64(total)
			m.mu = append(m.mu, mu)
			m.coef = append(m.coef, w/math.Sqrt(2*math.Pi*v))
			m.inv2 = append(m.inv2, 1/(2*v))
		}
	}
	return m, nil
}

// Dims is the number of dimensions r.
func (m *DensityModel) Dims() int { return m.dims }

// Density is f_j(u) evaluated on the host (density.Model.Density's loop).
func (m *DensityModel) Density(j int, u float64) float64 {
	var f float64
	for c := range m.k {
		d := u - m.mu[j*m.k+c]
		e := d * d * m.inv2[j*m.k+c]
		if e < 745 {
			f += m.coef[j*m.k+c] * math.Exp(-e)
		}
	}
	return f
}

// DensityParams are the sampling parameters (density.Params for mode Independent, sampled).
type DensityParams struct {
	// Eta is the density threshold (> 0, finite).
	Eta float64
	// Delta is the eta-probability below which a record is an outlier, in [0, 1].
	Delta float64
	// Samples is s, the samples per record and dimension (>= 1).
	Samples int
	// Seed selects the random streams (density's ObjectStream).
	Seed uint64
	// FirstIndex is the stream index of the first record (record i uses FirstIndex + i).
	FirstIndex uint64
}

// cpu is p as the CPU twin's parameters, whose Validate this package shares.
func (p DensityParams) cpu() density.Params {
	return density.Params{Eta: p.Eta, Delta: p.Delta, Samples: p.Samples, Mode: density.Independent,
		Seed: p.Seed, FirstIndex: p.FirstIndex}
}

// DensityVerdict is the result for one record (density.Verdict with its one-dimensional subspace
// as Dim).
type DensityVerdict struct {
	// Outlier is true if the eta-probability fell below Delta in a tested dimension.
	Outlier bool
	// EtaProbability is the lowest eta-probability seen over the tested dimensions.
	EtaProbability float64
	// Dim is the dimension where EtaProbability was seen.
	Dim int
}

// DetectRecords tests every record (column-major means; sds its uncertainty, or nil for certain
// records) against the model in mode independent by sampling, record granularity: the GPU twin of
// density.Model.DetectRecords with Params{Mode: Independent, Exact: false}, drawing the same
// xorshift64* streams in the same order. Verdicts and eta-probabilities equal the CPU's except
// where a sample's density lies within about 1e-16 of Eta (exp and log are the device's, which
// may differ from Go's in the last bit).
func DetectRecords(d *Device, m *DensityModel, means, sds [][]float32, p DensityParams, out []DensityVerdict) error {
	if m == nil {
		return errors.New("gpukern.DetectRecords: nil model")
	}
	n, err := columnsShape("means", means)
	if err != nil {
		return fmt.Errorf("gpukern.DetectRecords: %w", err)
	}
	if _, err := reduceShape(means, sds, n, 1); err != nil { // sds shape
		return fmt.Errorf("gpukern.DetectRecords: %w", err)
	}
	if len(out) != n {
		return fmt.Errorf("gpukern.DetectRecords: %w: %d verdicts for %d records", errShape, len(out), n)
	}
	for j := range means {
		for i, v := range means[j] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("gpukern.DetectRecords: row %d dimension %d is %v", i, j, v)
			}
			if sds != nil && (!(sds[j][i] >= 0) || math.IsInf(float64(sds[j][i]), 0)) {
				return fmt.Errorf("gpukern.DetectRecords: uncertainty of row %d dimension %d is %v, want finite >= 0", i, j, sds[j][i])
			}
		}
	}
	if len(means) != m.dims {
		return fmt.Errorf("gpukern.DetectRecords: %w: records have %d dimensions, model %d", errShape, len(means), m.dims)
	}
	if m.dims > DensityMaxDims {
		return fmt.Errorf("gpukern.DetectRecords: %d dimensions, at most %d supported", m.dims, DensityMaxDims)
	}
	if err := p.cpu().Validate(); err != nil {
		return fmt.Errorf("gpukern.DetectRecords: %w", err)
	}
	if n == 0 {
		return nil
	}
	return d.detectRecords(m, means, sds, n, p, out)
}
