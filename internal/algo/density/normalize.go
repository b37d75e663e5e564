package density

import (
	"errors"
	"fmt"
	"math"

	"github.com/outlierd/outlierd/internal/algo/microcluster"
)

// ErrShape reports inconsistent column shapes.
var ErrShape = errors.New("density: inconsistent shapes")

// Scaling maps each dimension to [0, 1]: x' = (x - Min[j]) / Scale[j], the uncertainty by the
// same factor psi' = psi / Scale[j]. Scale[j] = max - min, or 1 for a constant dimension, which
// thus maps to 0 (dividing by a zero range is undefined, and any other constant would do; 0 keeps
// the [0,1] range). Fitted on one data set, it can be applied to later batches, whose values may
// then fall outside [0, 1].
type Scaling struct {
	Min, Scale []float64
}

// FitScaling computes the per-dimension minimum and range of column-major means.
func FitScaling(means [][]float32) (Scaling, error) {
	if _, err := checkColumns(means, nil); err != nil {
		return Scaling{}, err
	}
	s := Scaling{Min: make([]float64, len(means)), Scale: make([]float64, len(means))}
	for j, col := range means {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range col {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
		if len(col) == 0 {
			lo, hi = 0, 0
		}
		s.Min[j], s.Scale[j] = lo, hi-lo
		if hi == lo {
			s.Scale[j] = 1
		}
	}
	return s, nil
}

// Apply returns scaled copies of means and sds (sds may be nil; then the second result is nil).
func (s Scaling) Apply(means, sds [][]float32) ([][]float32, [][]float32, error) {
	if _, err := checkColumns(means, sds); err != nil {
		return nil, nil, err
	}
	if len(means) != len(s.Min) || len(s.Scale) != len(s.Min) {
		return nil, nil, fmt.Errorf("%w: scaling has %d dimensions, data %d", ErrShape, len(s.Min), len(means))
	}
	m := make([][]float32, len(means))
	for j, col := range means {
		m[j] = make([]float32, len(col))
		for i, v := range col {
			m[j][i] = float32((float64(v) - s.Min[j]) / s.Scale[j])
		}
	}
	if sds == nil {
		return m, nil, nil
	}
	e := make([][]float32, len(sds))
	for j, col := range sds {
		e[j] = make([]float32, len(col))
		for i, v := range col {
			e[j][i] = float32(float64(v) / s.Scale[j])
		}
	}
	return m, e, nil
}

// uncertaintyTag separates the uncertainty streams from the detection streams of the same seed.
const uncertaintyTag = 0x756e636572746169 // "uncertai"

// DeriveUncertainty gives certain data the paper's synthetic uncertainty (§5.1):
// psi_ij = std_j * U(0,1) * multiplier, std_j the population standard deviation of column j.
// Row i draws its r uniforms, in dimension order, from ObjectStream(seed ^ uncertaintyTag, i),
// so the result is reproducible per row whatever the batch split.
func DeriveUncertainty(means [][]float32, multiplier float64, seed uint64) ([][]float32, error) {
	n, err := checkColumns(means, nil)
	if err != nil {
		return nil, err
	}
	if !(multiplier >= 0) || math.IsInf(multiplier, 0) {
		return nil, fmt.Errorf("density: uncertainty multiplier must be finite and >= 0, got %v", multiplier)
	}
	std := make([]float64, len(means))
	for j, col := range means {
		var sum, sum2 float64
		for _, v := range col {
			sum += float64(v)
		}
		mean := sum / float64(max(n, 1))
		for _, v := range col {
			d := float64(v) - mean
			sum2 += float64(d * d)
		}
		std[j] = math.Sqrt(sum2 / float64(max(n, 1)))
	}
	sds := make([][]float32, len(means))
	for j := range sds {
		sds[j] = make([]float32, n)
	}
	for i := range n {
		g := ObjectStream(seed^uncertaintyTag, uint64(i))
		for j := range sds {
			sds[j][i] = float32(std[j] * g.Uniform() * multiplier)
		}
	}
	return sds, nil
}

// checkColumns validates column-major means (and optional sds) and returns the row count: the
// shapes as microcluster checks them (wrapping ErrShape), then finite means and finite sds >= 0.
func checkColumns(means, sds [][]float32) (int, error) {
	n, err := microcluster.CheckColumns(means, sds, ErrShape)
	if err != nil {
		return 0, err
	}
	for j, col := range means {
		for i, v := range col {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("density: row %d dimension %d is %v", i, j, v)
			}
		}
	}
	for j, col := range sds {
		for i, v := range col {
			if !(v >= 0) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("density: uncertainty of row %d dimension %d is %v, want finite >= 0", i, j, v)
			}
		}
	}
	return n, nil
}
