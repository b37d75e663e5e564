package accel

import (
	"errors"
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
	// users are the calls between get and put of this set: a set in use is not freed (scoring
	// calls of several batches run at once: the detect stage's overlap).
	users int
}

// get returns m.Points on g, uploading them when they are not resident, and counts the caller
// as a user until put(m). Sets beyond maxResidentPointSets are freed, least recently used
// first, once no call uses them.
func (r *residentPoints) get(g *gpukern.Device, m *solvingset.Model) (*gpukern.Columns, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.sets {
		if s.m == m {
			s.users++
			r.sets = append(append(r.sets[:i:i], r.sets[i+1:]...), s)
			return s.cols, nil
		}
	}
	cols, err := g.Upload(m.Points)
	if err != nil {
		return nil, err
	}
	r.sets = append(r.sets, pointSet{m: m, cols: cols, users: 1})
	return cols, r.evict()
}

// put ends a use of m's set begun by get.
func (r *residentPoints) put(m *solvingset.Model) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.sets {
		if r.sets[i].m == m && r.sets[i].users > 0 {
			r.sets[i].users--
			break
		}
	}
	return r.evict()
}

// evict frees the least recently used sets not in use while more than maxResidentPointSets are
// kept. r.mu held.
func (r *residentPoints) evict() error {
	for i := 0; len(r.sets) > maxResidentPointSets && i < len(r.sets); {
		old := r.sets[i]
		if old.users > 0 {
			i++
			continue
		}
		r.sets = append(r.sets[:i], r.sets[i+1:]...)
		if err := old.cols.Free(); err != nil {
			return fmt.Errorf("freeing an earlier model's points: %w", err)
		}
	}
	return nil
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
		err = gpukern.KNNWeightsOn(S, Q, m.K, out)
		return errors.Join(err, d.points.put(m))
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
	return d.step("batch scoring", "", func() (err error) {
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
			S, gerr := d.points.get(d.gpu, s.Model)
			if gerr != nil {
				return gerr
			}
			defer func() { err = errors.Join(err, d.points.put(s.Model)) }() // (the named result)
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
