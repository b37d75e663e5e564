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
	"unsafe"
)

// Tail is the window's empirical distribution, one feature at a time.
type Tail struct {
	// Sorted[j] is the window's feature j, ascending (raw units).
	Sorted [][]float32
	// Spread[j] is the unit in which the tail keeps falling beyond the window's range: the
	// interquartile range; where that is 0 (a quantised or mostly constant feature: over half
	// the values tie), the mean absolute deviation from the median on the same scale
	// (tiedSpread); 1 for a constant feature (always > 0).
	Spread []float64

	// index[j] narrows the two searches of feature j to one bucket (derived from Sorted: built
	// by NewTail and TailOf; a Tail without it searches all of Sorted[j]).
	index []bucketIndex
	// robust[j] is feature j's median and robust sd (derived from Sorted and Spread by TailOf).
	robust []robust
}

// robust is one feature's median and robust standard deviation (the interquartile range /
// 1.349, or the spread / 1.349 where that is 0: tiedSpread's mean absolute deviation / 0.7979):
// the explanation's units.
type robust struct {
	Median, SD float64
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

// indexBuckets is the number of buckets newBucketIndex gives s at most (0: none).
func indexBuckets(s []float32) int {
	if nb := len(s) / valuesPerBucket; nb >= 4 && len(s) <= math.MaxInt32 {
		return nb
	}
	return 0
}

// newBucketIndex indexes ascending s over [s[q], s[n-1-q]] (q = n/256: a few extreme values
// cannot stretch the buckets; the values beyond fall into the end buckets, which stay correct),
// its starts in room's first indexBuckets(s)+2 values (zeroed, as make leaves them). false when s
// is too short to gain from it or its inner range is empty (room untouched).
func newBucketIndex(s []float32, room []int32) (bucketIndex, bool) {
	n := len(s)
	nb := indexBuckets(s)
	if nb == 0 {
		return bucketIndex{}, false
	}
	q := n / 256
	lo, hi := float64(s[q]), float64(s[n-1-q])
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return bucketIndex{}, false
	}
	ix := bucketIndex{lo: lo, scale: float64(nb) / (hi - lo), start: room[: nb+2 : nb+2]}
	// start[b] is the count of values in the buckets below b: each bucket's count, then their
	// running sums (a loop of counts without a branch on the values: a key's model builds an
	// index for each of its features, where the branch that stepped through the buckets value
	// by value was mispredicted about every other value). NaNs, sorted first, count in bucket 0:
	// every bucket's values start after them, as the values' first places did.
	for _, v := range s {
		b := 0
		if v == v {
			b = ix.bucket(v)
		}
		ix.start[b+1]++
	}
	for b := 1; b < len(ix.start); b++ {
		ix.start[b] += ix.start[b-1]
	}
	return ix, true
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
	return TailOfSortedIn(sorted, make([]float64, len(sorted)))
}

// TailOfSortedIn is TailOfSorted with the spreads in spread's storage (len(sorted) of it: a
// key's model puts its small float64 arrays in one allocation).
func TailOfSortedIn(sorted [][]float32, spread []float64) *Tail {
	spread = spread[:len(sorted):len(sorted)]
	for j, s := range sorted {
		spread[j] = spreadOf(s)
	}
	return TailOf(sorted, spread)
}

// spreadOf is the Spread of a feature's ascending window values: the interquartile range; where
// that is 0 but not the range, tiedSpread; else (constant or empty) 1. spreadOf / 1.349 is the
// feature's robust sd, the explanations' unit (Deviation). (The distance score's space has its
// own unit, a winsorised sd: calibrate.go's standardisation.)
func spreadOf(s []float32) float64 {
	n := len(s)
	if n == 0 {
		return 1
	}
	iqr := float64(s[(3*(n-1))/4]) - float64(s[(n-1)/4])
	switch {
	case iqr > 0:
		return iqr
	case s[n-1] > s[0]:
		return tiedSpread(s)
	}
	return 1
}

// tiedSpread is the unit of a feature whose interquartile range is 0 but not its range
// (ascending s): the mean absolute deviation from the median, / 0.7979 (sqrt(2/pi), a normal
// distribution's mean absolute deviation in sd) for an sd, * 1.349 for the interquartile range's
// scale: the modified z-score's unit where the MAD is 0 (Iglewicz and Hoaglin; IBM's
// 1.253314 * mean absolute deviation). The range it replaces counts the window's rarest values
// (a quantised sensor's occasional step to the next quantum): a never-seen step one quantum past
// them was less than one unit out, ranked as a record barely past a continuous feature's
// largest value; with this unit such a step is as far out as the share of records off the
// median is small (one in 30: about 20 units). Positive and finite for finite s with s[0] < s[n-1]
// (a value off the median adds at least its distance, > 0).
func tiedSpread(s []float32) float64 {
	n := len(s)
	med := float64(s[(n-1)/2])
	var sum float64
	for _, v := range s {
		sum += math.Abs(float64(v) - med)
	}
	return sum / float64(n) / 0.7979 * 1.349 // (float32 values: no float64 sum overflows)
}

// TailOf is the Tail of already sorted values and their spreads (a model read back from a
// snapshot), with the same search index as NewTail builds.
func TailOf(sorted [][]float32, spread []float64) *Tail {
	t := &Tail{Sorted: sorted, Spread: spread}
	t.buildIndex()
	t.robust = make([]robust, len(sorted))
	for j, s := range sorted {
		t.robust[j] = robustOf(s, spread[j])
	}
	return t
}

// robustOf is a feature's median and robust sd from its sorted values.
func robustOf(s []float32, spread float64) robust {
	if len(s) == 0 {
		return robust{SD: 1}
	}
	r := robust{Median: quantile(s, 0.5), SD: spread / 1.349}
	if iqr, ok := scaleIQR(s); ok {
		r.SD = iqr / 1.349 // a normal distribution's sd
	}
	return r
}

// quantile is the value of rank round(p (n-1)) of the ascending, non-empty s.
func quantile(s []float32, p float64) float64 {
	return float64(s[int(math.Round(p*float64(len(s)-1)))])
}

// scaleIQR is the ascending s's interquartile range and whether it is a scale (> 0, finite).
func scaleIQR(s []float32) (float64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	iqr := quantile(s, 0.75) - quantile(s, 0.25)
	return iqr, iqr > 0 && !math.IsInf(iqr, 0)
}

// Deviation is how far x lies from feature j's median in robust standard deviations (the
// window's interquartile range / 1.349; its spread where that is 0): the explanation's unit.
func (t *Tail) Deviation(j int, x float32) float64 {
	r := &t.robust[j]
	return (float64(x) - r.Median) / r.SD
}

// Scaled reports whether feature j's robust sd is its interquartile range's: false where the
// window's middle half is one value (a count's 0s, a zero-inflated amount's) and the sd is its
// spread's, a scale its deviations share with no other feature's or key's.
func (t *Tail) Scaled(j int) bool {
	_, ok := scaleIQR(t.Sorted[j])
	return ok
}

// DeviationMemory is where Deviation reads (every feature's median and robust sd) and its length
// in bytes, for a caller's prefetch (a key's decisions under detect.keys.tail: fleet read it for
// every record, a cache miss each at many keys); nil and 0 for a Tail without them.
func (t *Tail) DeviationMemory() (unsafe.Pointer, uintptr) {
	if len(t.robust) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(unsafe.SliceData(t.robust)), uintptr(len(t.robust)) * unsafe.Sizeof(robust{})
}

// buildIndex makes each feature's bucketIndex (none where newBucketIndex gives none), every
// feature's starts in one allocation: a key's model (3 features at the defaults) made three, and
// a bucketIndex struct each that was garbage at once, 6 of a key build's 14 allocations
// (docs/BENCHMARKS.md §13.1.16).
func (t *Tail) buildIndex() {
	t.index = make([]bucketIndex, len(t.Sorted))
	total := 0
	for _, s := range t.Sorted {
		if nb := indexBuckets(s); nb > 0 {
			total += nb + 2
		}
	}
	room := make([]int32, total)
	for j, s := range t.Sorted {
		if ix, ok := newBucketIndex(s, room); ok {
			t.index[j] = ix
			room = room[len(ix.start):]
		}
	}
}

// surprisal returns -ln of the rarer of the left and right tail probabilities of x in feature
// j, max(-ln P(X <= x), -ln P(X >= x)): P(X <= x) and P(X >= x) estimated as count/n, the
// window's empirical distribution as ECOD uses it, and 1/n for a record at or beyond the
// window's extreme (a tail is never 0). Beyond the window's range the tail keeps falling,
// exponentially in units of Spread[j] up to 1/n^2, then ever more slowly (beyond): records
// beyond the range rank by how far beyond without bound (a +50 degree spike above one just past
// the noise), yet one feature cannot outweigh the others' evidence linearly. base is ln(n)
// (Score computes it once per feature).
//
// One logarithm instead of two, with the same bits as the maximum of both: below the range
// the right tail is ln(n) - ln(n) = 0 and the left one is >= 0 (above it, the mirror image);
// within it, ln is increasing on the integers (consecutive integers up to 2^31 differ by far
// more than an ulp in ln) and base - y decreasing in y, so the larger surprisal is the one of
// the smaller count.
func (t *Tail) surprisal(j int, x float32, base float64) float64 {
	s := t.Sorted[j]
	n := len(s)
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
	switch {
	case n > 0 && x < s[0]:
		return base - logInt(max(le, 1)) + beyond((float64(s[0])-float64(x))/t.Spread[j], base)
	case n > 0 && x > s[n-1]:
		return base - logInt(max(ge, 1)) + beyond((float64(x)-float64(s[n-1]))/t.Spread[j], base)
	}
	return base - logInt(max(min(le, ge), 1))
}

// The logarithms of the counts: a tail's surprisal and a calibration's are logarithms of
// integers up to the window's or the calibration's size (a key's 200, the global calibration's
// 4096), looked up rather than computed (ln and log10 were a third of a key's model build and of
// a record's three calibrations). The tables hold math.Log's and math.Log10's own results: the
// same bits.
const logTableSize = 4098

var lnTable, log10Table = func() (ln, lg *[logTableSize]float64) {
	ln, lg = new([logTableSize]float64), new([logTableSize]float64)
	for i := range ln {
		ln[i], lg[i] = math.Log(float64(i)), math.Log10(float64(i))
	}
	return ln, lg
}()

// logInt is math.Log(float64(m)) for m >= 0.
func logInt(m int) float64 {
	if uint(m) < logTableSize {
		return lnTable[m]
	}
	return math.Log(float64(m))
}

// log10Int is math.Log10(float64(m)) for m >= 0.
func log10Int(m int) float64 {
	if uint(m) < logTableSize {
		return log10Table[m]
	}
	return math.Log10(float64(m))
}

// TailSurprisal is the surprisal Score gives a value within the range of a feature's n window
// values, lt of them below it and le at most it (a window's own record, whose counts its place
// in the sorted window gives: no search).
func TailSurprisal(n, lt, le int) float64 {
	return logInt(n) - logInt(max(min(le, n-lt), 1))
}

// beyond is the surprisal u spreads past the window's extreme: u up to ln(n) (the tail falls
// to 1/n^2), then growing as the logarithm of the excess, so that one feature far out still
// ranks by how far, without bound and finite for every finite value, but cannot outweigh every
// other feature's evidence linearly.
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
	t.ScoreExcept(q, out, nil)
}

// ScoreExcept is Score of the rows not marked in skip (nil: every row), the marked ones' out
// NaN: each row's score is Score's, bit for bit (the rows are scored one by one).
func (t *Tail) ScoreExcept(q [][]float32, out []float64, skip []bool) {
	var stack [8]float64 // (a record scored alone, as the keyed CPU path does, allocates nothing)
	bases := stack[:0]
	if len(q) > len(stack) {
		bases = make([]float64, 0, len(q))
	}
	for j := range q {
		bases = append(bases, logInt(len(t.Sorted[j])))
	}
	if len(t.robust) != len(t.Sorted) { // a Tail built as a literal: no index
		t = TailOf(t.Sorted, t.Spread)
	}
	for i := range out {
		if skip != nil && skip[i] {
			out[i] = math.NaN()
			continue
		}
		var sum float64
		for j := range q {
			sum += t.surprisal(j, q[j][i], bases[j])
		}
		out[i] = sum
	}
}
