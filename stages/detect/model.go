package detect

import (
	"fmt"
	"math"
	"time"

	"github.com/outlierd/outlierd/stages/detect/density"
	"github.com/outlierd/outlierd/stages/detect/solvingset"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// Model is everything a record is scored against: the window's normalisation, its
// micro-clusters and density, and its solving set with w*. A Model is immutable once built;
// the stage swaps whole models, so scoring never sees a half-built one.
type Model struct {
	// Version increments with every rebuild (1 = the first model).
	Version uint64
	// Features are the feature names, in column order.
	Features []string
	// Offset and Scale normalise a value to the window's [0,1]: x' = (x - Offset[j]) * Scale[j].
	Offset, Scale []float32
	// MicroClusters summarise the normalised window.
	MicroClusters *microcluster.MicroClusters
	// Density is the micro-cluster density the density test samples.
	Density *density.Model
	// Distance is the solving set of the normalised window with k and w*.
	Distance *solvingset.Model
	// WindowRecords is how many records the model was built from.
	WindowRecords int
	// WindowEnd is the stream index one past the last record of the model's window: records
	// [WindowEnd-WindowRecords, WindowEnd) are members of the data the model was built from
	// (0: unknown, e.g. a model loaded from a snapshot of another process).
	WindowEnd uint64
	// BuiltAt and BuildTime say when and how long the build took.
	BuiltAt   time.Time
	BuildTime time.Duration
	// Params are the configuration values the model was built with (reconfigure.go: a reload
	// that changes them rebuilds; a snapshot built with others is refused).
	Params BuildParams
	// TopWeights are the exact weights of the window's top-n outliers, descending (ties at the
	// n-th included), so w* for any n' <= len(TopWeights) is TopWeights[n'-1] (the w* policy).
	TopWeights []float64
	// Ranker gives the ranking scores, their calibration against the window and the alarm
	// threshold (calibrate.go); nil for a model restored from a snapshot without it.
	Ranker *Ranker
}

// Build makes a model from a window snapshot (raw units, column-major; sds nil when the
// stream carries no uncertainty).
func Build(cols, sds [][]float32, features []string, cfg Config, version uint64) (*Model, error) {
	return buildOn(nil, nil, cols, sds, features, cfg, version)
}

// buildOn is Build with SolvingSet on the accelerator a (nil: the CPU).
func buildOn(a Accelerator, rep *accelReport, cols, sds [][]float32, features []string, cfg Config, version uint64) (*Model, error) {
	start := time.Now()
	rows := 0
	if len(cols) > 0 {
		rows = len(cols[0])
	}
	if rows < 2 {
		return nil, fmt.Errorf("detect: a model needs at least 2 records, the window holds %d", rows)
	}
	m := &Model{Version: version, Features: features, WindowRecords: rows, Params: buildParams(cfg)}
	m.Offset, m.Scale = minMaxNormalisation(cols)
	ncols := make([][]float32, len(cols))
	for j := range cols {
		ncols[j] = normalise(cols[j], m.Offset[j], m.Scale[j], nil)
	}
	nsds := scaleSDs(sds, m.Scale, rows)

	q := min(cfg.Density.Clusters, rows)
	mc, _, err := microcluster.Cluster(ncols, nsds, q, cfg.Density.Iterations, cfg.Seed, 0)
	if err != nil {
		return nil, fmt.Errorf("detect: micro-clustering the window: %w", err)
	}
	m.MicroClusters = mc
	h, err := density.Bandwidths(mc)
	if err != nil {
		return nil, fmt.Errorf("detect: bandwidths: %w", err)
	}
	m.Density, err = density.NewModel(mc, h)
	if err != nil {
		return nil, fmt.Errorf("detect: density model: %w", err)
	}
	if mode, _ := density.ParseMode(cfg.Density.Mode); mode != density.Independent {
		m.Density.Bounds() // this mode samples: build the bounds table here, off the scoring path
	}

	p := solvingset.Params{K: min(cfg.Distance.K, rows-1), N: min(cfg.Distance.N, rows), M: cfg.Distance.M, Seed: cfg.Seed}
	res, err := solvingSetOn(a, rep, ncols, p)
	if err != nil {
		return nil, fmt.Errorf("detect: solving set of the window: %w", err)
	}
	m.Distance = solvingset.NewModel(ncols, features, res, p.K)
	m.TopWeights = make([]float64, len(res.Outliers))
	for i, o := range res.Outliers { // sorted by descending weight
		m.TopWeights[i] = o.Weight
	}
	if m.Ranker, err = buildRanker(cols, features, cfg); err != nil {
		return nil, err
	}
	m.BuiltAt = time.Now()
	m.BuildTime = m.BuiltAt.Sub(start)
	return m, nil
}

// minMaxNormalisation maps each column's [min, max] to [0,1]; a constant column gets
// scale 1 (its values all map to 0), so it neither divides by zero nor dominates distances.
func minMaxNormalisation(cols [][]float32) (offset, scale []float32) {
	offset = make([]float32, len(cols))
	scale = make([]float32, len(cols))
	for j, c := range cols {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range c {
			lo, hi = min(lo, v), max(hi, v)
		}
		offset[j], scale[j] = lo, 1
		if hi > lo {
			scale[j] = float32(1 / (float64(hi) - float64(lo)))
		}
	}
	return offset, scale
}

// normalise writes (x - offset) * scale into dst (allocated when too small) and returns it.
func normalise(x []float32, offset, scale float32, dst []float32) []float32 {
	if cap(dst) < len(x) {
		dst = make([]float32, len(x))
	}
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = (v - offset) * scale
	}
	return dst
}

// scaleSDs scales uncertainties by the normalisation factor; without uncertainty columns
// every record is taken as certain (sd 0).
func scaleSDs(sds [][]float32, scale []float32, rows int) [][]float32 {
	out := make([][]float32, len(scale))
	for j := range scale {
		out[j] = make([]float32, rows)
		if sds == nil || sds[j] == nil {
			continue
		}
		for i, v := range sds[j] {
			out[j][i] = v * scale[j]
		}
	}
	return out
}
