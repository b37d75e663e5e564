package accel

import (
	"fmt"
	"sync"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// maxResidentPointSets is how many models' points stay on the GPU: a serving model's solving set
// and ranking sample, and the next model's two while it takes over.
const maxResidentPointSets = 4

// residentPoints are the point sets that batches are scored against, kept on the GPU while their
// model serves (issue 12 item 5: uploading S with every 1000-record batch was most of the 885 KB
// per batch sent to the device at W = 1M). Keyed by the model, which a model never changes after
// it is built; the entries hold their models, so a key is never a reused address.
type residentPoints struct {
	mu   sync.Mutex
	sets []pointSet // least recently used first
}

type pointSet struct {
	m    *solvingset.Model
	cols *gpukern.Columns
}

// get returns m.Points on g, uploading them when they are not resident and freeing the least
// recently used set beyond maxResidentPointSets.
func (r *residentPoints) get(g *gpukern.Device, m *solvingset.Model) (*gpukern.Columns, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.sets {
		if s.m == m {
			r.sets = append(append(r.sets[:i:i], r.sets[i+1:]...), s)
			return s.cols, nil
		}
	}
	cols, err := g.Upload(m.Points)
	if err != nil {
		return nil, err
	}
	r.sets = append(r.sets, pointSet{m: m, cols: cols})
	if len(r.sets) > maxResidentPointSets {
		old := r.sets[0]
		r.sets = append(r.sets[:0], r.sets[1:]...)
		if err := old.cols.Free(); err != nil {
			return nil, fmt.Errorf("freeing an earlier model's points: %w", err)
		}
	}
	return cols, nil
}

// ModelWeights writes w_k(q, m.Points) with m's k for queries already in m's space (the stage's
// normalised records; solvingset.KNNWeights on the CPU). On the GPU m.Points stay resident while
// m serves, so a batch uploads only its queries.
func (d *Device) ModelWeights(m *solvingset.Model, Q [][]float32, out []float64) error {
	uncovered := knnUncovered(m.K, len(m.Points))
	return d.step("k-NN scoring", uncovered, func() error {
		S, err := d.points.get(d.gpu, m)
		if err != nil {
			return err
		}
		return gpukern.KNNWeightsOn(S, Q, m.K, out)
	}, func() error {
		solvingset.KNNWeights(m.Points, Q, m.K, 0, out)
		return nil
	})
}

// ScoreBatch runs a batch's scoring steps in one device call (gpukern.Score: each step's kernel on
// its own stream, the inputs up in one copy, the results back in one): the density test (dens,
// when not nil: dens.Model.DetectRecords) and the k-NN weights against models' points (knn:
// ModelWeights each). The results are the steps' own, on the GPU or the CPU. A batch the kernels
// do not cover in one call (a step beyond a kernel's limit, too many steps) runs step by step,
// each under the policy; a device failure runs the whole batch on the CPU.
func (d *Device) ScoreBatch(dens *density.Scoring, knn []solvingset.Scoring) error {
	cpu := func() error {
		for _, s := range knn {
			solvingset.KNNWeights(s.Model.Points, s.Queries, s.Model.K, 0, s.Out)
		}
		if dens != nil {
			return dens.Model.DetectRecords(dens.Means, dens.SDs, dens.Params, dens.Out)
		}
		return nil
	}
	if d.gpu == nil {
		return cpu()
	}
	steps := len(knn)
	whole := dens == nil || d.densityUncovered(len(dens.Means)) == ""
	if dens != nil {
		steps++
	}
	for _, s := range knn {
		whole = whole && knnUncovered(s.Model.K, len(s.Model.Points)) == ""
	}
	if !whole || steps > gpukern.MaxScoreSteps {
		for _, s := range knn {
			if err := d.ModelWeights(s.Model, s.Queries, s.Out); err != nil {
				return err
			}
		}
		if dens != nil {
			return d.DetectRecords(dens.Model, dens.Clusters, dens.Means, dens.SDs, dens.Params, dens.Out)
		}
		return nil
	}
	return d.step("batch scoring", "", func() error {
		var sc gpukern.Scoring
		var verdicts []gpukern.DensityVerdict
		if dens != nil {
			gm, err := d.residentDensity(dens.Model, dens.Clusters)
			if err != nil {
				return err
			}
			verdicts = make([]gpukern.DensityVerdict, len(dens.Out))
			sc.Density = &gpukern.DensityStep{Model: gm, Means: dens.Means, SDs: dens.SDs, Params: DensityParams(dens.Params), Out: verdicts}
		}
		for _, s := range knn {
			S, err := d.points.get(d.gpu, s.Model)
			if err != nil {
				return err
			}
			sc.KNN = append(sc.KNN, gpukern.KNNStep{S: S, Q: s.Queries, K: s.Model.K, Out: s.Out})
		}
		if err := gpukern.Score(d.gpu, &sc); err != nil {
			return err
		}
		for i, v := range verdicts {
			dens.Out[i] = density.Verdict(v)
		}
		return nil
	}, cpu)
}
