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

	// index[j] narrows the two searches of feature j to one bucket (derived from Sorted: built
	// by NewTail and TailOf; a Tail without it searches all of Sorted[j]).
	index []bucketIndex
	// fits[j] are feature j's fitted tails and robust location and scale (derived from Sorted
	// and Spread by TailOf).
	fits []tailFit
}

// TailQuantile is where a feature's empirical distribution hands over to its fitted tails:
// beyond the window's TailQuantile and 1 - TailQuantile quantiles the tail probability falls
// exponentially, at the rate it fell from the 10*TailQuantile quantile to the TailQuantile one.
// The empirical distribution ends at the window's most extreme records, so a record beyond it
// would score the same however far out it is (a +50 degree spike as a record just past the
// noise), and a window that holds earlier spikes would rank a new one among them; the fitted
// tail keeps rising with the distance, and it rests on quantiles that outliers making up less
// than TailQuantile of the window do not move. An exponential tail is heavier than a Gaussian
// one: the scores of Gaussian noise beyond the quantile are conservative (at 4 sd about 8.3
// nats where the Gaussian tail gives 10.4).
const TailQuantile = 0.01

// tailFit is one feature's fitted tails: beyond Hi (the 1 - TailQuantile quantile) the right
// tail's surprisal is HiBase + (x - Hi)/HiScale; below Lo the mirror image. Median and
// RobustSD give the explanation's robust units.
type tailFit struct {
	Lo, Hi           float64
	LoBase, HiBase   float64 // the empirical surprisal at Lo and Hi (continuity)
	LoScale, HiScale float64 // > 0
	Median, RobustSD float64 // RobustSD > 0
}

// bucketIndex splits a feature's value range into equal buckets: start[b] is the number of
// sorted values whose bucket is below b, so the values of bucket b are s[start[b]:start[b+1]].
// The bucket of a value is floor((v - lo) * scale) clamped to [0, len(start)-2]: monotonic in v,
// so every value of a lower bucket is below any x of bucket b and every value of a higher
// bucket is above it, and both counts of x lie within its own bucket. With about 8 values per
// bucket the searches take 3 steps instead of 16 at W = 50,000 (BenchmarkTailScore).
type bucketIndex struct {
	lo    float64
	scale float64
	start []int32
}

// valuesPerBucket sets the index's size: n/8 buckets (25 KB per feature at W = 50,000, next to
// the 200 KB of its sorted values).
const valuesPerBucket = 8

// newBucketIndex indexes ascending s over [s[q], s[n-1-q]] (q = n/256: a few extreme values
// cannot stretch the buckets; the values beyond fall into the end buckets, which stay correct).
// nil when s is too short to gain from it or its inner range is empty.
func newBucketIndex(s []float32) *bucketIndex {
	n := len(s)
	nb := n / valuesPerBucket
	if nb < 4 || n > math.MaxInt32 {
		return nil
	}
	q := n / 256
	lo, hi := float64(s[q]), float64(s[n-1-q])
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	ix := &bucketIndex{lo: lo, scale: float64(nb) / (hi - lo), start: make([]int32, nb+2)}
	b := 0 // ix.start[:b+1] are set: the buckets up to b start at or before i
	for i, v := range s {
		for vb := ix.bucket(v); b < vb; {
			b++
			ix.start[b] = int32(i)
		}
	}
	for b++; b < len(ix.start); b++ {
		ix.start[b] = int32(n)
	}
	return ix
}

// bucket is x's bucket (x not NaN).
func (ix *bucketIndex) bucket(x float32) int {
	f := (float64(x) - ix.lo) * ix.scale
	last := len(ix.start) - 2
	switch {
	case f <= 0:
		return 0
	case f >= float64(last):
		return last
	}
	return int(f)
}

// NewTail builds the per-feature distributions from column-major raw values (finite).
func NewTail(cols [][]float32) *Tail {
	sorted := make([][]float32, len(cols))
	for j, c := range cols {
		sorted[j] = slices.Clone(c)
		slices.Sort(sorted[j])
	}
	return TailOfSorted(sorted)
}

// TailOfSorted is NewTail of columns already in ascending order (a model build's one sort of
// the window), sharing them rather than copying: the caller must not change them afterwards.
func TailOfSorted(sorted [][]float32) *Tail {
	spread := make([]float64, len(sorted))
	for j, s := range sorted {
		n := len(s)
		if n == 0 {
			spread[j] = 1
			continue
		}
		iqr := float64(s[(3*(n-1))/4]) - float64(s[(n-1)/4])
		rng := float64(s[n-1]) - float64(s[0])
		switch {
		case iqr > 0:
			spread[j] = iqr
		case rng > 0:
			spread[j] = rng
		default:
			spread[j] = 1
		}
	}
	return TailOf(sorted, spread)
}

// TailOf is the Tail of already sorted values and their spreads (a model read back from a
// snapshot), with the same search index as NewTail builds.
func TailOf(sorted [][]float32, spread []float64) *Tail {
	t := &Tail{Sorted: sorted, Spread: spread}
	t.buildIndex()
	t.fits = make([]tailFit, len(sorted))
	for j, s := range sorted {
		t.fits[j] = fitTails(s, spread[j])
	}
	return t
}

// fitTails fits feature j's exponential tails from its sorted values (see TailQuantile). The
// scale is the distance from the 10*TailQuantile to the TailQuantile quantile per e-fold of
// probability (ln 10); where that distance is 0 (a discrete feature: more than 9% of the values
// tie at the edge) the feature's spread is the scale, as the window's range was before.
func fitTails(s []float32, spread float64) tailFit {
	n := len(s)
	f := tailFit{LoScale: spread, HiScale: spread, RobustSD: spread / 1.349}
	if n == 0 {
		f.RobustSD = 1
		return f
	}
	q := func(p float64) float64 { return float64(s[int(math.Round(p*float64(n-1)))]) }
	f.Lo, f.Hi = q(TailQuantile), q(1-TailQuantile)
	f.Median = q(0.5)
	if d := (q(10*TailQuantile) - f.Lo) / math.Ln10; d > 0 && !math.IsInf(d, 0) {
		f.LoScale = d
	}
	if d := (f.Hi - q(1-10*TailQuantile)) / math.Ln10; d > 0 && !math.IsInf(d, 0) {
		f.HiScale = d
	}
	base := math.Log(float64(n))
	le, _ := counts(s, float32(f.Lo))
	_, lt := counts(s, float32(f.Hi))
	f.LoBase = base - math.Log(float64(max(le, 1)))
	f.HiBase = base - math.Log(float64(max(n-lt, 1)))
	if iqr := q(0.75) - q(0.25); iqr > 0 && !math.IsInf(iqr, 0) {
		f.RobustSD = iqr / 1.349 // a normal distribution's sd
	}
	return f
}

// Deviation is how far x lies from feature j's median in robust standard deviations (the
// window's interquartile range / 1.349; its spread where that is 0): the explanation's unit.
func (t *Tail) Deviation(j int, x float32) float64 {
	f := &t.fits[j]
	return (float64(x) - f.Median) / f.RobustSD
}

func (t *Tail) buildIndex() {
	t.index = make([]bucketIndex, len(t.Sorted))
	for j, s := range t.Sorted {
		if ix := newBucketIndex(s); ix != nil {
			t.index[j] = *ix
		}
	}
}

// surprisal returns -ln of the rarer of the left and right tail probabilities of x in feature
// j, max(-ln P(X <= x), -ln P(X >= x)), P(X <= x) and P(X >= x) estimated as count/n, the
// window's empirical distribution as ECOD uses it (1/n at and beyond the window's extremes);
// beyond the window's [TailQuantile, 1 - TailQuantile] quantiles the larger of that and the
// fitted exponential tail (TailQuantile), which is continuous at the quantiles and rises
// without bound with the distance (finite for every finite x: the scale is at least a float32
// spacing). The larger of the two: where the window's own tail is heavier than the fit (a
// skewed feature of a labelled table) the empirical rarity ranks as ECOD's does; far out the fit
// does. base is ln(n) (Score computes it once per feature).
//
// One logarithm instead of two, with the same bits as the maximum of both: below the range
// the right tail is ln(n) - ln(n) = 0 and the left one is >= 0 (above it, the mirror image);
// within it, ln is increasing on the integers (consecutive integers up to 2^31 differ by far
// more than an ulp in ln) and base - y decreasing in y, so the larger surprisal is the one of
// the smaller count.
func (t *Tail) surprisal(j int, x float32, base float64) float64 {
	s := t.Sorted[j]
	n := len(s)
	if n == 0 {
		return 0
	}
	var fitted float64
	switch f, xf := &t.fits[j], float64(x); {
	case xf > f.Hi:
		fitted = f.HiBase + beyond((xf-f.Hi)/f.HiScale, base)
	case xf < f.Lo:
		fitted = f.LoBase + beyond((f.Lo-xf)/f.LoScale, base)
	}
	var le, lt int // #{v <= x}, #{v < x}
	if ix := &t.index[j]; ix.start != nil && x == x {
		b := ix.bucket(x)
		from := int(ix.start[b])
		le, lt = counts(s[from:ix.start[b+1]], x)
		le, lt = le+from, lt+from
	} else {
		le, lt = counts(s, x)
	}
	ge := n - lt
	return max(fitted, base-math.Log(float64(max(min(le, ge), 1))))
}

// beyond is the fitted tail's surprisal u e-folds past its quantile: u up to ln(n), then
// growing as the logarithm of the excess, so that one feature far out still ranks by how far
// but cannot outweigh every other feature's evidence linearly (a skewed feature of a labelled
// table whose top decile is narrow would otherwise decide every ranking alone).
func beyond(u, base float64) float64 {
	if u <= base {
		return u
	}
	return base + math.Log1p(u-base)
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
	if len(t.fits) != len(t.Sorted) { // a Tail built as a literal: no index, no fits
		t = TailOf(t.Sorted, t.Spread)
	}
	for i := range out {
		var sum float64
		for j := range q {
			sum += t.surprisal(j, q[j][i], bases[j])
		}
		out[i] = sum
	}
}

// Calibration maps a detector's raw score (higher = more outlying) to the surprisal of its
// tail probability among the window's own scores: -log10 P(S >= score), with P estimated
// from the sorted calibration scores, interpolated between them so that it ranks exactly as
// the raw score does, up to the calibration's 1 - TailQuantile quantile (the knee); beyond it
// an exponential tail fitted to the scores from the 1 - 10*TailQuantile quantile to the knee
// (one decade of probability) keeps rising with the score. Beyond the knee the calibration
// records' own order no longer counts: a window that holds a few outliers (fewer than
// TailQuantile of it) would otherwise make their scores its top and squeeze every record
// beyond the bulk, near or far, into the same few hundredths of a decade.
type Calibration struct {
	// Sorted are the calibration scores, ascending (finite).
	Sorted []float64
	// Slope is the surprisal added per unit of raw score beyond the knee: the rate at which
	// the surprisal rose over the decade below it (derived from Sorted: CalibrationOf).
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
	return CalibrationOf(s)
}

// CalibrationOf is the Calibration of finite scores already in ascending order (shared, not
// copied): its slope is derived from them (a snapshot stores the scores).
func CalibrationOf(s []float64) Calibration {
	c := Calibration{Sorted: s}
	n := len(s)
	if n == 0 {
		return c
	}
	ki, k := c.knee()
	r90 := s[int(math.Round((1-10*TailQuantile)*float64(n-1)))]
	switch {
	case k > r90:
		c.Slope = (c.empirical(k, ki) - c.empirical(r90, ki)) / (k - r90)
	case s[n-1] > s[0]:
		c.Slope = (math.Log10(float64(n+1)) - c.empirical(s[0], ki)) / (s[n-1] - s[0])
	default:
		c.Slope = 1 / max(math.Abs(s[0]), 1)
	}
	return c
}

// knee is the index and value of the 1 - TailQuantile quantile of the calibration scores.
func (c *Calibration) knee() (int, float64) {
	i := int(math.Round((1 - TailQuantile) * float64(len(c.Sorted)-1)))
	return i, c.Sorted[i]
}

// empirical is -log10 of the interpolated tail probability (n - pos(r))/(n + 1) of r among
// the calibration scores up to the knee (r <= the knee's value, ki its index).
func (c *Calibration) empirical(r float64, ki int) float64 {
	s := c.Sorted
	n := len(s)
	i := sort.SearchFloat64s(s[:ki+1], r) // first index with s[i] >= r
	pos := float64(i)
	if i <= ki && s[i] > r && i > 0 {
		pos = float64(i-1) + (r-s[i-1])/(s[i]-s[i-1])
	}
	return math.Log10(float64(n+1)) - math.Log10(float64(n)-pos)
}

// Surprisal is -log10 of the tail probability of score r among the calibration scores (see
// Calibration); 0 for an empty calibration or a NaN score. Monotone in r, continuous, and
// finite for every finite r.
func (c *Calibration) Surprisal(r float64) float64 {
	if len(c.Sorted) == 0 || math.IsNaN(r) {
		return 0
	}
	ki, k := c.knee()
	if r > k {
		return c.empirical(k, ki) + c.Slope*(r-k)
	}
	return c.empirical(r, ki)
}
