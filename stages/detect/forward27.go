package detect

import (
	"os"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// Forward (out-of-time) calibration: a prototype behind OUTLIERD_FWD27=1 (issue 20, branch
// wander27, docs/bench/notes/wander27_rule.md). The global model's calibration records are
// taken from the window's second half (arrival order) and each is scored by a model of the
// stretch before its fold (folds of Config.Recalibrate(rows) records from the half on): what the
// model meets in the stream, the records after its window, scored by the window. Keys' models
// and the agreement weights are unchanged.

// forward27 selects the forward calibration (read once at start).
var forward27 = os.Getenv("OUTLIERD_FWD27") == "1"

// forwardMinRows is the fewest window rows the forward calibration needs (a prefix of at least
// half of it, 200 rows: a k-NN sample of at least k+1 = 101 points); a shorter window is
// calibrated in sample.
const forwardMinRows = 400

// forwardRaw returns the forward calibration records' raw scores (tail score, k-NN weight
// against their fold's reference), or nil where the window is too short. cols are the window's
// raw columns in arrival order, keys their record keys, k the distance score's k.
func (r *Ranker) forwardRaw(cols [][]float32, keys []keyedRow, cfg Config, k, workers int) (dens, dist []float64) {
	n := len(cols[0])
	if n < forwardMinRows {
		return nil, nil
	}
	half := n / 2
	fold := max(1, cfg.Recalibrate(n))
	after := make([]keyedRow, 0, n-half)
	for _, kr := range keys {
		if int(kr.row) >= half {
			after = append(after, kr)
		}
	}
	calIdx := smallestKeys(after, calibrationRecords(n-half, cfg.AlarmRate), saltCalibration)
	dens, dist = make([]float64, len(calIdx)), make([]float64, len(calIdx))
	before := make([]keyedRow, 0, n)
	for s := half; s < n; s += fold {
		e := min(s+fold, n)
		var pos, rows []int
		for i, row := range calIdx {
			if row >= s && row < e {
				pos, rows = append(pos, i), append(rows, row)
			}
		}
		if len(pos) == 0 {
			continue
		}
		prefix := make([][]float32, len(cols))
		for j := range cols {
			prefix[j] = cols[j][:s]
		}
		tail := rank.TailOfSorted(sortedColumns(prefix))
		before = before[:0]
		for _, kr := range keys {
			if int(kr.row) < s {
				before = append(before, kr)
			}
		}
		m := min(cfg.Score.Sample, s)
		ref := r.distanceSpace(pick(cols, smallestKeys(before, m, saltSample)), nil)
		q := pick(cols, rows)
		d1, d2 := make([]float64, len(rows)), make([]float64, len(rows))
		tail.Score(q, d1)
		solvingset.KNNWeights(ref, r.distanceSpace(q, nil), min(k, m-1), workers, d2)
		for t, i := range pos {
			dens[i], dist[i] = d1[t], d2[t]
		}
	}
	return dens, dist
}
