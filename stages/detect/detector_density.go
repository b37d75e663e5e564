package detect

import (
	"fmt"
	"strings"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// densityDetector is the density test (Matsumoto, Hung, Yiu; package density) as a Detector:
// its part of a model is the window's micro-clusters and their density (MicroClusters,
// Density); a record's verdict is whether its eta-probability, with its own uncertainty, is
// below delta in some subspace of the mode. The accelerator (nil: the CPU) micro-clusters the
// window and tests the records.
type densityDetector struct {
	accel    Accelerator
	names    *subspaceNames
	verdicts []density.Verdict // scratch, batch after batch
}

// Build micro-clusters the normalised window and makes its density with robust bandwidths.
func (d *densityDetector) Build(m *Model, w *BuildWindow) error {
	cfg, rows := w.Cfg, len(w.Means[0])
	q := min(cfg.Density.Clusters, rows)
	mc, _, err := clusterOn(d.accel, w.Means, w.SDs, q, cfg.Density.Iterations, cfg.Seed)
	if err != nil {
		return fmt.Errorf("detect: micro-clustering the window: %w", err)
	}
	m.MicroClusters = mc
	h, err := density.Bandwidths(mc)
	if err != nil {
		return fmt.Errorf("detect: bandwidths: %w", err)
	}
	// Silverman's robust rule: sigma is min(standard deviation, IQR/1.349). One record far out
	// inflates the standard deviation (a 1e6 in 50,000 records makes it about 4,500) and with it
	// the bandwidth, until the density is below eta everywhere and every record is flagged; the
	// interquartile range does not move. An IQR of 0 (over half the values tie) gives no bound.
	for j := range h {
		if w.Spread[j] > 0 {
			h[j] = min(h[j], density.Silverman(w.Spread[j]/1.349, int64(rows)))
		}
	}
	m.Density, err = density.NewModel(mc, h)
	if err != nil {
		return fmt.Errorf("detect: density model: %w", err)
	}
	if cfg.Density.Mode != DensityIndependent {
		m.Density.Bounds() // this mode samples: build the bounds table here, off the scoring path
	}
	return nil
}

// plan adds the batch's density test to the batch's accelerator call.
func (d *densityDetector) plan(q *Query, p *devicePlan) {
	p.density = &density.Scoring{Model: q.Model.Density, Clusters: q.Model.MicroClusters, Means: q.Means, SDs: q.SDs,
		Params: q.Density, Out: d.verdictsFor(len(q.Means[0]))}
}

func (d *densityDetector) verdictsFor(n int) []density.Verdict {
	if cap(d.verdicts) < n {
		d.verdicts = make([]density.Verdict, n)
	}
	return d.verdicts[:n]
}

// Score writes DensityOutlier, EtaProbability and Subspace.
func (d *densityDetector) Score(q *Query, out []batch.Score) error {
	verdicts := d.verdictsFor(len(out))
	if !q.planned { // the CPU (with a device, plan's call tested them)
		if err := q.Model.Density.DetectRecords(q.Means, q.SDs, q.Density, verdicts); err != nil {
			return fmt.Errorf("detect: density: %w", err)
		}
	}
	onRows(len(out), func(lo, hi int) { // (a batch's scores are megabytes)
		for i := lo; i < hi; i++ {
			v := verdicts[i]
			out[i].DensityOutlier, out[i].EtaProbability, out[i].Subspace = v.Outlier, v.EtaProbability, d.names.of(v.Subspace)
		}
	})
	return nil
}

// Explain: "eta-probability P < delta in [f ...]".
func (d *densityDetector) Explain(s *batch.Score) string {
	if !s.DensityOutlier {
		return ""
	}
	return "eta-probability " + fmtG(s.EtaProbability) + " < delta in [" + strings.Join(s.Subspace, " ") + "]"
}
