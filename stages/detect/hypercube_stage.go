package detect

import (
	"fmt"
	"strconv"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// hypercubeDetector is the hypercube density detector (GDBOD; package hypercube,
// detect.hypercube) as a Detector and a Follower: the window's records counted per grid cell
// of the serving model's normalised space. Its state is not part of the model but follows the
// window batch by batch (hypercube.Counts: the batch added, the evicted records removed),
// rebuilt from the window only when the normalisation changes (a new model), the window does,
// or the detector's keys do (Reset). Counting a batch costs O(batch); rebuilding per batch
// would cost O(window), and a model rebuild would leave the counts a refresh behind.
//
// A scorer (RoleScorer) keeps no window: its counts are the builder's, published with each
// model (Stage.PublishedHypercube, InstallModel), frozen until the next model. Counting an
// empty window instead would give every record w = 0 and flag it.
type hypercubeDetector struct {
	counts *hypercube.Counts // nil when off or before the first model
	w      []int64
	o      []float64
	// scorer: the counts come from published (the serving model's, nil when its builder had
	// the detector off), never from the window.
	scorer    bool
	published *hypercube.Cells
}

// hypercubeLo, hypercubeHi are the grid's span in the normalised space, per dimension: the
// window's 0.5%-99.5% range, [0,1], as GDBOD spans its data's range; the tails beyond land in
// the edge cells (the other detectors judge how far out they are).
const hypercubeLo, hypercubeHi = 0.0, 1.0

// Build does nothing: the counts are the Follower's state, not the model's.
func (d *hypercubeDetector) Build(*Model, *BuildWindow) error { return nil }

// Following is true while the counts exist.
func (d *hypercubeDetector) Following() bool { return d.counts != nil }

// Reset rebuilds the counts from the window under m, less the records out marks (or drops them
// when the detector is off or no model serves).
func (d *hypercubeDetector) Reset(m *Model, cfg *Config, win *microcluster.Window, out []bool) error {
	d.counts = nil
	if !cfg.Hypercube.Enabled || m == nil {
		return nil
	}
	if d.scorer {
		switch p := d.published; {
		case p == nil:
			return fmt.Errorf("detect: model %d came without hypercube counts (detect.hypercube.enabled is off in the builder)", m.Version)
		case p.Grid.Bins != cfg.Hypercube.Bins || p.Grid.Dims() != len(m.Features):
			return fmt.Errorf("detect: model %d's hypercube counts are on %d bins x %d dimensions, detect.hypercube.bins is %d for %d features",
				m.Version, p.Grid.Bins, p.Grid.Dims(), cfg.Hypercube.Bins, len(m.Features))
		}
		d.counts = hypercube.CountsOf(d.published)
		return nil
	}
	dims := len(m.Features)
	lo, hi := make([]float64, dims), make([]float64, dims)
	for j := range dims {
		lo[j], hi[j] = hypercubeLo, hypercubeHi
	}
	g, err := hypercube.NewGrid(cfg.Hypercube.Bins, lo, hi)
	if err != nil {
		return fmt.Errorf("detect: hypercube grid: %w", err)
	}
	c := hypercube.NewCounts(g)
	window, _ := win.Snapshot()
	if len(window) > 0 && len(out) == len(window[0]) {
		window = rowsKept(window, out)
	}
	nm, _ := m.normalised(window, nil, nil)
	if err := c.Add(nm); err != nil {
		return fmt.Errorf("detect: hypercube counts: %w", err)
	}
	d.counts = c
	return nil
}

// Follow applies one push to the counts: the batch's records added, the evicted ones removed,
// both normalised by the serving model.
func (d *hypercubeDetector) Follow(m *Model, added, evicted [][]float32) error {
	c := d.counts
	if c == nil {
		return nil
	}
	nm, _ := m.normalised(added, nil, nil)
	if err := c.Add(nm); err != nil {
		return fmt.Errorf("detect: hypercube counts: %w", err)
	}
	if len(evicted) > 0 && len(evicted[0]) > 0 {
		ne, _ := m.normalised(evicted, nil, nil)
		if err := c.Remove(ne); err != nil {
			return fmt.Errorf("detect: hypercube counts: %w", err)
		}
	}
	return nil
}

// Score writes Hypercube from the counts (normalised queries).
func (d *hypercubeDetector) Score(q *Query, out []batch.Score) error {
	c := d.counts
	if c == nil {
		return nil
	}
	n := len(out)
	if cap(d.w) < n {
		d.w, d.o = make([]int64, n), make([]float64, n)
	}
	w, o := d.w[:n], d.o[:n]
	var self []bool // (the records left out of the counts count themselves, as the counted do)
	if len(q.Uncounted) == n {
		self = q.Uncounted
	}
	if err := c.ScoreCounting(q.Means, self, w, o); err != nil {
		return fmt.Errorf("detect: hypercube score: %w", err)
	}
	hs := make([]batch.HypercubeScore, n) // one allocation per batch, shared by the rows
	for i := range n {
		hs[i] = batch.HypercubeScore{Score: o[i], Neighbours: w[i], Outlier: w[i] <= int64(q.Cfg.Hypercube.MaxNeighbours)}
		out[i].Hypercube = &hs[i]
	}
	return nil
}

// Explain: "hypercube neighbours N <= max_neighbours".
func (d *hypercubeDetector) Explain(s *batch.Score) string {
	if h := s.Hypercube; h != nil && h.Outlier {
		return "hypercube neighbours " + strconv.FormatInt(h.Neighbours, 10) + " <= max_neighbours"
	}
	return ""
}

// PublishedHypercube is what a builder publishes with its serving model for the scorers: the
// hypercube counts of its window under that model (hypercube.AppendCells), or nil when the
// detector is off. Called when the model is announced (Deps.OnModel), it gives the counts of the
// window the model was installed on.
func (s *Stage) PublishedHypercube() []byte {
	for _, f := range s.followers {
		if hc, ok := f.(*hypercubeDetector); ok && hc.counts != nil {
			return hypercube.AppendCells(nil, hc.counts.Cells())
		}
	}
	return nil
}
