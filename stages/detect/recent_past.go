package detect

import (
	"math"
	"slices"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/outlierd/outlierd/internal/algo/rank"
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
// departure from a constant, and the sum stays finite). The flag, the combined score and every
// explanation are unchanged. Only the stream's series (Validate refuses it with key_by: key: a
// key's recent past would be recent_past x features x 4 bytes more of its budget,
// keys.max_bytes).

// pastRing is a series' last n records' features (float32, as the batch holds them), a ring of
// rows, and each feature's held values in order (NaNs left out), so that a record's median and
// MAD take a binary search each, not two selections over n values: a record costs per feature
// three binary searches and a move of the sorted values between the oldest's and the new one's
// places, about 0.12 µs a feature at n = 100 against two selections' 1.6 µs (BENCHMARKS
// §12.21); a MAD of 0 (a quantised sensor) adds the mean absolute deviation's O(n) sum. The
// sorted values double the ring's memory (n x features x 8 bytes more). The figures are the
// definition's exactly (the same float64 values, the same middle elements, the mean absolute
// deviation summed in the sorted order: TestPastRingMatchesDefinition).
type pastRing struct {
	x      []float32   // n rows of d, row-major; once full, next is the oldest
	sorted [][]float64 // per feature, the held rows' non-NaN values, ascending
	n, d   int
	next   int
	filled int
}

// resize starts the ring afresh for n rows of d features (recent_past or the features changed).
func (p *pastRing) resize(n, d int) {
	*p = pastRing{x: make([]float32, n*d), sorted: make([][]float64, d), n: n, d: d}
	for j := range p.sorted {
		p.sorted[j] = make([]float64, 0, n)
	}
}

// decades is log10(1 + z) of row's largest per-feature robust z against the held rows (0 with
// none held), then row joins the ring. NaN values are left out of a feature's past and its z.
func (p *pastRing) decades(row []float32) float64 {
	z := 0.0
	for j, v := range row {
		if math.IsNaN(float64(v)) {
			continue
		}
		s := p.sorted[j]
		if len(s) == 0 {
			continue
		}
		med, scale := medianMAD(s)
		scale /= 0.6745 // (MAD / Φ⁻¹(0.75): a normal law's sd)
		if !(scale > 0) {
			sum := 0.0
			for _, u := range s {
				sum += math.Abs(u - med)
			}
			scale = sum / float64(len(s)) / 0.7979 // (mean |dev| / sqrt(2/π): a normal law's sd)
		}
		if scale > 0 { // (else the feature has no spread to measure by: it adds nothing)
			z = max(z, math.Abs(float64(v)-med)/scale)
		}
	}
	old := p.x[p.next*p.d : (p.next+1)*p.d]
	for j, v := range row {
		s, out, in := p.sorted[j], p.filled == p.n && !math.IsNaN(float64(old[j])), !math.IsNaN(float64(v))
		switch {
		case out && in: // (the oldest leaves and v comes in: only the values between them move)
			ko, kn := rank.SearchFloat64s(s, float64(old[j])), rank.SearchFloat64s(s, float64(v))
			if kn > ko {
				copy(s[ko:kn-1], s[ko+1:kn])
				s[kn-1] = float64(v)
			} else {
				copy(s[kn+1:ko+1], s[kn:ko])
				s[kn] = float64(v)
			}
		case out:
			k := rank.SearchFloat64s(s, float64(old[j]))
			s = slices.Delete(s, k, k+1)
		case in:
			k := rank.SearchFloat64s(s, float64(v))
			s = slices.Insert(s, k, float64(v))
		}
		p.sorted[j] = s
	}
	copy(old, row)
	p.next = (p.next + 1) % p.n
	p.filled = min(p.filled+1, p.n)
	return math.Log10(1 + z)
}

// medianMAD is the median of the ascending values s and their median absolute deviation from
// it (the mean of the two middle values for an even count, both). The deviations below the
// median, read from the median outwards, ascend, and so do those above: the MAD is the middle
// of two merged ascending sequences, found by a binary search over how many come from the
// lower one (O(log n)).
func medianMAD(s []float64) (med, mad float64) {
	m := len(s)
	med = float64((s[(m-1)/2] + s[m/2]) / 2) // (rounded here: never fused with a deviation's subtraction, .ci/nofma.sh)
	// p splits s[:p] < med <= s[p:]; deviation i below is med - s[p-1-i], above s[p+i] - med.
	// p <= m/2 (s[m/2] >= med), and p = m/2 unless ties reach below the middle.
	p := m / 2
	if p > 0 && !(s[p-1] < med) {
		p = rank.SearchFloat64s(s[:p], med)
	}
	nl, nh := p, m-p
	k := m / 2 // the merged deviations' k-th (0-based), with the (k-1)-th for an even m
	// Take i from below and k+1-i from above: the smallest i whose (i+1)-th below is not
	// smaller than the (k+1-i)-th above is a merge's prefix.
	a, b := max(0, k+1-nh), min(k+1, nl)
	for a < b {
		i := int(uint(a+b) >> 1)
		if j := k + 1 - i; j >= 1 && med-s[p-1-i] < s[p+j-1]-med {
			a = i + 1
		} else {
			b = i
		}
	}
	i, j := a, k+1-a
	// The prefix's largest is the k-th; for an even m its second largest is the (k-1)-th,
	// both among the last two taken from either side.
	top, second := math.Inf(-1), math.Inf(-1)
	take := func(v float64) {
		if v > top {
			top, second = v, top
		} else if v > second {
			second = v
		}
	}
	for t := 1; t <= 2; t++ {
		if i >= t {
			take(med - s[p-i+t-1])
		}
		if j >= t {
			take(s[p+j-t] - med)
		}
	}
	if m%2 == 1 {
		return med, top
	}
	return med, (second + top) / 2
}

// staleDecades is the combined score (a mean of -log10 tail probabilities) from which a record
// counts as beyond its model for recent_past_weight: stale: a 1% tail, which a model that fits
// its series gives to about 1% of its records.
const staleDecades = 2

// exceedRing is whether each of the stream's last n scored records reached staleDecades, and
// how many did.
type exceedRing struct {
	over             []bool
	next, held, hits int
}

// pastWeight is the weight of a scored record's recent past decades (recent_past_weight), then,
// under stale, the record's combined score joins the share: the share of the last recent_past
// scored records (0 before the first), not counting this one, so that a record's own score
// does not raise its own weight.
func (s *Stage) pastWeight(score float64) float64 {
	if s.cfg.RecentPastWeight != PastWeightStale {
		return 1
	}
	e, n := &s.stale, s.cfg.RecentPast
	if len(e.over) != n {
		*e = exceedRing{over: make([]bool, n)}
	}
	w := 0.0
	if e.held > 0 {
		w = float64(e.hits) / float64(e.held)
	}
	if e.held == n && e.over[e.next] {
		e.hits--
	}
	e.over[e.next] = score >= staleDecades
	if e.over[e.next] {
		e.hits++
	}
	e.next = (e.next + 1) % n
	e.held = min(e.held+1, n)
	return w
}

// pastDecades returns the recent past's decades of every record of b (recent_past, the stream's
// series; nil when off or under key_by: key), in stream order, every record joining the past
// whether scored or not. A warming value (batch.Batch.Warming: a rolling column whose window
// was still filling) is read as missing: it adds nothing to its record's decades and does not
// join the past. Not the model's imputation, which the other scores read (imputedColumns, from
// the model's sample): the past measures a record against the stream's last records, and a
// model built before a drift has its sample far out against them (the recent past's reason to
// exist); nor is there a model before the first one, when beforeModel still feeds the past (TestRecentPastSkipsWarming).
func (s *Stage) pastDecades(b *batch.Batch) []float64 {
	n := s.cfg.RecentPast
	if n <= 0 || s.keyed != nil || !b.Resolved() {
		return nil
	}
	d := len(s.features)
	if s.past.n != n || s.past.d != d {
		s.past.resize(n, d)
	}
	cols, warming := make([][]float32, d), make([]*array.Float32, d)
	for j := range cols {
		cols[j], warming[j] = b.Feature(j), b.Warming(j)
	}
	nan := float32(math.NaN())
	out, row := make([]float64, b.Len()), make([]float32, d)
	for i := range out {
		for j, c := range cols {
			row[j] = c[i]
			if warming[j] != nil && warming[j].IsNull(i) {
				row[j] = nan // (a window still filling: read as missing, warmup.go)
			}
		}
		out[i] = s.past.decades(row)
	}
	return out
}
