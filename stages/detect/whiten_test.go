package detect

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// correlated is n records of d sensors sharing one common factor (each sensor = f + noise, so
// every pair correlates at 1/(1+noise^2)), column-major.
func correlated(n, d int, noise float64, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	cols := make([][]float32, d)
	for j := range cols {
		cols[j] = make([]float32, n)
	}
	for i := range n {
		f := rng.NormFloat64()
		for j := range d {
			cols[j][i] = float32(70 + 2*(f+noise*rng.NormFloat64()))
		}
	}
	return cols
}

func whitenedConfig() Config {
	c := testConfig()
	c.DistanceSpace = SpaceWhitened
	return c
}

// TestJacobiEigenOfAKnownMatrix: [[2,1,0],[1,2,0],[0,0,5]] has eigenvalues 1, 3, 5; each
// eigenvector column satisfies A v = lambda v.
func TestJacobiEigenOfAKnownMatrix(t *testing.T) {
	a := []float64{2, 1, 0, 1, 2, 0, 0, 0, 5}
	orig := slices.Clone(a)
	vals, vecs := jacobiEigen(a, 3)
	got := slices.Clone(vals)
	slices.Sort(got)
	for i, want := range []float64{1, 3, 5} {
		if math.Abs(got[i]-want) > 1e-12 { // (a few ulps of rotations of numbers of order 1)
			t.Fatalf("eigenvalues %v, want 1, 3, 5", vals)
		}
	}
	for c := range 3 {
		for r := range 3 {
			var av float64
			for k := range 3 {
				av += orig[r*3+k] * vecs[k*3+c]
			}
			if math.Abs(av-vals[c]*vecs[r*3+c]) > 1e-12 {
				t.Fatalf("column %d is no eigenvector of eigenvalue %v", c, vals[c])
			}
		}
	}
}

// TestWhiteningOfAKnownCovariance: two sensors of correlation rho = 0.8 (unit variances in the
// standardised space): W is S_a^{-1/2} with S_a's off-diagonal shrunk to 0.9 rho, whose
// eigenvectors are (1, ±1)/sqrt 2, so W = [[p, m], [m, p]] with p, m = (1/sqrt(1+r) ± 1/sqrt(1-r))/2.
// A third, constant, feature is left out: its row and column are the identity's.
func TestWhiteningOfAKnownCovariance(t *testing.T) {
	const n, rho = 16000, 0.8
	rng := rand.New(rand.NewPCG(5, 5))
	cols := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		cols[0][i] = float32(10 + 3*a)
		cols[1][i] = float32(-4 + 0.5*(rho*a+math.Sqrt(1-rho*rho)*b))
		cols[2][i] = 7
	}
	sorted := sortedColumns(cols)
	center, unit := standardisation(cols, sorted)
	w := whitening(cols, sorted, recordKeys(cols, 1), center, unit)
	r := (1 - whitenShrink) * rho
	p := (1/math.Sqrt(1+r) + 1/math.Sqrt(1-r)) / 2
	m := (1/math.Sqrt(1+r) - 1/math.Sqrt(1-r)) / 2
	// The sample's correlation and variances (winsorised at 0.5 %/99.5 %, which shrinks a
	// normal's variance by about 3 %) differ from the truth by a few percent at n = 16,000:
	// 0.06 is well outside that and far inside the gap to the standardised space's W = I
	// (m = -0.74 here).
	want := []float64{p, m, 0, m, p, 0, 0, 0, 1}
	for i := range want {
		if math.Abs(w[i]-want[i]) > 0.06 {
			t.Fatalf("W = %v, want about %v", w, want)
		}
	}
	if w[8] != 1 || w[2] != 0 || w[6] != 0 {
		t.Fatalf("the constant feature is whitened: W = %v", w)
	}
	// W is symmetric (the symmetric root, whatever the solver's order and signs).
	if w[1] != w[3] {
		t.Fatalf("W is not symmetric: %v", w)
	}
}

// TestWhitenedOneFeatureIsStandardised: with one feature the whitened space is the identity:
// the ranker's sample R, calibrations and scores are the standardised space's, bit for bit.
func TestWhitenedOneFeatureIsStandardised(t *testing.T) {
	cols := correlated(3000, 1, 0.3, 9)
	feats := []string{"v"}
	a, err := buildRanker(cols, sortedColumns(cols), feats, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildRanker(cols, sortedColumns(cols), feats, whitenedConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Whiten, []float64{1}) || a.Whiten != nil {
		t.Fatalf("whitening %v (standardised %v), want [1] (nil)", b.Whiten, a.Whiten)
	}
	if !slices.Equal(a.Ref.Points[0], b.Ref.Points[0]) || !slices.Equal(a.Combined(), b.Combined()) ||
		!slices.Equal(a.Distance.Sorted, b.Distance.Sorted) {
		t.Fatal("one feature: the whitened ranker differs from the standardised one")
	}
	q := [][]float32{{50, 69, 70, 71, 90, 1e30}}
	da, db := a.distanceSpace(q, nil), b.distanceSpace(q, nil)
	if !slices.Equal(da[0], db[0]) {
		t.Fatalf("one feature: distance space %v whitened, %v standardised", db[0], da[0])
	}
}

// TestWhitenedFollowsRecordsNotPositions: the whitening is a function of the window's records
// whatever their order (its sample is chosen and summed in record-key order), so the ranker is.
func TestWhitenedFollowsRecordsNotPositions(t *testing.T) {
	cols := correlated(20000, 4, 0.3, 11) // more rows than whitenSample: a sample, not the window
	feats := []string{"a", "b", "c", "d"}
	cfg := whitenedConfig()
	a, err := buildRanker(cols, sortedColumns(cols), feats, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := shuffled(cols, 4)
	b, err := buildRanker(s, sortedColumns(s), feats, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Whiten, b.Whiten) {
		t.Fatal("the shuffled window's whitening differs")
	}
	for j := range a.Ref.Points {
		if !slices.Equal(a.Ref.Points[j], b.Ref.Points[j]) {
			t.Fatalf("feature %d: the shuffled window's sample R differs", j)
		}
	}
	if !slices.Equal(a.Combined(), b.Combined()) {
		t.Fatal("the shuffled window's calibration differs")
	}
}

// TestWhitenedBrokenCorrelationRanksFar: four sensors that move together (pairwise correlation
// 0.92). A record whose first two sensors disagree by 2.5 sd each way (a broken correlation:
// ordinary in every marginal) is scored against one whose four sensors all sit 2.5 sd out
// together (the same marginal deviations, along the correlation). The standardised space ranks
// the broken one a little above (4.3 decades against 1.8: the window's records lie along the
// correlation, so its neighbours are farther); whitened, it is far beyond the window's
// calibration (14.7) and the concordant one within it (0.9).
func TestWhitenedBrokenCorrelationRanksFar(t *testing.T) {
	cols := correlated(8000, 4, 0.3, 21)
	feats := []string{"a", "b", "c", "d"}
	sd := 2 * math.Sqrt(1+0.09)
	broken := [][]float32{{float32(70 + 2.5*sd)}, {float32(70 - 2.5*sd)}, {70}, {70}}
	along := [][]float32{{float32(70 + 2.5*sd)}, {float32(70 + 2.5*sd)}, {float32(70 + 2.5*sd)}, {float32(70 + 2.5*sd)}}
	surprisal := func(cfg Config) (b, a float64) {
		r, err := buildRanker(cols, sortedColumns(cols), feats, cfg)
		if err != nil {
			t.Fatal(err)
		}
		one := func(q [][]float32) float64 {
			out := make([]float64, 1)
			r.Ref.ScoreBatch(r.distanceSpace(q, nil), out, 0)
			return r.Distance.Surprisal(out[0])
		}
		return one(broken), one(along)
	}
	sb, sa := surprisal(testConfig())
	wb, wa := surprisal(whitenedConfig())
	t.Logf("distance surprisal (decades): standardised broken %.2f, along %.2f; whitened broken %.2f, along %.2f", sb, sa, wb, wa)
	// Whitened, the broken record gains at least 5 decades over the standardised space and its
	// gap to the concordant one at least triples (deterministic data: 10.4 and 5.5x here; the
	// margins leave room for any change of the sample that keeps the space's meaning).
	if wb-sb < 5 || wb-wa < 3*(sb-sa) {
		t.Fatalf("whitened: the broken correlation scores %.2f decades against %.2f along it; standardised %.2f against %.2f", wb, wa, sb, sa)
	}
}

// TestWhitenedSnapshotRoundTrip: a whitened model's snapshot carries its whitening (flag bit 5)
// and scores as the model written; a standardised model's snapshot has no whitening, as every
// file written before it, and loads so; each is refused by the other space's configuration.
func TestWhitenedSnapshotRoundTrip(t *testing.T) {
	d := testData(2500, 3)
	cfg := whitenedConfig()
	m := buildTestModel(t, d, cfg)
	if len(m.Ranker.Whiten) != 9 {
		t.Fatalf("whitening of %d values for 3 features", len(m.Ranker.Whiten))
	}
	raw := snapshotBytes(t, m)
	got, err := ReadSnapshot(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Ranker.Whiten, m.Ranker.Whiten) {
		t.Fatal("the whitening did not read back")
	}
	q := d.Cols
	a, b := make([]float64, len(q[0])), make([]float64, len(q[0]))
	m.Ranker.Ref.ScoreBatch(m.Ranker.distanceSpace(q, nil), a, 0)
	got.Ranker.Ref.ScoreBatch(got.Ranker.distanceSpace(q, nil), b, 0)
	if !slices.Equal(a, b) {
		t.Fatal("the model read back scores otherwise")
	}
	if err := got.Fits(d.Features, cfg); err != nil {
		t.Fatalf("Fits its own configuration: %v", err)
	}
	if err := got.Fits(d.Features, testConfig()); !errors.Is(err, ErrSnapshotMismatch) || !strings.Contains(err.Error(), "distance_space whitened") {
		t.Fatalf("a whitened model under distance_space standardised: %v", err)
	}
	std := buildTestModel(t, d, testConfig())
	back, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, std)))
	if err != nil || back.Ranker.Whiten != nil || back.Fits(d.Features, testConfig()) != nil {
		t.Fatalf("a standardised snapshot: %v, whitening %v", err, back.Ranker.Whiten)
	}
	if err := back.Fits(d.Features, cfg); !errors.Is(err, ErrSnapshotMismatch) {
		t.Fatalf("a standardised model under distance_space whitened: %v", err)
	}
}

// TestDistanceSpaceValidated: distance_space is standardised or whitened.
func TestDistanceSpaceValidated(t *testing.T) {
	c := testConfig()
	c.DistanceSpace = "mahalanobis"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "distance_space") {
		t.Fatalf("distance_space mahalanobis: %v", err)
	}
}

// TestWhiteningIsExactlySymmetric: W = P diag(1/sqrt(lambda)) P^T is symmetric, and a
// snapshot's reader refuses one that is not (decodeWhiten), so the build must give it bit for
// bit: W[p][q] and W[q][p] summed separately round differently (at 40 correlated features,
// hundreds of pairs differed in their last bits), so each pair is summed once.
func TestWhiteningIsExactlySymmetric(t *testing.T) {
	const d = 40
	cols := correlated(3000, d, 0.5, 17)
	copy(cols[1], cols[0]) // two identical features
	for i := range cols[2] {
		cols[2][i] = 5 // and a constant one
	}
	sorted := sortedColumns(cols)
	center, unit := standardisation(cols, sorted)
	w := whitening(cols, sorted, recordKeys(cols, 1), center, unit)
	differ := 0
	for p := range d {
		for q := range p {
			if math.Float64bits(w[p*d+q]) != math.Float64bits(w[q*d+p]) {
				differ++
			}
		}
	}
	if differ > 0 {
		t.Fatalf("W is not symmetric: %d of %d pairs differ", differ, d*(d-1)/2)
	}
}

// TestWhitenedTooFewRecordsIsAnError: buildRanker refuses a window of fewer than 2 records with
// an error in either space; whitened, an empty one panicked (the whitening's quantiles read
// the first of no values) before the check.
func TestWhitenedTooFewRecordsIsAnError(t *testing.T) {
	for _, n := range []int{0, 1} {
		cols := [][]float32{make([]float32, n), make([]float32, n)}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%d records: panic %v", n, p)
				}
			}()
			_, err := buildRanker(cols, sortedColumns(cols), []string{"a", "b"}, whitenedConfig())
			if err == nil || !strings.Contains(err.Error(), "at least 2 records") {
				t.Errorf("%d records: %v, want the window sample's error", n, err)
			}
		}()
	}
}

// TestKeyModelsAreNeverWhitened: under distance_space: whitened a key's model stays
// standardised, by the fast build and the general one (keyed_build.go): the keys' device path
// and the keys' snapshots read Center and Unit alone. A guard (checked to fail with the general
// build's override removed).
func TestKeyModelsAreNeverWhitened(t *testing.T) {
	const n = 300
	cols := correlated(n, 3, 0.2, 31)
	st := &keyState{cols: cols, sig: newFlagRing(n), size: n}
	cfg := keyedConfig()
	cfg.Keys.Window = n
	cfg.DistanceSpace = SpaceWhitened
	g, err := buildKeyModelGeneral(st, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := buildKeyModel(st, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g.Whiten != nil || f.Whiten != nil {
		t.Fatalf("a key's model whitened: general %v, built %v", g.Whiten, f.Whiten)
	}
}
