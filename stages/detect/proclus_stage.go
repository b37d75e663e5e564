package detect

import (
	"strconv"

	"github.com/outlierd/outlierd/internal/algo/density"
)

// proclusStream separates the PROCLUS subspace test's draws from the density mode's: a record's
// stream index is xor-ed with it (the draws stay a function of the record's identity).
const proclusStream = 0x70726f636c757321 // "proclus!"

// testClusterSubspaces tests every record against its nearest PROCLUS cluster
// (Model.Subspaces) and folds the result into its density verdict:
//   - the record is density-tested in the cluster's subspace (sampled, the density's own
//     definition there): a lower eta-probability becomes the reported one, with that subspace
//     and the cluster, and one below delta flags the record;
//   - a record outside every cluster's sphere in the cluster's subspace (PROCLUS's outliers:
//     farther from the nearest medoid, in Manhattan segmental distance, than that medoid's
//     nearest other medoid) is flagged too, the nearest cluster's subspace reported. The
//     density of the model sums per-feature densities, so a record ordinary in every feature
//     but off the joint structure of its cluster is found by this test, not the density one.
//
// nm, ns are the batch's normalised means and uncertainties; streams the records' stream
// indices (identity); of receives, per record, the origin of its reported subspace.
func (s *Stage) testClusterSubspaces(m *Model, nm, ns [][]float32, streams []uint64, dp density.Params, verdicts []density.Verdict, of []string) {
	r := m.Subspaces
	dims := len(nm)
	x32 := make([]float32, dims)
	x, psi := make([]float64, dims), make([]float64, dims)
	for i := range verdicts {
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
			g := density.ObjectStream(dp.Seed, streams[i]^proclusStream)
			pr = m.Density.EtaProbability(x, psi, sub, dp.Eta, dp.Samples, &g)
		}
		v := &verdicts[i]
		switch {
		case outside && !v.Outlier:
			v.Outlier, v.Subspace = true, sub
			of[i] = "outside every PROCLUS cluster; nearest: cluster " + strconv.Itoa(c)
			v.EtaProbability = min(v.EtaProbability, pr)
		case pr < v.EtaProbability:
			v.EtaProbability, v.Subspace = pr, sub
			of[i] = "PROCLUS cluster " + strconv.Itoa(c)
			v.Outlier = v.Outlier || pr < dp.Delta
		}
	}
}
