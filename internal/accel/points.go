package accel

import (
	"fmt"
	"sync"

	"github.com/outlierd/outlierd/gpukern"
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
	uncovered := ""
	if m.K > gpukern.KNNMaxK || len(m.Points) > gpukern.MaxDims {
		uncovered = fmt.Sprintf("k=%d or %d dimensions above the GPU kernel's %d, %d", m.K, len(m.Points), gpukern.KNNMaxK, gpukern.MaxDims)
	}
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
