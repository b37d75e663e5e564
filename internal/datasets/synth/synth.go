// Package synth generates the papers' synthetic data sets, column-major, with ground truth.
//
//   - g2d: the solving-set papers' G2d, N(0, I) (2-D by default; any dimension count).
//   - g3d: the solving-set papers' G3d, three 3-D Gaussians (centres and spreads below).
//   - one, three: the uncertain-data sets of Matsumoto, Hung and Yiu (ALGORITHMS.md §2),
//     labelled, normalised to [0,1], with per-value uncertainty.
//
// Every generator is deterministic for a seed.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Data is a generated data set in the column-major layout of the rest of outlierd.
type Data struct {
	// Features are the feature names "x1".."xd".
	Features []string
	// Cols holds the values: Cols[j][i] is row i in dimension j.
	Cols [][]float32
	// SD holds the per-value uncertainty (a standard deviation), same shape as Cols;
	// nil for the certain kinds g2d and g3d.
	SD [][]float32
	// Label is 1 for an outlier and 0 for an inlier; nil for the unlabelled kinds g2d and g3d.
	Label []uint8
}

// Rows is the number of rows.
func (d *Data) Rows() int {
	if len(d.Cols) == 0 {
		return 0
	}
	return len(d.Cols[0])
}

// Dims is the number of dimensions.
func (d *Data) Dims() int { return len(d.Cols) }

func newData(rows, dims int, uncertain, labelled bool) *Data {
	d := &Data{Features: make([]string, dims), Cols: make([][]float32, dims)}
	for j := range dims {
		d.Features[j] = fmt.Sprintf("x%d", j+1)
		d.Cols[j] = make([]float32, rows)
	}
	if uncertain {
		d.SD = make([][]float32, dims)
		for j := range dims {
			d.SD[j] = make([]float32, rows)
		}
	}
	if labelled {
		d.Label = make([]uint8, rows)
	}
	return d
}

func newRand(seed uint64) *rand.Rand {
	// The second PCG word is a fixed odd constant: the seed alone selects the stream.
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// G2D is the papers' G2d: rows points from N(0, I) in 2 dimensions.
func G2D(rows int, seed uint64) *Data { return Gaussian(rows, 2, seed) }

// Gaussian draws rows points from N(0, I) in dims dimensions (G2d generalised; the
// 1,000,000 x 10 GPU benchmark uses dims = 10).
func Gaussian(rows, dims int, seed uint64) *Data {
	d := newData(rows, dims, false, false)
	r := newRand(seed)
	for i := range rows {
		for j := range dims {
			d.Cols[j][i] = float32(r.NormFloat64())
		}
	}
	return d
}

// G3DCentres and G3DSpreads define G3d: the papers give only "three Gaussians in 3-D", so
// outlierd fixes well separated centres with unequal spreads, the points split evenly.
// The wide third component gives the top outliers a natural home in its tails.
var (
	G3DCentres = [3][3]float64{{0, 0, 0}, {6, 6, 6}, {-6, 6, 0}}
	G3DSpreads = [3]float64{1.0, 0.5, 2.0}
)

// G3D is the papers' G3d: rows 3-D points, component c = i mod 3 (so the split is even),
// each coordinate from N(G3DCentres[c][j], G3DSpreads[c]^2).
func G3D(rows int, seed uint64) *Data {
	d := newData(rows, 3, false, false)
	r := newRand(seed)
	for i := range rows {
		c := i % 3
		for j := range 3 {
			d.Cols[j][i] = float32(G3DCentres[c][j] + float64(G3DSpreads[c]*r.NormFloat64()))
		}
	}
	return d
}

// UncertainParams are the knobs of the uncertain-data generators ('one', 'three'),
// named as in the paper's table 3.
type UncertainParams struct {
	// Rows is the number of objects (paper default 100,000).
	Rows int
	// Dims is the number of dimensions r (paper default 10).
	Dims int
	// Seed makes the set reproducible.
	Seed uint64
	// OutlierRatio is the fraction of outliers (paper: 1%, 5% default, 25%).
	OutlierRatio float64
	// Offset is added to the outliers' mean in 'one' (paper: 1.5, 2.0 default, 2.5); unused by 'three'.
	Offset float64
	// OutlierDims is the fraction of dimensions in which an outlier differs from the inliers
	// (paper: 20%, 50%, 100% default); at least one dimension.
	OutlierDims float64
	// UncertaintyMultiplier scales the derived uncertainty psi = std_j * U(0,1) * multiplier (default 2.0).
	UncertaintyMultiplier float64
}

// DefaultUncertainParams are the paper's defaults.
func DefaultUncertainParams() UncertainParams {
	return UncertainParams{Rows: 100000, Dims: 10, Seed: 1, OutlierRatio: 0.05, Offset: 2.0, OutlierDims: 1.0, UncertaintyMultiplier: 2.0}
}

// Validate reports every problem of p at once.
func (p UncertainParams) Validate() error {
	var errs []string
	if p.Rows < 2 {
		errs = append(errs, fmt.Sprintf("rows must be >= 2, got %d", p.Rows))
	}
	if p.Dims < 1 {
		errs = append(errs, fmt.Sprintf("dims must be >= 1, got %d", p.Dims))
	}
	if !(p.OutlierRatio >= 0 && p.OutlierRatio < 1) {
		errs = append(errs, fmt.Sprintf("outlier-ratio must be in [0, 1), got %g", p.OutlierRatio))
	}
	if !(p.OutlierDims > 0 && p.OutlierDims <= 1) {
		errs = append(errs, fmt.Sprintf("outlier-dims must be in (0, 1], got %g", p.OutlierDims))
	}
	if !(p.UncertaintyMultiplier >= 0) || math.IsInf(p.UncertaintyMultiplier, 0) {
		errs = append(errs, fmt.Sprintf("uncertainty-multiplier must be >= 0, got %g", p.UncertaintyMultiplier))
	}
	if math.IsNaN(p.Offset) || math.IsInf(p.Offset, 0) {
		errs = append(errs, fmt.Sprintf("offset must be finite, got %g", p.Offset))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("synth: %s", joinErrs(errs))
}

func joinErrs(errs []string) string {
	s := errs[0]
	for _, e := range errs[1:] {
		s += "; " + e
	}
	return s
}

// outlierDimCount is how many dimensions an outlier differs in: round(OutlierDims * Dims), at least 1.
func (p UncertainParams) outlierDimCount() int {
	return max(1, min(p.Dims, int(math.Round(p.OutlierDims*float64(p.Dims)))))
}

// One is the paper's 'one': inliers from N(0,1) in every dimension; outliers from
// N(Offset, 1) in the first round(OutlierDims*Dims) dimensions and N(0,1) in the rest.
// p must pass Validate. Outliers are spread evenly over the rows (every row i with floor((i+1)r) > floor(i r)),
// then everything is normalised to [0,1] and uncertainty is derived (see deriveUncertainty).
func One(p UncertainParams) *Data {
	mustValid(p)
	d := newData(p.Rows, p.Dims, true, true)
	r := newRand(p.Seed)
	od := p.outlierDimCount()
	for i := range p.Rows {
		out := isOutlierRow(i, p.OutlierRatio)
		if out {
			d.Label[i] = 1
		}
		for j := range p.Dims {
			mean := 0.0
			if out && j < od {
				mean = p.Offset
			}
			d.Cols[j][i] = float32(mean + r.NormFloat64())
		}
	}
	normalise(d.Cols)
	deriveUncertainty(d, r, p.UncertaintyMultiplier)
	return d
}

// Three is the paper's 'three': inliers from three tight Gaussians (sd 0.5, means 1.5,
// 3.0 and 4.5 in every dimension, the component chosen per object at random); outliers from
// N(0, 1) in the first round(OutlierDims*Dims) dimensions and from their own component in
// the rest. Then normalised to [0,1] with uncertainty derived as for One.
func Three(p UncertainParams) *Data {
	mustValid(p)
	d := newData(p.Rows, p.Dims, true, true)
	r := newRand(p.Seed)
	means := [3]float64{1.5, 3.0, 4.5}
	od := p.outlierDimCount()
	for i := range p.Rows {
		out := isOutlierRow(i, p.OutlierRatio)
		if out {
			d.Label[i] = 1
		}
		m := means[r.IntN(3)]
		for j := range p.Dims {
			if out && j < od {
				d.Cols[j][i] = float32(r.NormFloat64())
			} else {
				d.Cols[j][i] = float32(m + float64(0.5*r.NormFloat64()))
			}
		}
	}
	normalise(d.Cols)
	deriveUncertainty(d, r, p.UncertaintyMultiplier)
	return d
}

// mustValid guards One and Three: callers validate user input with Validate first, so an
// invalid p here is a programming error.
func mustValid(p UncertainParams) {
	if err := p.Validate(); err != nil {
		panic(err)
	}
}

// isOutlierRow spreads round(ratio*rows) outliers evenly over the rows, so that any prefix of
// the data (a stream's first window) has about the same outlier ratio as the whole.
func isOutlierRow(i int, ratio float64) bool {
	return math.Floor(float64(i+1)*ratio) > math.Floor(float64(i)*ratio)
}

// normalise maps every column to [0,1] by its min and max; a constant column becomes 0.
func normalise(cols [][]float32) {
	for _, c := range cols {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range c {
			lo = math.Min(lo, float64(v))
			hi = math.Max(hi, float64(v))
		}
		scale := 0.0
		if hi > lo {
			scale = 1 / (hi - lo)
		}
		for i, v := range c {
			c[i] = float32((float64(v) - lo) * scale)
		}
	}
}

// deriveUncertainty sets SD[j][i] = std_j * U(0,1) * multiplier, the paper's rule for data
// that carries no uncertainty of its own; std_j is the (population) standard deviation of column j.
func deriveUncertainty(d *Data, r *rand.Rand, multiplier float64) {
	for j, c := range d.Cols {
		var sum, sq float64
		for _, v := range c {
			sum += float64(v)
			sq += float64(float64(v) * float64(v))
		}
		n := float64(len(c))
		mean := sum / n
		std := math.Sqrt(math.Max(0, sq/n-float64(mean*mean)))
		for i := range c {
			d.SD[j][i] = float32(std * r.Float64() * multiplier)
		}
	}
}
