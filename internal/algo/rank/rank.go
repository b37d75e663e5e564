// Package rank turns a window of records into scores that rank and that a user can threshold
// by a rate: Tail, a per-feature empirical tail score (ECOD, Li et al. 2022: the sum over
// features of -ln of the record's rarer tail probability in the window's own distribution of
// that feature), and Calibration, which maps any detector's raw score to -log10 of its tail
// probability among the window's own scores, so that scores of different detectors can be
// averaged and a threshold can be set as a rate.
//
// Both are immutable once built and safe for concurrent readers.
package rank

import (
	"math"
	"slices"
	"sort"
)

// Tail is the window's empirical distribution, one feature at a time.
type Tail struct {
	// Sorted[j] is the window's feature j, ascending (raw units).
	Sorted [][]float32
	// Spread[j] is the unit in which the tail keeps falling beyond the window's range: the
	// interquartile range, or the range, or 1 for a constant feature (always > 0).
	Spread []float64
}

// NewTail builds the per-feature distributions from column-major raw values (finite).
func NewTail(cols [][]float32) *Tail {
	t := &Tail{Sorted: make([][]float32, len(cols)), Spread: make([]float64, len(cols))}
	for j, c := range cols {
		s := slices.Clone(c)
		slices.Sort(s)
		t.Sorted[j] = s
		n := len(s)
		if n == 0 {
			t.Spread[j] = 1
			continue
		}
		iqr := float64(s[(3*(n-1))/4]) - float64(s[(n-1)/4])
		rng := float64(s[n-1]) - float64(s[0])
		switch {
		case iqr > 0:
			t.Spread[j] = iqr
		case rng > 0:
			t.Spread[j] = rng
		default:
			t.Spread[j] = 1
		}
	}
	return t
}

// surprisals returns -ln of the left and right tail probabilities of x in feature j:
// P(X <= x) and P(X >= x) estimated as count/n, the window's empirical distribution as ECOD
// uses it, and 1/n for a record at or beyond the window's extreme (a tail is never 0). Beyond
// the window's range the tail keeps falling, exponentially in units of Spread[j], down to
// 1/n^2 at most: records beyond the range still rank by how far beyond, but one feature
// cannot outweigh the others without bound. base is ln(n) (Score computes it once per feature).
func (t *Tail) surprisals(j int, x float32, base float64) (left, right float64) {
	s := t.Sorted[j]
	n := len(s)
	le, lt := counts(s, x) // #{v <= x}, #{v < x}
	ge := n - lt
	left = base - math.Log(float64(max(le, 1)))
	right = base - math.Log(float64(max(ge, 1)))
	if n > 0 && x < s[0] {
		left += min((float64(s[0])-float64(x))/t.Spread[j], base)
	}
	if n > 0 && x > s[n-1] {
		right += min((float64(x)-float64(s[n-1]))/t.Spread[j], base)
	}
	return left, right
}

// counts returns #{v <= x} and #{v < x} in ascending s: the first index with s[i] > x and
// the first with s[i] >= x, as sort.Search finds them, but both searches in one loop without
// branches on the data (the compiler turns the selects into conditional moves), so their loads
// overlap instead of waiting on mispredicted comparisons (the ranking score does this for
// every feature of every record, in a window of 50,000 values). For a NaN x both are 0 (sort.Search
// would give len(s) for both): the tails swap, and the score, their maximum, is the same.
func counts(s []float32, x float32) (le, lt int) {
	n := len(s)
	if n == 0 {
		return 0, 0
	}
	// Invariant: the answers lie in [a, a+n] and [b, b+n]; s[a-1] <= x, s[b-1] < x.
	a, b := 0, 0
	for n > 1 {
		half := n >> 1
		if s[a+half-1] <= x {
			a += half
		}
		if s[b+half-1] < x {
			b += half
		}
		n -= half
	}
	if s[a] <= x {
		a++
	}
	if s[b] < x {
		b++
	}
	return a, b
}

// Score writes each query row's tail score into out (len(out) = rows of q): the sum over
// features of the surprisal of the rarer tail, max(-ln P(X <= x), -ln P(X >= x)), in nats
// (pyod's ECOD 3.x: the per-feature maximum of the left, right and skewness-chosen tails,
// which is the rarer tail). Higher is more outlying. q is column-major with the model's
// features.
func (t *Tail) Score(q [][]float32, out []float64) {
	bases := make([]float64, len(q))
	for j := range q {
		bases[j] = math.Log(float64(len(t.Sorted[j])))
	}
	for i := range out {
		var sum float64
		for j := range q {
			l, r := t.surprisals(j, q[j][i], bases[j])
			sum += max(l, r)
		}
		out[i] = sum
	}
}

// Calibration maps a detector's raw score (higher = more outlying) to the surprisal of its
// tail probability among the window's own scores: -log10 P(S >= score), with P estimated
// from the sorted calibration scores, interpolated between them so that it ranks exactly as
// the raw score does.
type Calibration struct {
	// Sorted are the calibration scores, ascending (finite).
	Sorted []float64
	// Slope is the surprisal added per unit of raw score beyond the largest calibration
	// score: the rate at which the surprisal rose from the 90th percentile to the largest,
	// so the top keeps ranking (an exponential tail).
	Slope float64
}

// NewCalibration sorts a copy of the calibration scores (non-finite ones are dropped).
func NewCalibration(scores []float64) Calibration {
	s := make([]float64, 0, len(scores))
	for _, v := range scores {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			s = append(s, v)
		}
	}
	slices.Sort(s)
	c := Calibration{Sorted: s}
	n := len(s)
	if n == 0 {
		return c
	}
	top := math.Log10(float64(n + 1))
	r90 := s[(9*(n-1))/10]
	switch {
	case s[n-1] > r90:
		c.Slope = (top - c.Surprisal(r90)) / (s[n-1] - r90)
	case s[n-1] > s[0]:
		c.Slope = (top - c.Surprisal(s[0])) / (s[n-1] - s[0])
	default:
		c.Slope = 1 / max(math.Abs(s[0]), 1)
	}
	return c
}

// Surprisal is -log10 of the tail probability of score r among the calibration scores:
// (n - pos(r))/(n + 1), pos being r's interpolated position in the sorted scores; 0 for an
// empty calibration or a NaN score.
func (c *Calibration) Surprisal(r float64) float64 {
	s := c.Sorted
	n := len(s)
	if n == 0 || math.IsNaN(r) {
		return 0
	}
	top := math.Log10(float64(n + 1))
	if r > s[n-1] {
		return top + c.Slope*(r-s[n-1])
	}
	i := sort.SearchFloat64s(s, r) // first index with s[i] >= r
	pos := float64(i)
	if s[i] > r && i > 0 {
		pos = float64(i-1) + (r-s[i-1])/(s[i]-s[i-1])
	}
	return top - math.Log10(float64(n)-pos)
}
