package detect

import (
	"fmt"
	"math"
	"time"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// Model is everything a record is scored against: the window's normalisation, its
// micro-clusters and density, and its solving set with w*. A Model is immutable once built;
// the stage swaps whole models, so scoring never sees a half-built one.
type Model struct {
	// Version increments with every rebuild (1 = the first model).
	Version uint64
	// Features are the feature names, in column order.
	Features []string
	// Offset and Scale normalise a value: x' = (x - Offset[j]) * Scale[j], computed in float64
	// and clamped to ±NormalisedLimit; the window's [QuantileLow, QuantileHigh] range maps to [0,1].
	Offset, Scale []float32
	// MicroClusters summarise the normalised window.
	MicroClusters *microcluster.MicroClusters
	// Density is the micro-cluster density the density test samples.
	Density *density.Model
	// Distance is the solving set of the normalised window with k and w*.
	Distance *solvingset.Model
	// WindowRecords is how many records the model was built from.
	WindowRecords int
	// Subspaces are the PROCLUS clusters of the normalised window (detect.proclus; nil when
	// off): each record is also density-tested in its nearest cluster's subspace.
	Subspaces *proclus.Result
	// Members are the records the model was built from, by identity (members.go): scored,
	// they do not count themselves as their own neighbour.
	Members Members
	// WindowSpan is the event time the window the model was built from covers (windowRing.span:
	// its oldest hundredth's median time to its newest's), set only for a stream with cyclic
	// time columns (Deps.Cycles), which the model reads only when it spans their period
	// (cycles.go); 0 otherwise, and for a model whose snapshot was written without it.
	WindowSpan time.Duration
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
	return buildOn(nil, cols, sds, features, cfg, version)
}

// buildOn is Build with the steps an accelerator takes on a (nil: the CPU): the window is
// normalised, then each of the model's detectors (modelDetectors) builds its part.
func buildOn(a Accelerator, cols, sds [][]float32, features []string, cfg Config, version uint64) (*Model, error) {
	return buildSteps(a, cols, sds, features, cfg, version, nil)
}

// buildSteps is buildOn calling step (when not nil) after the normalisation ("sort +
// normalisation") and after each detector's Build (its type), with the time since the step
// began: the build's profile for the benchmarks.
func buildSteps(a Accelerator, cols, sds [][]float32, features []string, cfg Config, version uint64, step func(what string, took time.Duration)) (*Model, error) {
	start := time.Now()
	rows := 0
	if len(cols) > 0 {
		rows = len(cols[0])
	}
	if rows < 2 {
		return nil, fmt.Errorf("detect: a model needs at least 2 records, the window holds %d", rows)
	}
	m := &Model{Version: version, Features: features, WindowRecords: rows, Params: buildParams(cfg)}
	var spread []float64
	sorted := sortedColumns(cols)
	m.Offset, m.Scale, spread = robustNormalisation(sorted)
	ncols := make([][]float32, len(cols))
	for j := range cols {
		ncols[j] = normalise(cols[j], m.Offset[j], m.Scale[j], nil)
	}
	nsds := scaleSDs(sds, m.Scale, rows)
	if step != nil {
		step("sort + normalisation", time.Since(start))
	}

	w := &BuildWindow{Raw: cols, Sorted: sorted, Means: ncols, SDs: nsds, Spread: spread, Cfg: &cfg}
	for _, d := range modelDetectors(a, features) {
		t := time.Now()
		if err := d.Build(m, w); err != nil {
			return nil, err
		}
		if step != nil {
			step(fmt.Sprintf("%T", d), time.Since(t))
		}
	}
	m.BuiltAt = time.Now()
	m.BuildTime = m.BuiltAt.Sub(start)
	return m, nil
}

// EffectiveN is the number of top outliers that define w* for a model built from rows records
// when distance.n is configured for a full window: n scaled to the window the model was built
// from, ceil(n·rows/window), at least 1. distance.n is a share of the window (0.1% by default);
// taken as a count, the first model (min_records = a tenth of the window) would flag ten
// times that share of the stream until the window fills.
func EffectiveN(n, window, rows int) int {
	if rows >= window {
		return min(n, rows)
	}
	return max(1, min(rows, int((int64(n)*int64(rows)+int64(window)-1)/int64(window))))
}

// Normalisation quantiles: each feature's [QuantileLow, QuantileHigh] range of the window maps
// to [0,1]. A quantile range, not the window's min and max, so that a few extreme records (a
// FLT_MAX "no reading" sentinel, a 1e20 glitch) neither squeeze every other record into a sliver
// next to 0 nor hide each other: up to 0.5% of the window on each side can be arbitrarily far
// out without moving the scale. Most records still land in [0,1], where eta keeps the paper's
// meaning (the average density on [0,1] is about 1); the tails fall a little outside it.
const (
	QuantileLow  = 0.005
	QuantileHigh = 0.995
)

// NormalisedLimit bounds every normalised value and uncertainty: |x'| <= 1e6, i.e. a million
// window ranges from the window's bulk. Normalisation runs in float64 and is clamped here, so
// a valid float32 input (up to ±3.4e38) never becomes ±Inf: the squared distances of the
// solving set (at most d·(2e6)² ≈ 1.5e15 for d = 384) and the weights (k of them) stay finite
// in float32 and float64, and every record beyond the limit is already as far out as any
// detector can tell apart (zero density, a weight far above any w*).
const NormalisedLimit = 1e6

// robustNormalisation maps each column's [QuantileLow, QuantileHigh] range to [0,1]. When
// that range is empty (more than 99% of the values tie) the full [min, max] is used, and a
// constant column gets scale 1 (its values all map to 0), so nothing divides by zero. A range
// so narrow that its inverse overflows float32 is treated as constant too. iqr is each column's
// interquartile range in normalised units (for the robust bandwidth). sorted holds each column
// in ascending order (sortedColumns).
func robustNormalisation(sorted [][]float32) (offset, scale []float32, iqr []float64) {
	offset = make([]float32, len(sorted))
	scale = make([]float32, len(sorted))
	iqr = make([]float64, len(sorted))
	for j, buf := range sorted {
		offset[j], scale[j] = 0, 1
		n := len(buf)
		if n == 0 {
			continue
		}
		lo, hi := buf[int(QuantileLow*float64(n-1))], buf[int(math.Ceil(QuantileHigh*float64(n-1)))]
		if !(hi > lo) {
			lo, hi = buf[0], buf[n-1]
		}
		offset[j] = lo
		if hi > lo {
			if s := 1 / (float64(hi) - float64(lo)); s <= math.MaxFloat32 {
				scale[j] = float32(s)
			}
		}
		iqr[j] = (float64(buf[(3*(n-1))/4]) - float64(buf[(n-1)/4])) * float64(scale[j])
	}
	return offset, scale, iqr
}

// normalise writes (x - offset) * scale into dst (allocated when too small) and returns it.
// The arithmetic is float64 and the result is clamped to ±NormalisedLimit: no finite input
// overflows.
func normalise(x []float32, offset, scale float32, dst []float32) []float32 {
	if cap(dst) < len(x) {
		dst = make([]float32, len(x))
	}
	dst = dst[:len(x)]
	o, sc := float64(offset), float64(scale)
	for i, v := range x {
		dst[i] = float32(max(-NormalisedLimit, min(NormalisedLimit, (float64(v)-o)*sc)))
	}
	return dst
}

// scaleSD is an uncertainty in normalised units, clamped like the values.
func scaleSD(v, scale float32) float32 {
	return float32(min(NormalisedLimit, float64(v)*float64(scale)))
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
			out[j][i] = scaleSD(v, scale[j])
		}
	}
	return out
}
