package solvingset

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Model predicts outliers among new points from a solving set (Angiulli, Basta, Pizzuti, TKDE
// 2006; ALGORITHMS.md §1): a query q is an S-outlier iff w_k(q, S) >= w*. Because S is a subset
// of D, w_k(q, S) >= w_k(q, D): no query that is an outlier of D by the exact rule is missed,
// at O(|S|) distances per query instead of O(|D|).
type Model struct {
	// Features names the columns, in order.
	Features []string
	// K is the number of neighbours summed into a score.
	K int
	// WStar is w*, the weight of the n-th outlier of the training data.
	WStar float64
	// Points is the solving set, column-major (Points[j][i]), in the units after normalisation.
	Points [][]float32
	// Offset and Scale, when not nil, normalise each query before scoring:
	// x'_j = (x_j - Offset[j]) * Scale[j]. Both nil means the queries are used as they are.
	Offset, Scale []float32
}

// NewModel builds the prediction model of a SolvingSet (or BruteForce) result on cols with k
// neighbours. It has no normalisation; set Offset and Scale when the training data were
// normalised.
func NewModel(cols [][]float32, features []string, res Result, k int) *Model {
	m := &Model{
		Features: append([]string(nil), features...),
		K:        k,
		WStar:    res.WStar,
		Points:   make([][]float32, len(cols)),
	}
	for j, c := range cols {
		p := make([]float32, len(res.SolvingSet))
		for i, r := range res.SolvingSet {
			p[i] = c[r]
		}
		m.Points[j] = p
	}
	return m
}

// Validate reports why the model cannot score: shapes that disagree, k out of range, a
// non-finite value.
func (m *Model) Validate() error {
	var errs []error
	d := len(m.Features)
	if d == 0 || d > maxDims {
		errs = append(errs, fmt.Errorf("feature count %d out of range [1, %d]", d, maxDims))
	}
	for j, f := range m.Features {
		if len(f) > maxNameLen || !utf8.ValidString(f) {
			errs = append(errs, fmt.Errorf("feature %d: name must be UTF-8 of at most %d bytes", j, maxNameLen))
		}
	}
	if len(m.Points) != d {
		errs = append(errs, fmt.Errorf("%d point columns for %d features", len(m.Points), d))
	}
	rows := 0
	if len(m.Points) > 0 {
		rows = len(m.Points[0])
	}
	for j, c := range m.Points {
		if len(c) != rows {
			errs = append(errs, fmt.Errorf("point column %d has %d rows, column 0 has %d", j, len(c), rows))
			break
		}
		if !allFinite(c) {
			errs = append(errs, fmt.Errorf("point column %d holds a non-finite value", j))
		}
	}
	if m.K < 1 || m.K > rows {
		errs = append(errs, fmt.Errorf("k must be in [1, |S|] = [1, %d], got %d", rows, m.K))
	}
	if math.IsNaN(m.WStar) || m.WStar < 0 {
		errs = append(errs, fmt.Errorf("w* must be a number >= 0, got %v", m.WStar))
	}
	if (m.Offset == nil) != (m.Scale == nil) {
		errs = append(errs, errors.New("offset and scale must both be set or both be nil"))
	} else if m.Offset != nil {
		if len(m.Offset) != d || len(m.Scale) != d {
			errs = append(errs, fmt.Errorf("normalisation has %d offsets and %d scales for %d features", len(m.Offset), len(m.Scale), d))
		}
		if !allFinite(m.Offset) || !allFinite(m.Scale) {
			errs = append(errs, errors.New("normalisation holds a non-finite value"))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("solvingset: invalid model: %w", errors.Join(errs...))
}

func allFinite(v []float32) bool {
	for _, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// normalise maps one raw value of feature j into the model's units. Rounded in float32, the
// same on every path.
func (m *Model) normalise(j int, x float32) float32 {
	if m.Offset == nil {
		return x
	}
	return (x - m.Offset[j]) * m.Scale[j]
}

// Score is w_k(q, S) of one query given as a row-major vector of raw values (len(q) ==
// len(Features)); it panics on another length (use CheckQuery on untrusted input).
func (m *Model) Score(q []float32) float64 {
	if err := m.CheckQuery(q); err != nil {
		panic(err.Error())
	}
	d := len(q)
	qn := make([]float32, d)
	for j, x := range q {
		qn[j] = m.normalise(j, x)
	}
	h := make([]float32, m.K)
	fillInf(h)
	for i := range m.Points[0] {
		var s float32
		for j := range d {
			t := qn[j] - m.Points[j][i]
			s += float32(t * t)
		}
		if s <= sq32(h[0]) {
			if dist := sqrt32(s); dist < h[0] {
				heapReplaceTop(h, dist)
			}
		}
	}
	return canonicalWeight(h, make([]float32, m.K))
}

// CheckQuery reports a query vector of the wrong length.
func (m *Model) CheckQuery(q []float32) error {
	if len(q) != len(m.Features) {
		return fmt.Errorf("solvingset: query has %d values, the model has %d features", len(q), len(m.Features))
	}
	return nil
}

// CheckBatch reports column-major queries or an output slice of the wrong shape.
func (m *Model) CheckBatch(Q [][]float32, out []float64) error {
	if len(Q) != len(m.Features) {
		return fmt.Errorf("solvingset: queries have %d columns, the model has %d features", len(Q), len(m.Features))
	}
	for j := range Q {
		if len(Q[j]) != len(Q[0]) {
			return fmt.Errorf("solvingset: query column %d has %d rows, column 0 has %d", j, len(Q[j]), len(Q[0]))
		}
	}
	if len(out) != len(Q[0]) {
		return fmt.Errorf("solvingset: out has %d elements for %d queries", len(out), len(Q[0]))
	}
	return nil
}

// ScoreBatch writes w_k(q, S) of every column-major query (raw values) into out, parallel
// over workers (0 = all cores). Shapes must pass CheckBatch, or it panics.
func (m *Model) ScoreBatch(Q [][]float32, out []float64, workers int) {
	if err := m.CheckBatch(Q, out); err != nil {
		panic(err.Error())
	}
	if len(out) == 0 {
		return
	}
	if m.Offset != nil {
		norm := make([][]float32, len(Q))
		for j, c := range Q {
			norm[j] = make([]float32, len(c))
			for i, x := range c {
				norm[j][i] = m.normalise(j, x)
			}
		}
		Q = norm
	}
	KNNWeights(m.Points, Q, m.K, workers, out)
}

// IsOutlier applies the prediction rule: score >= w*.
func (m *Model) IsOutlier(score float64) bool { return score >= m.WStar }

// Scoring is one batch of queries scored against a model: Out[i] = w_k(Queries[i], Points) with
// the model's k, the queries already in the model's space (KNNWeights(Model.Points, Queries,
// Model.K, ...)). It is the unit a device takes in one call with a batch's other steps.
type Scoring struct {
	Model   *Model
	Queries [][]float32
	Out     []float64
}
