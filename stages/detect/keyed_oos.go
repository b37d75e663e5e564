package detect

import (
	"slices"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// A key's calibrations out of sample in time (keyroll31's candidate 2, part of
// OUTLIERD_KEYROLL31B=1; docs/bench/notes/keyroll31_rule.md, keyroll31b_rule.md): a key's model with a rolling column scores the records
// after its window, 1..rebuild records later, when the column has wandered on; its members'
// in-sample scores do not hold that wander. Its build cuts the window (time order) into blocks
// of about the rebuild interval and scores each block against the other blocks only; the
// calibrations are fitted to those scores. The model that scores is the whole window's.

// oosBlocks is the number of blocks of a key's window of n records for rebuild records between
// builds: at least 2.
func oosBlocks(n, rebuild int) int {
	return max(2, (n+rebuild-1)/max(rebuild, 1))
}

// oosScores writes, for each record i of cols (a key's window in time order, n records), its
// tail score and its k-NN weight w_k (r's distance space) against the records of the other
// blocks only, into dens[i] and dist[i]; k is keys.k, bounded by the other blocks' records - 1.
func (r *Ranker) oosScores(cols [][]float32, blocks, k int, corr []float64, dens, dist []float64) {
	n, d := len(cols[0]), len(cols)
	other, q := make([][]float32, d), make([][]float32, d)
	for b := range blocks {
		lo, hi := b*n/blocks, (b+1)*n/blocks
		if lo == hi {
			continue
		}
		for j, c := range cols {
			other[j] = append(append(other[j][:0], c[:lo]...), c[hi:]...)
			q[j] = c[lo:hi]
		}
		sorted := make([][]float32, d)
		for j := range other {
			sorted[j] = slices.Sorted(slices.Values(other[j]))
		}
		tail := rank.TailOfSorted(sorted)
		tail.Corr = corr
		tail.Score(q, dens[lo:hi])
		m := n - (hi - lo)
		ref, qs := r.distanceSpace(other, nil), r.distanceSpace(q, nil)
		solvingset.KNNWeights(ref, qs, max(1, min(k, m-1)), 1, dist[lo:hi])
	}
}
