package detect

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// jointViewWindow is a window of three sensors that read one quantity (each the quantity plus
// its own noise), with 2% of records that break the sensors' relation (one reads +u, one -u,
// one 0, u within the bulk's range): far from the bulk for the distance score, ordinary for the
// per-feature one. The two scores agree on the bulk (both rank its ends high).
func jointViewWindow(n int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	cols := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		x := rng.NormFloat64()
		v := [3]float64{x, x + 0.2*rng.NormFloat64(), x + 0.2*rng.NormFloat64()}
		if i%50 == 0 {
			u := 0.5 + rng.Float64()
			v = [3]float64{u, -u, 0}
		}
		for j := range cols {
			cols[j][i] = float32(v[j])
		}
	}
	return cols
}

// TestRankerWeightsByAgreement: score.weights agreement weights the model's two detectors by
// its window (rank.AgreementWeights of the calibration records' raw scores): here the distance
// score's top records are the relation-breaking ones, which the per-feature score does not
// confirm, where the two otherwise rank the window alike, so the distance weighs less; the
// combined score is the weighted mean of the calibrated scores. score.weights equal, and a
// window of one feature (where both detectors read the same coordinate), weigh them equally,
// with the bits of the plain mean.
func TestRankerWeightsByAgreement(t *testing.T) {
	cols := jointViewWindow(5000, 1)
	features := []string{"a", "b", "c"}
	cfg := testConfig()
	build := func(cols [][]float32, features []string, cfg Config) *Ranker {
		r, err := buildRanker(cols, sortedColumns(cols), features, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := build(cols, features, cfg)
	t.Logf("weights: density %.3f, distance %.3f", r.DensityWeight, r.DistanceWeight)
	if !(r.DistanceWeight < 0.5 && r.DensityWeight > 0.5) || math.Abs(r.DensityWeight+r.DistanceWeight-1) > 1e-15 {
		t.Errorf("weights density %v, distance %v: want the distance (its top unconfirmed) below 0.5, sum 1", r.DensityWeight, r.DistanceWeight)
	}
	plain := func(r *Ranker, d, x float64) float64 { return (r.Density.Surprisal(d) + r.Distance.Surprisal(x)) / 2 }
	q := [][]float32{{0.8, 2.5, 0}, {-0.8, 2.6, 0}, {0, 2.4, 0}} // a relation breaker, a bulk end, the centre
	dens, dist := make([]float64, 3), make([]float64, 3)
	r.Tail.Score(q, dens)
	r.Ref.ScoreBatch(r.distanceSpace(q, nil), dist, 0)
	for i := range dens {
		want := r.DensityWeight*r.Density.Surprisal(dens[i]) + r.DistanceWeight*r.Distance.Surprisal(dist[i])
		if got := r.mean(dens[i], dist[i]); math.Abs(got-want) > 1e-12*max(1, want) {
			t.Errorf("record %d: mean %v, want the weighted mean %v", i, got, want)
		}
	}
	if r.mean(dens[0], dist[0]) >= plain(r, dens[0], dist[0]) {
		t.Errorf("the relation breaker's mean %v is not below the plain mean %v: the distance's weight did not count", r.mean(dens[0], dist[0]), plain(r, dens[0], dist[0]))
	}

	eq := cfg
	eq.Score.Weights = WeightsEqual
	one := build(cols[:1], features[:1], cfg)
	for name, r := range map[string]*Ranker{"score.weights equal": build(cols, features, eq), "one feature": one} {
		if r.DensityWeight != 0.5 || r.DistanceWeight != 0.5 {
			t.Errorf("%s: weights %v, %v, want 0.5 each", name, r.DensityWeight, r.DistanceWeight)
		}
		q := q[:len(r.Center)]
		r.Tail.Score(q, dens)
		r.Ref.ScoreBatch(r.distanceSpace(q, nil), dist, 0)
		for i := range dens {
			if got, want := r.mean(dens[i], dist[i]), plain(r, dens[i], dist[i]); got != want {
				t.Errorf("%s, record %d: mean %v, want the plain mean's bits %v", name, i, got, want)
			}
		}
	}
}

// TestRankerWeightsSnapshot: a model's weights go through its snapshot (a model read back
// scores as the one written); a ranking part written before the weights existed (no weights
// after the calibrations) reads as built with equal weights, its Combined calibration's.
func TestRankerWeightsSnapshot(t *testing.T) {
	cols := jointViewWindow(5000, 2)
	features := []string{"a", "b", "c"}
	r, err := buildRanker(cols, sortedColumns(cols), features, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	var e sealed.Encoder
	encodeRanker(&e, r, true)
	p := e.Payload()
	back, err := decodeRanker(sealed.NewDecoder(p), features, true)
	if err != nil {
		t.Fatal(err)
	}
	if back.DensityWeight != r.DensityWeight || back.DistanceWeight != r.DistanceWeight || back.Params != r.Params || r.DensityWeight == 0.5 {
		t.Errorf("read back weights %v, %v (%+v); written %v, %v (%+v), want the same and not 0.5",
			back.DensityWeight, back.DistanceWeight, back.Params, r.DensityWeight, r.DistanceWeight, r.Params)
	}
	for _, x := range [][2]float64{{3, 0.5}, {12, 4}, {40, 30}} {
		if a, b := r.combine(x[0], x[1]), back.combine(x[0], x[1]); a != b {
			t.Errorf("raw scores %v: combined %v written, %v read back", x, a, b)
		}
	}
	older := p[:len(p)-(4+len(WeightsAgreement)+16)] // without score.weights and the two weights
	old, err := decodeRanker(sealed.NewDecoder(older), features, false)
	if err != nil {
		t.Fatal(err)
	}
	if old.Params.Weights != WeightsEqual || old.DensityWeight != 0.5 || old.DistanceWeight != 0.5 {
		t.Errorf("a ranking part without weights read as %s, %v, %v; want equal, 0.5, 0.5", old.Params.Weights, old.DensityWeight, old.DistanceWeight)
	}
	// Such a model (written before score.weights existed, built with equal weights) serves
	// either setting until the next build, so that an upgrade's first start keeps serving the
	// global model it had; a model built with equal weights since then serves equal only.
	eq := testConfig()
	eq.Score.Weights = WeightsEqual
	if err := rankerFits(old, eq); err != nil {
		t.Errorf("a ranking part without weights under score.weights equal: %v", err)
	}
	if err := rankerFits(old, testConfig()); err != nil {
		t.Errorf("a ranking part without weights under score.weights agreement: %v, want it served until the next build", err)
	}
	built := *old
	built.beforeWeights = false
	if err := rankerFits(&built, testConfig()); !errors.Is(err, ErrSnapshotMismatch) {
		t.Errorf("a ranking part built with equal weights under score.weights agreement: %v, want a mismatch", err)
	}
	// Written again (a snapshot of the model it serves), it stays a part without weights.
	var e2 sealed.Encoder
	encodeRanker(&e2, old, !old.beforeWeights)
	again, err := decodeRanker(sealed.NewDecoder(e2.Payload()), features, false)
	if err != nil || !again.beforeWeights || rankerFits(again, testConfig()) != nil {
		t.Errorf("a ranking part without weights written again: %v, %+v", err, again)
	}
	bad := append([]byte(nil), p...)
	copy(bad[len(bad)-16:], make([]byte, 8)) // density weight 0: no build writes it
	if _, err := decodeRanker(sealed.NewDecoder(bad), features, true); err == nil {
		t.Error("a density weight of 0 was read back without an error")
	}
}
