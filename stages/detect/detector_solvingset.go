package detect

import (
	"fmt"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// solvingSetDetector is the solving-set prediction (Angiulli et al.; package solvingset) as a
// Detector: its part of a model is the solving set S of the normalised window with k and w*
// (Distance) and the exact weights of the window's top-n outliers (TopWeights); a record is
// flagged when w_k(q, S) >= w*, which never misses a top-n distance-based outlier of the
// window. The accelerator (nil: the CPU) runs SolvingSet and the k-NN weights.
type solvingSetDetector struct {
	accel   Accelerator
	weights []float64 // scratch, batch after batch
}

// Build runs SolvingSet on the normalised window (distance.k, distance.n scaled to the
// window's fill, distance.m).
func (d *solvingSetDetector) Build(m *Model, w *BuildWindow) error {
	cfg, rows := w.Cfg, len(w.Means[0])
	p := solvingset.Params{K: min(cfg.Distance.K, rows-1), N: EffectiveN(cfg.Distance.N, cfg.Window, rows), M: cfg.Distance.M, Seed: cfg.Seed}
	res, err := solvingSetOn(d.accel, w.Means, p)
	if err != nil {
		return fmt.Errorf("detect: solving set of the window: %w", err)
	}
	m.Distance = solvingset.NewModel(w.Means, m.Features, res, p.K)
	m.TopWeights = make([]float64, len(res.Outliers))
	for i, o := range res.Outliers { // sorted by descending weight
		m.TopWeights[i] = o.Weight
	}
	return nil
}

// Score writes Weight, WStar and DistanceOutlier. Records that are members of the model's own
// window (Members) are scored without counting themselves: S holds every top-n outlier of the
// window, and a member of S scored as a new query would meet itself at distance 0 and could
// fall below w*.
func (d *solvingSetDetector) Score(q *Query, out []batch.Score) error {
	m := q.Model
	weights := d.weightsFor(len(out))
	if !q.planned { // the CPU (with a device, plan's call computed them)
		m.Distance.ScoreBatch(q.Means, weights, 0)
	}
	rescoreMembers(m, q, m.Distance.Points, m.Distance.K, q.Means, weights)
	onRows(len(out), func(lo, hi int) { // (a batch's scores are megabytes)
		for i := lo; i < hi; i++ {
			w := weights[i]
			out[i].Weight, out[i].WStar, out[i].DistanceOutlier = w, m.Distance.WStar, m.Distance.IsOutlier(w)
		}
	})
	return nil
}

// plan adds the batch's w_k(q, S) to the batch's accelerator call.
func (d *solvingSetDetector) plan(q *Query, p *devicePlan) {
	p.knn = append(p.knn, solvingset.Scoring{Model: q.Model.Distance, Queries: q.Means, Out: d.weightsFor(len(q.Means[0]))})
}

func (d *solvingSetDetector) weightsFor(n int) []float64 {
	if cap(d.weights) < n {
		d.weights = make([]float64, n)
	}
	return d.weights[:n]
}

// Explain: "w_k(q,S) W >= w* V".
func (d *solvingSetDetector) Explain(s *batch.Score) string {
	if !s.DistanceOutlier {
		return ""
	}
	return "w_k(q,S) " + fmtG(s.Weight) + " >= w* " + fmtG(s.WStar)
}
