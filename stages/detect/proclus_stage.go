package detect

import (
	"fmt"
	"strconv"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// proclusStream separates the PROCLUS subspace test's draws from the density mode's: a record's
// stream index is xor-ed with it (the draws stay a function of the record's identity).
const proclusStream = 0x70726f636c757321 // "proclus!"

// proclusDetector is PROCLUS (package proclus) as a Detector of subspaces for the density test
// (detect.proclus): its part of a model is the projected clusters of the normalised window
// (Subspaces, nil when off); it scores after the density detector and refines its verdict.
// It has no explanation of its own: the density verdict names its subspace and where it came
// from (Score.SubspaceOf).
type proclusDetector struct {
	names *subspaceNames
}

// Build clusters the normalised window into proclus.k clusters of about proclus.l features,
// keeping the best of proclus.restarts runs.
func (d *proclusDetector) Build(m *Model, w *BuildWindow) error {
	cfg := w.Cfg
	if !cfg.Proclus.Enabled {
		return nil
	}
	pp := proclus.Default()
	pp.K, pp.L, pp.Seed = min(cfg.Proclus.K, len(w.Means[0])), min(cfg.Proclus.L, len(w.Means)), cfg.Seed
	pp.Restarts = cfg.Proclus.Restarts
	var err error
	if m.Subspaces, err = proclus.Run(w.Means, pp); err != nil {
		return fmt.Errorf("detect: PROCLUS subspaces of the window: %w", err)
	}
	return nil
}

// Explain is empty: PROCLUS's findings are the density verdict's.
func (d *proclusDetector) Explain(*batch.Score) string { return "" }

// Score tests every record against its nearest PROCLUS cluster (Model.Subspaces) and folds
// the result into its density verdict (DensityOutlier, EtaProbability, Subspace, SubspaceOf):
//   - the record is density-tested in the cluster's subspace (sampled, the density's own
//     definition there): a lower eta-probability becomes the reported one, with that subspace
//     and the cluster, and one below delta flags the record;
//   - a record outside every cluster's sphere in the cluster's subspace (PROCLUS's outliers:
//     farther from the nearest medoid, in Manhattan segmental distance, than that medoid's
//     nearest other medoid) is flagged too, the nearest cluster's subspace reported. The
//     density of the model sums per-feature densities, so a record ordinary in every feature
//     but off the joint structure of its cluster is found by this test, not the density one.
//
// The draws are a function of the record's identity (q.Density.Index).
func (d *proclusDetector) Score(q *Query, out []batch.Score) error {
	m, nm, ns, dp := q.Model, q.Means, q.SDs, q.Density
	r := m.Subspaces
	if r == nil {
		return nil
	}
	dims := len(nm)
	x32 := make([]float32, dims)
	x, psi := make([]float64, dims), make([]float64, dims)
	for i := range out {
		for j := range dims {
			x32[j] = nm[j][i]
			x[j], psi[j] = float64(nm[j][i]), float64(ns[j][i])
		}
		c, outside := r.Nearest(x32)
		sub := r.Dims[c]
		var pr float64
		if len(sub) == 1 {
			pr = m.Density.EtaProbabilityExact(sub[0], x[sub[0]], psi[sub[0]], dp.Eta)
		} else {
			g := density.ObjectStream(dp.Seed, dp.Index[i]^proclusStream)
			pr = m.Density.EtaProbability(x, psi, sub, dp.Eta, dp.Samples, &g)
		}
		v := &out[i]
		switch {
		case outside && !v.DensityOutlier:
			v.DensityOutlier, v.Subspace = true, d.names.of(sub)
			v.SubspaceOf = "outside every PROCLUS cluster; nearest: cluster " + strconv.Itoa(c)
			v.EtaProbability = min(v.EtaProbability, pr)
		case pr < v.EtaProbability:
			v.EtaProbability, v.Subspace = pr, d.names.of(sub)
			v.SubspaceOf = "PROCLUS cluster " + strconv.Itoa(c)
			v.DensityOutlier = v.DensityOutlier || pr < dp.Delta
		}
	}
	return nil
}
