package detect

import (
	"fmt"
	"math"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// scoreScratch holds buffers reused batch after batch on the stage's goroutine.
type scoreScratch struct {
	means, sds [][]float32
	verdicts   []density.Verdict
	weights    []float64
	streams    []uint64
	rank       rankScratch
}

// Normalised maps raw means and uncertainties (column-major) to the model's units, exactly as
// the stage does before scoring (new slices).
func (m *Model) Normalised(means, sds [][]float32) (nm, ns [][]float32) {
	return m.normalised(means, sds, nil)
}

// normalised maps raw means and uncertainties to the model's [0,1] space; with a scratch
// the buffers are reused (the result is valid until the next call with the same scratch).
func (m *Model) normalised(means, sds [][]float32, sc *scoreScratch) (nm, ns [][]float32) {
	var bufM, bufS [][]float32
	if sc != nil {
		bufM, bufS = sc.means, sc.sds
	}
	if len(bufM) != len(means) {
		bufM, bufS = make([][]float32, len(means)), make([][]float32, len(means))
	}
	rows := 0
	if len(means) > 0 {
		rows = len(means[0])
	}
	for j := range means {
		bufM[j] = normalise(means[j], m.Offset[j], m.Scale[j], bufM[j])
		if cap(bufS[j]) < rows {
			bufS[j] = make([]float32, rows)
		}
		bufS[j] = bufS[j][:rows]
		if sds == nil || sds[j] == nil {
			clear(bufS[j])
			continue
		}
		for i, v := range sds[j] {
			bufS[j][i] = scaleSD(v, m.Scale[j])
		}
	}
	if sc != nil {
		sc.means, sc.sds = bufM, bufS
	}
	return bufM, bufS
}

// score fills b.Scores with the serving model's verdicts.
//
// Records that are members of the model's own window (Members: the held batches scored by the
// first model, built from them; a re-read of them after a restart or in a scorer) are scored
// without counting themselves: S holds every top-n outlier of the window, and a member of S
// scored as a new query would meet itself at distance 0 and could fall below w*.
func (s *Stage) score(b *batch.Batch) error {
	m := s.model
	means, sds, err := s.columns(b)
	if err != nil {
		return err
	}
	n := b.Len()
	nm, ns := m.normalised(means, sds, &s.scratch)
	sc := &s.scratch
	if cap(sc.verdicts) < n {
		sc.verdicts, sc.weights = make([]density.Verdict, n), make([]float64, n)
	}
	verdicts, weights := sc.verdicts[:n], sc.weights[:n]
	dp := s.densityParams()
	if dp.Index, err = streamIndices(b, sc.streams); err != nil {
		return err
	}
	sc.streams = dp.Index
	if err := detectDensity(s.accel, m, nm, ns, dp, verdicts); err != nil {
		return fmt.Errorf("detect: density: %w", err)
	}
	of := make([]string, n) // where a detector's subspace in the verdict came from ("": the mode's)
	if m.Subspaces != nil {
		s.testClusterSubspaces(m, nm, ns, dp.Index, dp, verdicts, of)
	}
	scoreDistance(s.accel, m.Distance, nm, weights)
	rescoreMembers(m, b, m.Distance.Points, m.Distance.K, nm, weights)
	var dens, distScore []float64
	threshold := math.Inf(1)
	if m.Ranker != nil {
		dens, distScore = s.rankBatch(m, b, means)
		threshold = m.Ranker.Threshold(s.cfg.AlarmRate)
	}
	b.Scores = make([]batch.Score, n)
	for i := range n {
		v := verdicts[i]
		sub := s.subspaceNames(v.Subspace)
		dist := m.Distance.IsOutlier(weights[i])
		sc := batch.Score{
			Scored: true, DensityOutlier: v.Outlier, EtaProbability: v.EtaProbability, Subspace: sub, SubspaceOf: of[i],
			DistanceOutlier: dist, Weight: weights[i], WStar: m.Distance.WStar,
			Outlier: combine(s.cfg.Combine, v.Outlier, dist),
			Score:   math.NaN(), Threshold: threshold, DensityScore: math.NaN(), DistanceScore: math.NaN(),
		}
		if m.Ranker != nil {
			sc.DensityScore, sc.DistanceScore = dens[i], distScore[i]
			sc.Score = m.Ranker.combine(dens[i], distScore[i])
			if s.cfg.FlagBy == FlagByRate {
				sc.Outlier = sc.Score > threshold
			}
		}
		b.Scores[i] = sc
	}
	if err := s.scoreHypercube(nm, b.Scores); err != nil {
		return err
	}
	// The hypercube verdict joins the verdicts' rule (any flags, all must agree); under
	// flag_by rate the combined score alone decides.
	if s.hc.counts != nil && s.cfg.FlagBy == FlagByVerdicts {
		for i := range b.Scores {
			switch h := b.Scores[i].Hypercube.Outlier; s.cfg.Combine {
			case CombineAny:
				b.Scores[i].Outlier = b.Scores[i].Outlier || h
			case CombineAll:
				b.Scores[i].Outlier = b.Scores[i].Outlier && h
			}
		}
	}
	b.ModelVersion = m.Version
	return nil
}

// combine applies the configured rule to the two verdicts.
func combine(rule string, densityOutlier, distanceOutlier bool) bool {
	switch rule {
	case CombineAll:
		return densityOutlier && distanceOutlier
	case CombineDensity:
		return densityOutlier
	case CombineDistance:
		return distanceOutlier
	}
	return densityOutlier || distanceOutlier
}

func (s *Stage) densityParams() density.Params {
	mode, _ := density.ParseMode(s.cfg.Density.Mode) // validated with the config
	// Exact: 1-D subspaces are integrated exactly (no sampling noise, and fast enough for a
	// stream). Index (set by score) gives each record the stream of its identity.
	return density.Params{Eta: s.cfg.Density.Eta, Delta: s.cfg.Density.Delta, Samples: s.cfg.Density.Samples,
		Mode: mode, Seed: s.cfg.Seed, Exact: true}
}

// streamIndices are the batch's records' density stream indices, from their identity (topic,
// partition, offset: batch.StreamIndex), so a redelivered record draws the same samples and gets
// the same verdict after a restart, whatever batch it arrives in. dst is reused when large enough.
func streamIndices(b *batch.Batch, dst []uint64) ([]uint64, error) {
	parts, offs := b.Partitions(), b.Offsets()
	n := b.Len()
	if len(parts) != n || len(offs) != n {
		return nil, fmt.Errorf("detect: batch has no %s/%s columns of %d rows", batch.ColPartition, batch.ColOffset, n)
	}
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	th := batch.TopicHashOf(b.Topic)
	for i := range n {
		dst[i] = th.StreamIndex(parts[i], offs[i])
	}
	return dst, nil
}

// subspaceNames names a subspace's features. One-dimensional subspaces (all of mode
// independent) share one slice per feature: no allocation per record on the hot path.
// Scores are read-only downstream, so sharing is safe.
func (s *Stage) subspaceNames(dims []int) []string {
	if len(dims) == 1 {
		return s.singles[dims[0]]
	}
	if len(dims) == 0 {
		return nil
	}
	sub := make([]string, len(dims))
	for t, j := range dims {
		sub[t] = s.features[j]
	}
	return sub
}

// rescoreMembers rescores, with solvingset.KNNWeightsMembers against ref (k neighbours), the
// batch's records that belong to m's window by identity (Members): a record of the window is
// not its own neighbour. nm are the batch's queries in ref's space; weights are overwritten for
// those records only.
func rescoreMembers(m *Model, b *batch.Batch, ref [][]float32, k int, nm [][]float32, weights []float64) {
	if len(m.Members.Ranges) == 0 {
		return
	}
	parts, offs := b.Partitions(), b.Offsets()
	var idx []int
	for i := range weights {
		if m.Members.contains(b.Topic, parts[i], offs[i]) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	w := make([]float64, len(idx))
	solvingset.KNNWeightsMembers(ref, pick(nm, idx), k, 0, w)
	for t, i := range idx {
		weights[i] = w[t]
	}
}
