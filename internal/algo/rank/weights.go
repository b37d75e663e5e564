package rank

import (
	"cmp"
	"math"
	"slices"
)

// AgreementWeights weights two detectors for their combined score from their raw scores a and b
// of the same window records (a[i] and b[i] score record i; higher = more outlying), without
// labels: an unsupervised model selection by pseudo ground truth (as in LSCP, Zhao et al. 2019,
// and SELECT, Rayana & Akoglu 2016: a detector is trusted where its top records are ones the
// other detectors also rank high), gated by how much the two agree at all.
//
//   - Confirmation c of a detector: the share of its top records (its top TailQuantile of the
//     records, at least ConfirmTop of them) that the other detector ranks within its own top
//     ten times as many (the top decile at the defaults: the band of the window from which a
//     calibration fits its tail). A detector whose top records are its own alone (isolated in a
//     view the other does not share) is confirmed less.
//   - Agreement rho: Spearman's rank correlation of a and b over the records. Where the two rank
//     the window alike, the view they share makes the other detector a fair judge of a top
//     record; where they rank it differently (rho near 0: each sees a structure of its own, such
//     as contextual anomalies only the joint view sees), a top record the other does not confirm
//     says nothing against it, and the weights stay equal.
//
// The weights are proportional to c^(AgreementGamma * max(rho, 0)), normalised to sum 1 and kept
// within [WeightFloor, 1 - WeightFloor], so that no detector is ever dropped: a detector alone in
// seeing a kind of anomaly keeps enough weight for its fitted tail to make the anomaly
// significant. Equal scores are tied (the top sets hold every record tied with their last, ranks
// of ties are averaged), so the weights depend on the records and not on their order. Equal
// weights (0.5, 0.5) for fewer than two records.
//
// docs/BENCHMARKS.md §11.2.1 has the data that chose ConfirmTop, the decile, AgreementGamma and
// WeightFloor, and the variants that lost.
func AgreementWeights(a, b []float64) (wa, wb float64) {
	n := len(a)
	if n < 2 || len(b) != n {
		return 0.5, 0.5
	}
	top := max(int(math.Ceil(TailQuantile*float64(n))), ConfirmTop)
	ca, cb := confirmation(a, b, top, 10*top), confirmation(b, a, top, 10*top)
	e := AgreementGamma * max(spearman(a, b), 0)
	pa, pb := math.Pow(ca, e), math.Pow(cb, e) // c > 0; e = 0 (no agreement): equal weights
	// (Each from its own share, so that swapping a and b swaps the bits; the sum is 1 within
	// an ulp.)
	clamp := func(w float64) float64 { return min(max(w, WeightFloor), 1-WeightFloor) }
	return clamp(pa / (pa + pb)), clamp(pb / (pa + pb))
}

// The constants of AgreementWeights (docs/BENCHMARKS.md §11.2.1).
const (
	// ConfirmTop is the fewest top records a confirmation is measured on: below it (a window of
	// fewer than 2,000 calibration records) the share of a few records is noise. A window of at
	// most 10*ConfirmTop records (a key's model, keys.window 200) gets equal weights.
	ConfirmTop = 20
	// AgreementGamma sharpens the weights with the agreement: at rho = 0.8 a detector confirmed
	// half as often as the other would get 0.5^3.2 / (1 + 0.5^3.2), about 0.1 of the weight,
	// before the floor.
	AgreementGamma = 4
	// WeightFloor is the least weight of either detector.
	WeightFloor = 0.2
)

// confirmation is the share of x's top records (those at or above x's top-th largest value)
// that lie at or above y's wide-th largest value (every record when wide >= len(y)), counted
// with one confirmed record more (add-one smoothing): never 0, so that the weights move
// continuously with the agreement (0^e would drop a detector at any agreement above 0).
func confirmation(x, y []float64, top, wide int) float64 {
	tx, ty := kthLargest(x, top), kthLargest(y, wide)
	in, of := 0, 0
	for i, v := range x {
		if cmp.Compare(v, tx) >= 0 {
			of++
			if cmp.Compare(y[i], ty) >= 0 {
				in++
			}
		}
	}
	return float64(in+1) / float64(of+1)
}

// kthLargest is the k-th largest of x (its smallest for k >= len(x); NaN ranks lowest, as
// cmp.Compare orders it).
func kthLargest(x []float64, k int) float64 {
	s := slices.Clone(x)
	slices.SortFunc(s, cmp.Compare[float64])
	return s[max(len(s)-k, 0)]
}

// spearman is the rank correlation of x and y (Pearson's of their ranks, ties averaged); 0 when
// either is constant.
func spearman(x, y []float64) float64 {
	rx, ry := ranks(x), ranks(y)
	mean := float64(len(x)-1) / 2 // the mean of any ranks with averaged ties
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mean, ry[i]-mean
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// ranks are the 0-based ranks of x, ascending, tied values sharing the mean of their ranks.
func ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int { return cmp.Compare(x[i], x[j]) })
	r := make([]float64, len(x))
	for lo := 0; lo < len(idx); {
		hi := lo + 1
		for hi < len(idx) && cmp.Compare(x[idx[hi]], x[idx[lo]]) == 0 {
			hi++
		}
		for _, i := range idx[lo:hi] {
			r[i] = float64(lo+hi-1) / 2
		}
		lo = hi
	}
	return r
}
