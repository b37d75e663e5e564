package rank

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// agreeingDetectors are two detectors' scores of n records that rank them alike (a shared
// outlyingness z plus each one's own noise: Spearman about 0.9), with b's top 1% replaced by
// records that b alone scores far out and a finds ordinary: b's top is its own, a's is b's too.
func agreeingDetectors(n int, seed uint64) (a, b []float64, planted []int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	a, b = make([]float64, n), make([]float64, n)
	for i := range a {
		z := rng.NormFloat64()
		a[i], b[i] = z+0.3*rng.NormFloat64(), z+0.3*rng.NormFloat64()
	}
	for len(planted) < n/100 {
		if i := rng.IntN(n); math.Abs(a[i]) < 0.5 && b[i] < 100 {
			b[i] = 100 + float64(len(planted))
			planted = append(planted, i)
		}
	}
	return a, b, planted
}

// TestAgreementWeightsTrustTheConfirmedDetector: where the detectors rank the window alike, the
// one whose top records the other does not confirm gets the least weight (the floor), the
// other the most, whichever argument it is.
func TestAgreementWeightsTrustTheConfirmedDetector(t *testing.T) {
	a, b, _ := agreeingDetectors(4096, 1)
	wa, wb := AgreementWeights(a, b)
	if wa != 1-WeightFloor || wb != WeightFloor {
		t.Errorf("weights %v, %v: want %v for the confirmed detector, %v for the other", wa, wb, 1-WeightFloor, WeightFloor)
	}
	if wb2, wa2 := AgreementWeights(b, a); wa2 != wa || wb2 != wb {
		t.Errorf("arguments swapped: %v, %v; want %v, %v", wb2, wa2, wb, wa)
	}
	// Both tops confirmed (b without its planted records): equal weights up to the noise of
	// the two tops' overlap (measured 0.48-0.52 over seeds; 0.1 is far from the floor's 0.2).
	a, b, _ = agreeingDetectors(4096, 2)
	for i := range b {
		b[i] = min(b[i], 5)
	}
	for i := range b {
		if b[i] == 5 {
			b[i] = a[i]
		}
	}
	if wa, wb := AgreementWeights(a, b); math.Abs(wa-0.5) > 0.1 || math.Abs(wa+wb-1) > 1e-15 {
		t.Errorf("both tops confirmed: weights %v, %v; want about 0.5 each", wa, wb)
	}
}

// TestAgreementWeightsEqualWithoutAgreement: where the detectors do not rank the window alike
// (each sees a structure of its own, as the per-feature view cannot see a contextual anomaly),
// an unconfirmed top says nothing against its detector: equal weights, exactly, although a's
// top is confirmed by b and b's is not.
func TestAgreementWeightsEqualWithoutAgreement(t *testing.T) {
	n := 4096
	rng := rand.New(rand.NewPCG(3, 1))
	a, b := make([]float64, n), make([]float64, n)
	for i := range a {
		a[i] = rng.NormFloat64()
		b[i] = rng.NormFloat64() - 0.3*a[i] // the bulk a little the other way round
	}
	for i := range a {
		switch {
		case a[i] > 2.2: // a's top 1% and more: within b's top decile
			b[i] = 3 + 0.01*a[i]
		case math.Abs(a[i]) < 0.5 && rng.Float64() < 0.03: // b's top, a finds ordinary
			b[i] = 100 + a[i]
		}
	}
	if rho := spearman(a, b); rho >= 0 {
		t.Fatalf("the construction's Spearman %v, want < 0", rho)
	}
	if ca, cb := confirmation(a, b, kthLargest(a, 41), kthLargest(b, 410)), confirmation(b, a, kthLargest(b, 41), kthLargest(a, 410)); ca < 0.9 || cb > 0.1 {
		t.Fatalf("the construction's confirmations %v, %v: want a's top confirmed, b's not", ca, cb)
	}
	if wa, wb := AgreementWeights(a, b); wa != 0.5 || wb != 0.5 {
		t.Errorf("weights %v, %v: want 0.5 each", wa, wb)
	}
}

// TestAgreementWeightsSmallWindowEqual: a window of at most 10*ConfirmTop records (a key's
// model) has no top small enough to tell: equal weights, even with b's top planted.
func TestAgreementWeightsSmallWindowEqual(t *testing.T) {
	for _, n := range []int{0, 1, 2, 50, 10 * ConfirmTop} {
		a, b, _ := agreeingDetectors(max(n, 100), 4)
		a, b = a[:n], b[:n]
		if n > 0 {
			b[0] = 1e6
		}
		if wa, wb := AgreementWeights(a, b); wa != 0.5 || wb != 0.5 {
			t.Errorf("n = %d: weights %v, %v, want 0.5 each", n, wa, wb)
		}
	}
}

// TestAgreementWeightsIgnoreOrder: the weights are a function of the records, not of their
// order (a model is built from a window by record identity): the same bits for a permutation,
// also with ties at the top sets' edges.
func TestAgreementWeightsIgnoreOrder(t *testing.T) {
	a, b, _ := agreeingDetectors(3000, 5)
	for i := range a { // coarse scores: many ties
		a[i] = math.Round(a[i] * 4)
		b[i] = math.Round(min(b[i], 200) * 4)
	}
	wa, wb := AgreementWeights(a, b)
	rng := rand.New(rand.NewPCG(6, 1))
	for range 5 {
		pa, pb := make([]float64, len(a)), make([]float64, len(b))
		for t, i := range rng.Perm(len(a)) {
			pa[t], pb[t] = a[i], b[i]
		}
		if xa, xb := AgreementWeights(pa, pb); xa != wa || xb != wb {
			t.Fatalf("permuted: %v, %v; want %v, %v", xa, xb, wa, wb)
		}
	}
	if wa == 0.5 {
		t.Errorf("weights 0.5: the test wants a case that weights")
	}
}

// TestSpearmanMatchesDefinition: ranks with averaged ties, Pearson of the ranks.
func TestSpearmanMatchesDefinition(t *testing.T) {
	x := []float64{1, 2, 2, 3, 10}
	y := []float64{5, 4, 4, 1, 3}
	if r := spearman(x, y); math.Abs(r-(-0.8947368421052632)) > 1e-12 { // scipy.stats.spearmanr
		t.Errorf("spearman %v, want -0.89474 (scipy)", r)
	}
	if r := spearman(x, x); r != 1 {
		t.Errorf("spearman(x, x) %v, want 1", r)
	}
	if r := spearman(x, []float64{7, 7, 7, 7, 7}); r != 0 {
		t.Errorf("against a constant %v, want 0", r)
	}
}

// BenchmarkAgreementWeights: the weighting's cost per model build at the default 4096
// calibration records (docs/BENCHMARKS.md §11.2.1).
func BenchmarkAgreementWeights(b *testing.B) {
	x, y, _ := agreeingDetectors(4096, 7)
	for b.Loop() {
		AgreementWeights(x, y)
	}
}

// kthLargest is the k-th largest of x, by sorting (the tests' reference).
func kthLargest(x []float64, k int) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)-k]
}
