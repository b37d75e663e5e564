package detect

import (
	"math"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The recent past (detect.recent_past, docs/BENCHMARKS.md §12.19): before a record's combined
// score is ranked into Recent (recent.go), it gains how far the record is from its series' last
// recent_past records, feature by feature: the largest over the features of the robust z
// |x_j - median_j| / (MAD_j / 0.6745) against those records, as decades, log10(1 + z) (about
// -log10 of z's two-sided tail probability under a Cauchy law of that median and scale, the
// robust z's heavy tail). The sum is -log10 of the product of the two tail probabilities: a
// record ranks high when it is rare under the model and new against the last few minutes alike.
// It is for a model that does not follow its series yet: at replay's cadence a file's first
// model, built from its first records, scores the next thousand, and a plant that drifted since
// puts ordinary jitter decades out (SKAB, §12.16); against the recent past that jitter is
// ordinary, a fault's first readings are not. A feature whose last records have a MAD of 0 (a
// quantised or stuck sensor) takes the mean absolute deviation / 0.7979 instead, and one that
// never varied adds nothing (no spread to measure by; the model's own score already measures a
// departure from a constant, and the sum stays finite). The
// flag, the combined score and every explanation are unchanged. Only the stream's series
// (Validate refuses it with key_by: key: a key's recent past would be recent_past x features x
// 4 bytes more of its budget, keys.max_bytes).

// pastRing is a series' last n records' features (float32, as the batch holds them), a ring of
// rows, with the scratch its robust z needs.
type pastRing struct {
	x        []float32 // n rows of d, row-major; once full, next is the oldest
	n, d     int
	next     int
	filled   int
	col, dev []float64
}

// resize starts the ring afresh for n rows of d features (recent_past or the features changed).
func (p *pastRing) resize(n, d int) {
	*p = pastRing{x: make([]float32, n*d), n: n, d: d, col: make([]float64, 0, n), dev: make([]float64, 0, n)}
}

// decades is log10(1 + z) of row's largest per-feature robust z against the held rows (0 with
// none held), then row joins the ring. NaN values are left out of a feature's past and its z.
func (p *pastRing) decades(row []float32) float64 {
	z := 0.0
	for j, v := range row {
		if math.IsNaN(float64(v)) {
			continue
		}
		p.col = p.col[:0]
		for r := range p.filled {
			if u := p.x[r*p.d+j]; !math.IsNaN(float64(u)) {
				p.col = append(p.col, float64(u))
			}
		}
		if len(p.col) == 0 {
			continue
		}
		med := pastMedian(p.col)
		p.dev = p.dev[:0]
		sum := 0.0
		for _, u := range p.col {
			p.dev = append(p.dev, math.Abs(u-med))
			sum += math.Abs(u - med)
		}
		scale := pastMedian(p.dev) / 0.6745 // (MAD / Φ⁻¹(0.75): a normal law's sd)
		if !(scale > 0) {
			scale = sum / float64(len(p.dev)) / 0.7979 // (mean |dev| / sqrt(2/π): a normal law's sd)
		}
		if scale > 0 { // (else the feature has no spread to measure by: it adds nothing)
			z = max(z, math.Abs(float64(v)-med)/scale)
		}
	}
	copy(p.x[p.next*p.d:(p.next+1)*p.d], row)
	p.next = (p.next + 1) % p.n
	p.filled = min(p.filled+1, p.n)
	return math.Log10(1 + z)
}

// pastMedian is the median of a (the mean of the two middle values for an even count), reordering
// a: a selection, O(len(a)) on average, not a sort.
func pastMedian(a []float64) float64 {
	h := len(a) / 2
	selectKth(a, h)
	if len(a)%2 == 1 {
		return a[h]
	}
	lo := a[0] // the largest of a[:h], all <= a[h]
	for _, v := range a[1:h] {
		lo = max(lo, v)
	}
	return (lo + a[h]) / 2
}

// selectKth reorders a so that a[k] is its k-th smallest, a[:k] <= a[k] <= a[k+1:] (Hoare's
// selection with the median of three as pivot).
func selectKth(a []float64, k int) {
	lo, hi := 0, len(a)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < pivot {
				i++
			}
			for a[j] > pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// pastDecades returns the recent past's decades of every record of b (recent_past, the stream's
// series; nil when off or under key_by: key), in stream order, every record joining the past
// whether scored or not.
func (s *Stage) pastDecades(b *batch.Batch) []float64 {
	n := s.cfg.RecentPast
	if n <= 0 || s.keyed != nil || !b.Resolved() {
		return nil
	}
	d := len(s.features)
	if s.past.n != n || s.past.d != d {
		s.past.resize(n, d)
	}
	cols := make([][]float32, d)
	for j := range cols {
		cols[j] = b.Feature(j)
	}
	out, row := make([]float64, b.Len()), make([]float32, d)
	for i := range out {
		for j, c := range cols {
			row[j] = c[i]
		}
		out[i] = s.past.decades(row)
	}
	return out
}
