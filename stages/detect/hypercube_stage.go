package detect

import (
	"fmt"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// The hypercube density detector in the stage (detect.hypercube): the window's records counted
// per grid cell of the serving model's normalised space. The counts follow the window batch by
// batch (hypercube.Counts: the batch added, the evicted records removed) and are rebuilt from the
// window only when the normalisation changes (a new model) or the detector's keys do.

// hypercubeLo, hypercubeHi are the grid's span in the normalised space, per dimension: the
// window's 0.5%-99.5% range, [0,1], as GDBOD spans its data's range; the tails beyond land in
// the edge cells (the other detectors judge how far out they are).
const hypercubeLo, hypercubeHi = 0.0, 1.0

// hcState is the detector's state: the counts over the window under the serving model, and
// the scratch of the evicted records.
type hcState struct {
	counts  *hypercube.Counts // nil when off or before the first model
	evicted microcluster.Evicted
	w       []int64
	o       []float64
}

// resetHypercube rebuilds the counts from the window under the serving model (or drops them
// when the detector is off or no model serves).
func (s *Stage) resetHypercube() error {
	s.hc.counts = nil
	if !s.cfg.Hypercube.Enabled || s.model == nil {
		return nil
	}
	dims := len(s.features)
	lo, hi := make([]float64, dims), make([]float64, dims)
	for j := range dims {
		lo[j], hi[j] = hypercubeLo, hypercubeHi
	}
	g, err := hypercube.NewGrid(s.cfg.Hypercube.Bins, lo, hi)
	if err != nil {
		return fmt.Errorf("detect: hypercube grid: %w", err)
	}
	c := hypercube.NewCounts(g)
	cols, _ := s.win.Snapshot()
	nm, _ := s.model.normalised(cols, nil, nil)
	if err := c.Add(nm); err != nil {
		return fmt.Errorf("detect: hypercube counts: %w", err)
	}
	s.hc.counts = c
	return nil
}

// evictedSink is where Push reports the evicted records: the detector's scratch when it counts.
func (s *Stage) evictedSink() *microcluster.Evicted {
	if s.hc.counts == nil {
		return nil
	}
	s.hc.evicted.Reset()
	return &s.hc.evicted
}

// followWindow applies one push to the counts: the batch's records added, the evicted ones
// removed, both normalised by the serving model.
func (s *Stage) followWindow(means [][]float32) error {
	c := s.hc.counts
	if c == nil {
		return nil
	}
	nm, _ := s.model.normalised(means, nil, nil)
	if err := c.Add(nm); err != nil {
		return fmt.Errorf("detect: hypercube counts: %w", err)
	}
	if s.hc.evicted.Len() > 0 {
		ne, _ := s.model.normalised(s.hc.evicted.Cols, nil, nil)
		if err := c.Remove(ne); err != nil {
			return fmt.Errorf("detect: hypercube counts: %w", err)
		}
	}
	return nil
}

// scoreHypercube fills the batch's hypercube scores from the counts (normalised queries).
func (s *Stage) scoreHypercube(nm [][]float32, scores []batch.Score) error {
	c := s.hc.counts
	if c == nil {
		return nil
	}
	n := len(scores)
	if cap(s.hc.w) < n {
		s.hc.w, s.hc.o = make([]int64, n), make([]float64, n)
	}
	w, o := s.hc.w[:n], s.hc.o[:n]
	if err := c.Score(nm, w, o); err != nil {
		return fmt.Errorf("detect: hypercube score: %w", err)
	}
	hs := make([]batch.HypercubeScore, n) // one allocation per batch, shared by the rows
	for i := range n {
		hs[i] = batch.HypercubeScore{Score: o[i], Neighbours: w[i], Outlier: w[i] <= int64(s.cfg.Hypercube.MaxNeighbours)}
		scores[i].Hypercube = &hs[i]
	}
	return nil
}
