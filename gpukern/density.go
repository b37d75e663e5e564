package gpukern

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// DensityMaxDims is the largest dimension count of DetectRecords and DetectClusters (the
// per-thread permutation and subspace, and the 64-bit subspace mask).
const DensityMaxDims = 64

// DensityModel is the per-dimension cluster density f_j(u) = sum_c coef_jc exp(-(u-mu_jc)^2 inv2_jc)
// over the non-empty micro-clusters (ALGORITHMS.md §2), built exactly as density.NewModel builds its
// own, so that both evaluate bit-identical densities on the host, plus the tested objects of
// cluster granularity and the CPU twin's host tables (the exact method's regions, the density
// bounds).
type DensityModel struct {
	dims, k        int
	mu, coef, inv2 []float64 // [j*k + c], non-empty clusters
	// The objects of cluster granularity, the non-empty clusters in index order: centroid and
	// sqrt(Delta) ([j*k + c]) and the cluster's index among all q (its stream index).
	objMean, objSD []float64
	objIndex       []int64
	q              int
	// tables are the CPU twin's (density.NewModel of the same tuples): regions and bounds.
	tables DensityTables
}

// DensityTables are what the kernels take from the CPU twin's model of the same tuples, built on
// the host once per model (internal/accel adapts a density.Model): the exact 1-D method's
// superlevel sets {u : f_j(u) > eta} as disjoint open intervals in increasing order, dimension
// j's in lo[off[j]:off[j+1]], hi[off[j]:off[j+1]] (len(off) = r+1); and the density bounds table
// that decides most samples without the sum over clusters (density.Bounds).
type DensityTables interface {
	Regions(eta float64) (lo, hi []float64, off []int64, err error)
	Bounds() *DensityBounds
}

// DensityBounds is the density bounds table, field for field density.Bounds: G cells per
// dimension, sample u of dimension j in cell 1 + floor((u - Origin[j]) * InvStep[j]) clamped to
// [0, Cells+1], and the lower and upper bounds of f_j per cell ([j*(Cells+2) + cell]).
type DensityBounds struct {
	Cells           int
	Origin, InvStep []float64
	Lower, Upper    []float64
}

// densityMinVariance is density's minVariance: the floor of a kernel variance h^2 + Delta.
const densityMinVariance = 1e-12

// NewDensityModel builds the model from cluster features and per-dimension bandwidths h (for
// example density.Bandwidths of the same clusters), with density.NewModel's arithmetic: cluster
// c of n_c > 0 members contributes mean CF1/n_c, variance max(h^2 + Delta, 1e-12) with Delta =
// max(0, CF2/n - mu^2 + EF2/n), weight n_c/N. tables are the CPU twin's of the same tuples and
// bandwidths (internal/accel.DensityModelOf passes them).
func NewDensityModel(f *ClusterFeatures, h []float64, tables DensityTables) (*DensityModel, error) {
	if tables == nil {
		return nil, errors.New("gpukern.NewDensityModel: no host tables")
	}
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
	for c, n := range f.N {
		if n < 0 {
			return nil, fmt.Errorf("gpukern.NewDensityModel: cluster %d has %d members", c, n)
		}
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
	m := &DensityModel{dims: r, k: k, q: q, tables: tables,
		mu: make([]float64, 0, r*k), coef: make([]float64, 0, r*k), inv2: make([]float64, 0, r*k),
		objMean: make([]float64, 0, r*k), objSD: make([]float64, 0, r*k), objIndex: make([]int64, 0, k)}
	for c, nc := range f.N {
		if nc > 0 {
			m.objIndex = append(m.objIndex, int64(c))
		}
	}
	for j := range r {
		for c, nc := range f.N {
			if nc == 0 {
				continue
			}
			// microcluster's Centroid and Delta, density.NewModel's kernel.
			n := float64(nc)
			mu := f.CF1[j][c] / n
			delta := f.CF2[j][c]/n - float64(mu*mu) + f.EF2[j][c]/n
			if delta < 0 {
				delta = 0
			}
			v := max(float64(h[j]*h[j])+delta, densityMinVariance)
			w := float64(nc) / float64(total)
			m.mu = append(m.mu, mu)
			m.coef = append(m.coef, w/math.Sqrt(2*math.Pi*v))
			m.inv2 = append(m.inv2, 1/(2*v))
			m.objMean = append(m.objMean, mu)
			m.objSD = append(m.objSD, math.Sqrt(delta))
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
			f += float64(m.coef[j*m.k+c] * math.Exp(-e))
		}
	}
	return f
}

// DensityMode chooses the subspaces a sampled object is tested in, density.Mode's values (the
// kernels take the number): DensityIndependent (each single dimension in a random order, stopping
// at the first flag), DensityRollup (all 2^r - 1 subspaces, refused above DensityMaxRollupDims),
// DensityRestricted (the prefixes {1}, {1,2}, ..., {1..r}), DensityAveraging (the full space).
type DensityMode int

const (
	DensityIndependent DensityMode = iota
	DensityRollup
	DensityRestricted
	DensityAveraging
)

// DensityMaxRollupDims is the largest dimensionality DensityRollup accepts (density.MaxRollupDims).
const DensityMaxRollupDims = 20

// DensityParams are the detection parameters, density.Params without Workers (internal/accel
// converts).
type DensityParams struct {
	// Eta is the density threshold (> 0, finite).
	Eta float64
	// Delta is the eta-probability below which an object is an outlier, in [0, 1].
	Delta float64
	// Samples is s, the samples per object and sampled subspace (>= 1).
	Samples int
	// Mode chooses the subspaces (the zero value is DensityIndependent).
	Mode DensityMode
	// Seed selects the random streams (density's ObjectStream).
	Seed uint64
	// FirstIndex is the stream index of the first record (record i uses FirstIndex + i); clusters
	// use their own index.
	FirstIndex uint64
	// Index, when not nil, is each record's own stream index (density.Params.Index); records only.
	Index []uint64
	// Exact computes 1-D subspaces exactly (density.Params.Exact): the normal mass of the
	// superlevel set {u : f_j(u) > Eta}, whose intervals the CPU twin computes once per Eta.
	Exact bool
}

// DensityVerdict is the result for one object, field for field density.Verdict: whether the
// eta-probability fell below Delta in a tested subspace, the lowest eta-probability seen, and the
// dimensions (increasing) of the subspace where it was seen (nil for an untested object).
type DensityVerdict struct {
	Outlier        bool
	EtaProbability float64
	Subspace       []int
}

// check validates p (density.Params.Validate's rules) for objects of the model's dimensionality.
func (p DensityParams) check(m *DensityModel) error {
	var errs []error
	if !(p.Eta > 0) || math.IsInf(p.Eta, 0) {
		errs = append(errs, fmt.Errorf("eta must be finite and > 0, got %v", p.Eta))
	}
	if !(p.Delta >= 0 && p.Delta <= 1) {
		errs = append(errs, fmt.Errorf("delta must be in [0, 1], got %v", p.Delta))
	}
	if p.Samples < 1 {
		errs = append(errs, fmt.Errorf("samples must be >= 1, got %d", p.Samples))
	}
	if p.Mode < DensityIndependent || p.Mode > DensityAveraging {
		errs = append(errs, fmt.Errorf("unknown mode %d", int(p.Mode)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid parameters: %w", errors.Join(errs...))
	}
	if m.dims > DensityMaxDims {
		return fmt.Errorf("%d dimensions, at most %d supported", m.dims, DensityMaxDims)
	}
	if p.Mode == DensityRollup && m.dims > DensityMaxRollupDims {
		return fmt.Errorf("exhaustive roll-up refused for r=%d > %d (2^r-1 subspaces per object); use independent, restricted or averaging",
			m.dims, DensityMaxRollupDims)
	}
	return nil
}

// densityRegions flattens the exact method's intervals for the kernel: lo, hi and the offsets of
// each dimension's run (r+1 entries). Empty (one offset row of zeros) when p is not exact.
func (m *DensityModel) densityRegions(p DensityParams) (lo, hi []float64, off []int64, err error) {
	off = make([]int64, m.dims+1)
	if !p.Exact {
		return nil, nil, off, nil
	}
	lo, hi, off, err = m.tables.Regions(p.Eta)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(off) != m.dims+1 || len(hi) != len(lo) || off[0] != 0 || off[m.dims] != int64(len(lo)) {
		return nil, nil, nil, fmt.Errorf("%w: regions of %d intervals (%d ends) with %d offsets for %d dimensions",
			errShape, len(lo), len(hi), len(off), m.dims)
	}
	return lo, hi, off, nil
}

// densityPlain makes the kernels sample without the bounds (the paper's loop): set only by tests
// and benchmarks that compare the two.
var densityPlain bool

// samplingBounds is the CPU twin's density bounds table (built once per model) when p samples
// any subspace, nil when it samples none (independent with the exact 1-D method).
func (m *DensityModel) samplingBounds(p DensityParams) *DensityBounds {
	if p.Exact && p.Mode == DensityIndependent || densityPlain {
		return nil
	}
	return m.tables.Bounds()
}

// KeepDensityModel uploads m's kernel parameters to stay on d, and its density bounds table
// (built on the host once per model) with the first call that samples: later DetectRecords and
// DetectClusters calls with m upload only the objects (and the exact method's regions). A streaming user keeps the serving model resident and drops it when the next
// one takes over. Calling it again for a resident model does nothing.
func KeepDensityModel(d *Device, m *DensityModel) error {
	if d == nil || m == nil {
		return errors.New("gpukern.KeepDensityModel: nil device or model")
	}
	if err := d.keepDensityModel(m); err != nil {
		return fmt.Errorf("gpukern.KeepDensityModel: %w", err)
	}
	return nil
}

// DropDensityModel frees the resident copy of m on d (none: nothing to do). Closing the device
// frees every resident model as well.
func DropDensityModel(d *Device, m *DensityModel) error {
	if d == nil || m == nil {
		return nil
	}
	if err := d.dropDensityModel(m); err != nil {
		return fmt.Errorf("gpukern.DropDensityModel: %w", err)
	}
	return nil
}

// densityResult is what the kernel writes per object.
type densityResult struct {
	prob []float64
	mask []uint64
	flag []int32
	// back holds prob, mask and flag in one array, in that order (the device's layout: one copy
	// back).
	back []uint64
}

// newDensityResult is a result for n objects, its three arrays views of one backing array.
func newDensityResult(n int) densityResult {
	back := make([]uint64, 2*n+(n+1)/2)
	res := densityResult{mask: back[n : 2*n], back: back}
	if n > 0 {
		res.prob = unsafe.Slice((*float64)(unsafe.Pointer(&back[0])), n)
		res.flag = unsafe.Slice((*int32)(unsafe.Pointer(&back[2*n])), n)
	}
	return res
}

// verdicts turns the kernel's results into verdicts; the subspaces share one backing array (one
// allocation for all objects).
func (res densityResult) verdicts(out []DensityVerdict, pos []int) {
	total := 0
	for _, m := range res.mask {
		total += bits.OnesCount64(m)
	}
	back := make([]int, 0, total)
	for i, m := range res.mask {
		var sub []int
		if m != 0 {
			at := len(back)
			for ; m != 0; m &= m - 1 {
				back = append(back, bits.TrailingZeros64(m))
			}
			sub = back[at:len(back):len(back)]
		}
		o := i
		if pos != nil {
			o = pos[i]
		}
		out[o] = DensityVerdict{Outlier: res.flag[i] != 0, EtaProbability: res.prob[i], Subspace: sub}
	}
}

// DetectRecords tests every record (column-major means; sds its uncertainty, or nil for certain
// records) against the model, record granularity: the GPU twin of density.Model.DetectRecords with
// the same Params (any mode, sampled or exact), drawing the same xorshift64* streams in the same
// order. Sampled eta-probabilities and verdicts equal the CPU's except where a sample's density
// lies within about 1e-16 of Eta (exp and log are the device's, which may differ from Go's in the
// last bit); exact 1-D probabilities differ from the CPU's by at most a few ulps (CUDA's erfc), so
// a verdict can differ only where one lies within that of Delta.
func DetectRecords(d *Device, m *DensityModel, means, sds [][]float32, p DensityParams, out []DensityVerdict) error {
	rq, err := recordsRequest(m, means, sds, p, len(out))
	if err != nil {
		return fmt.Errorf("gpukern.DetectRecords: %w", err)
	}
	if rq.obj.n == 0 {
		return nil
	}
	res, err := d.run(&densityJob{m: m, rq: rq, p: p}, nil)
	if err != nil {
		return fmt.Errorf("gpukern.DetectRecords: %w", err)
	}
	res.verdicts(out, nil)
	return nil
}

// densityRequest is a checked density test of records: the objects, the exact method's regions
// and the sampling bounds table (nil: none).
type densityRequest struct {
	obj    densityObjects
	lo, hi []float64
	off    []int64
	bounds *DensityBounds
}

// recordsRequest checks DetectRecords' arguments (nOut verdicts) and prepares its tables.
func recordsRequest(m *DensityModel, means, sds [][]float32, p DensityParams, nOut int) (densityRequest, error) {
	if m == nil {
		return densityRequest{}, errors.New("nil model")
	}
	n, err := columnsShape("means", means)
	if err != nil {
		return densityRequest{}, err
	}
	if _, err := reduceShape(means, sds, n, 1); err != nil { // sds shape
		return densityRequest{}, err
	}
	if nOut != n {
		return densityRequest{}, fmt.Errorf("%w: %d verdicts for %d records", errShape, nOut, n)
	}
	if p.Index != nil && len(p.Index) != n {
		return densityRequest{}, fmt.Errorf("%w: %d stream indices for %d records", errShape, len(p.Index), n)
	}
	for j := range means {
		for i, v := range means[j] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return densityRequest{}, fmt.Errorf("row %d dimension %d is %v", i, j, v)
			}
			if sds != nil && (!(sds[j][i] >= 0) || math.IsInf(float64(sds[j][i]), 0)) {
				return densityRequest{}, fmt.Errorf("uncertainty of row %d dimension %d is %v, want finite >= 0", i, j, sds[j][i])
			}
		}
	}
	if len(means) != m.dims {
		return densityRequest{}, fmt.Errorf("%w: records have %d dimensions, model %d", errShape, len(means), m.dims)
	}
	if err := p.check(m); err != nil {
		return densityRequest{}, err
	}
	rq := densityRequest{obj: densityObjects{means: means, sds: sds, n: n}}
	if n == 0 {
		return rq, nil
	}
	if rq.lo, rq.hi, rq.off, err = m.densityRegions(p); err != nil {
		return densityRequest{}, err
	}
	rq.bounds = m.samplingBounds(p)
	return rq, nil
}

// DetectClusters tests the q micro-clusters themselves (cluster granularity): the GPU twin of
// density.Model.DetectClusters with the same Params. Cluster c has mean = its centroid and sd =
// sqrt(Delta) and draws from stream index c; an empty cluster is not tested (Outlier false,
// EtaProbability 1, Subspace nil). The result has q entries; density.Inherit gives members their
// cluster's verdict. Parity as DetectRecords.
func DetectClusters(d *Device, m *DensityModel, p DensityParams) ([]DensityVerdict, error) {
	if m == nil {
		return nil, errors.New("gpukern.DetectClusters: nil model")
	}
	if err := p.check(m); err != nil {
		return nil, fmt.Errorf("gpukern.DetectClusters: %w", err)
	}
	lo, hi, off, err := m.densityRegions(p)
	if err != nil {
		return nil, fmt.Errorf("gpukern.DetectClusters: %w", err)
	}
	rq := densityRequest{obj: densityObjects{clusters: true, n: m.k}, lo: lo, hi: hi, off: off, bounds: m.samplingBounds(p)}
	res, err := d.run(&densityJob{m: m, rq: rq, p: p}, nil)
	if err != nil {
		return nil, fmt.Errorf("gpukern.DetectClusters: %w", err)
	}
	out := make([]DensityVerdict, m.q)
	for c := range out {
		out[c] = DensityVerdict{EtaProbability: 1}
	}
	pos := make([]int, len(m.objIndex))
	for i, c := range m.objIndex {
		pos[i] = int(c)
	}
	res.verdicts(out, pos)
	return out, nil
}

// densityObjects are the tested objects: records (float32 columns) or the model's clusters.
type densityObjects struct {
	clusters   bool
	means, sds [][]float32
	n          int
}
