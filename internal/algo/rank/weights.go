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
	if 10*top >= n { // every record is in the other's wide top: both confirmed, equal weights
		return 0.5, 0.5
	}
	ra, oa := ranks(a)
	rb, ob := ranks(b)
	kth := func(x []float64, order []int, k int) float64 { return x[order[n-k]] }
	ca := confirmation(a, b, kth(a, oa, top), kth(b, ob, 10*top))
	cb := confirmation(b, a, kth(b, ob, top), kth(a, oa, 10*top))
	e := AgreementGamma * max(pearson(ra, rb), 0) // Spearman's rho
	pa, pb := math.Pow(ca, e), math.Pow(cb, e)    // c > 0; e = 0 (no agreement): equal weights
	// (Each from its own share, so that swapping a and b swaps the bits; the sum is 1 within
	// an ulp.)
	clamp := func(w float64) float64 { return min(max(w, WeightFloor), 1-WeightFloor) }
	return clamp(pa / (pa + pb)), clamp(pb / (pa + pb))
}

// The constants of AgreementWeights (docs/BENCHMARKS.md §11.2.1).
const (
	// ConfirmTop is the fewest top records a confirmation is measured on: below it (a window of
	// fewer than 2,000 calibration records) the share of a few records is noise. A window of at
	// most 10*ConfirmTop records (a key's model, keys.window 200) gets equal weights, at no cost.
	ConfirmTop = 20
	// AgreementGamma sharpens the weights with the agreement: at rho = 0.8 a detector confirmed
	// half as often as the other would get 0.5^3.2 / (1 + 0.5^3.2), about 0.1 of the weight,
	// before the floor.
	AgreementGamma = 4
	// WeightFloor is the least weight of either detector.
	WeightFloor = 0.2
)

// confirmation is the share of the records with x at or above tx (x's top records) whose y is
// at or above ty (within y's wide top), counted with one confirmed record more (add-one
// smoothing): never 0, so that the weights move continuously with the agreement (0^e would
// drop a detector at any agreement above 0).
func confirmation(x, y []float64, tx, ty float64) float64 {
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

// spearman is the rank correlation of x and y (Pearson's of their ranks, ties averaged); 0 when
// either is constant.
func spearman(x, y []float64) float64 {
	rx, _ := ranks(x)
	ry, _ := ranks(y)
	return pearson(rx, ry)
}

// pearson is the correlation of two rankings (ranks with averaged ties: their mean is
// (n-1)/2); 0 when either is constant.
func pearson(rx, ry []float64) float64 {
	mean := float64(float64(len(rx)-1) / 2) // (rounded: the compiler's *0.5 is never fused into rx[i]-mean)
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mean, ry[i]-mean
		sxy += float64(dx * dy)
		sxx += float64(dx * dx)
		syy += float64(dy * dy)
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// ranks are the 0-based ranks of x, ascending, tied values sharing the mean of their ranks, and
// the records in ascending order of x (ties in index order; NaN lowest, as cmp.Compare orders it).
func ranks(x []float64) (r []float64, order []int) {
	order = make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		if c := cmp.Compare(x[i], x[j]); c != 0 {
			return c
		}
		return cmp.Compare(i, j)
	})
	r = make([]float64, len(x))
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && cmp.Compare(x[order[hi]], x[order[lo]]) == 0 {
			hi++
		}
		for _, i := range order[lo:hi] {
			r[i] = float64(lo+hi-1) / 2
		}
		lo = hi
	}
	return r, order
}
