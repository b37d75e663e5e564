package detect

import (
	"strings"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// Detector is one scorer of the stage. Each builds its part of a model from the window, scores
// a batch into the fields of batch.Score it owns, and explains its flag. The model and the stage
// loop over the detectors in a fixed order (modelDetectors, Stage.detectors); the decision that
// is emitted (detect.combine, detect.flag_by) is the stage's, taken from the fields once every
// detector has written (decide in decide.go). A new detector is a new implementation of this
// interface, a file of its own named for it, and a place in the order.
type Detector interface {
	// Build adds the detector's part to m (a field of Model) from the window. It runs on the
	// build goroutine with a detector of its own (no state is shared with scoring).
	Build(m *Model, w *BuildWindow) error
	// Score writes the detector's fields of out (one per record of q) for a batch under q.Model.
	// A detector whose part m lacks (a snapshot without it, the detector off) leaves them as
	// they are.
	Score(q *Query, out []batch.Score) error
	// Explain is the reason, in words, that the detector fired on a scored record ("" when it
	// did not): replay's reason column joins them (Reason).
	Explain(s *batch.Score) string
}

// Follower is the optional part of a Detector whose state follows the window push by push
// between builds instead of being part of the model: the hypercube's cell counts. Counting a
// batch in and its evicted records out costs O(batch); rebuilding the counts from the window
// for every batch would cost O(window). The state is reset from the window when the
// normalisation (a new model), the window or the detector's keys change.
type Follower interface {
	// Following says whether Follow needs the pushes now (false: off, or no model yet); the
	// stage collects the evicted records only then.
	Following() bool
	// Reset recounts the state from the window under m and cfg (m nil: no model), less the
	// window's records that out marks (oldest first; nil: none).
	Reset(m *Model, cfg *Config, win *microcluster.Window, out []bool) error
	// Follow applies one push: the records added and those evicted (raw units), under m (the
	// stage passes those it counts: hypercube_warm.go).
	Follow(m *Model, added, evicted [][]float32) error
}

// BuildWindow is what a model is built from: the window's snapshot in raw units and in the
// model's normalised units, with the configuration of the build.
type BuildWindow struct {
	Raw        [][]float32 // column-major, raw units
	Sorted     [][]float32 // Raw's columns each in ascending order (the build's one sort)
	Means, SDs [][]float32 // normalised by the model's Offset and Scale (SDs 0 when none)
	// Spread is each feature's interquartile range in normalised units (the robust bandwidth).
	Spread []float64
	Cfg    *Config
}

// Query is one batch to score under the serving model.
type Query struct {
	Model *Model
	Cfg   *Config // the configuration in force (Reconfigure changes it between batches)
	// Raw are the batch's means in raw units; Means and SDs the same in the model's units.
	Raw, Means, SDs [][]float32
	// Density are the density test's parameters, Index the records' stream indices (identity).
	Density density.Params
	// Batch gives the records' identities (Members: a record of the model's window is not its
	// own neighbour).
	Batch *batch.Batch
	// planned: the detectors' device steps ran in one accelerator call before Score
	// (devicePlanner); their results are in the detectors' buffers.
	planned bool
	// Rows are the batch's rows the query's records are, in order (nil: all of them): under
	// key_by the global model scores the records of keys without a model alone (globalRows).
	Rows []int
	// Uncounted are the query's records the hypercube's counts left out (nil: none; warming
	// ones, hypercube_warm.go): they count themselves when scored.
	Uncounted []bool
}

// modelDetectors are the detectors whose parts make a model, in the order they build and
// score: the density test, PROCLUS's subspaces (which refine the density verdict), the
// solving-set prediction, and the calibrated ranking (which reads no other detector's fields;
// flag_by: rate decides by it). a (nil: the CPU) runs the steps it can.
func modelDetectors(a Accelerator, features []string) []Detector {
	names := newSubspaceNames(features)
	return []Detector{
		&densityDetector{accel: a, names: names},
		&proclusDetector{names: names},
		&solvingSetDetector{accel: a},
		&rankDetector{accel: a},
	}
}

// explainOrder is the order of Reason's parts: the alarm threshold first, then the paper's
// verdicts, then the hypercube's. PROCLUS has no part of its own: it sets the density
// verdict and its subspace.
var explainOrder = []Detector{&rankDetector{}, &densityDetector{}, &solvingSetDetector{}, &hypercubeDetector{}}

// Reason says why a flagged (or suppressed) record was flagged, ';'-separated: the threshold
// ("score X >= threshold T" with the features farthest out), the density test
// ("eta-probability P < delta in [f]") and the solving set's verdict ("w_k(q,S) W >= w* V",
// which never misses a top-n outlier of the window) and, when enabled, the hypercube's
// ("hypercube neighbours N <= max_neighbours"): the tests that fired. Which of them decide the
// flag is detect.flag_by's and detect.combine's rule. A record of a key still warming
// (detect.key_by) says it was scored by the global model (batch.WarmingReason). Empty for a
// record neither flagged nor suppressed, so a reason never stands beside a verdict it
// contradicts.
func Reason(s *batch.Score) string {
	if !s.Outlier && !s.Suppressed {
		return ""
	}
	var parts []string
	for i, d := range explainOrder {
		if e := d.Explain(s); e != "" {
			parts = append(parts, e)
		}
		if i == 0 && s.Warming { // after the threshold, where the sink's explanation says it
			parts = append(parts, batch.WarmingReason)
		}
		if a := batch.AlertReason(s); i == 0 && a != "" { // (so too the alert group's)
			parts = append(parts, a)
		}
	}
	return strings.Join(parts, "; ")
}

// subspaceNames names subspaces by their features. One-dimensional subspaces (all of mode
// independent) share one slice per feature: no allocation per record on the hot path. Scores
// are read-only downstream, so sharing is safe.
type subspaceNames struct {
	features []string
	singles  [][]string // singles[j] = {features[j]}
}

func newSubspaceNames(features []string) *subspaceNames {
	n := &subspaceNames{features: features, singles: make([][]string, len(features))}
	for j, f := range features {
		n.singles[j] = []string{f}
	}
	return n
}

// of names a subspace's features.
func (n *subspaceNames) of(dims []int) []string {
	if len(dims) == 1 {
		return n.singles[dims[0]]
	}
	if len(dims) == 0 {
		return nil
	}
	sub := make([]string, len(dims))
	for t, j := range dims {
		sub[t] = n.features[j]
	}
	return sub
}
