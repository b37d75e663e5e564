package detect

import (
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/core/config"
)

// The detect section's enums: typed words, decoded once when the YAML is loaded (each
// UnmarshalYAML: config.DecodeEnum) and checked by Config.Validate, so the stage switches on
// typed constants and never parses a word per batch. The words are the YAML's.

// BeforeModel is detect.before_model: what happens to records that arrive before the first
// model exists.
type BeforeModel string

// The before_model words.
const (
	BeforeModelHold BeforeModel = "hold" // wait for the first model; records are scored by it (no record goes unscored)
	BeforeModelPass BeforeModel = "pass" // emit unscored at once (scores.scored = false); nothing is flagged until the model exists
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *BeforeModel) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// Combine is detect.combine: the rule on the paper's verdicts that flags a record under
// flag_by: verdicts.
type Combine string

// The combine words.
const (
	CombineAny      Combine = "any"      // flag when either detector flags (the default: measured best across sets, docs/BENCHMARKS.md §3)
	CombineAll      Combine = "all"      // flag when both flag (fewer false positives, lower recall)
	CombineDensity  Combine = "density"  // density sampling alone
	CombineDistance Combine = "distance" // solving-set prediction alone
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *Combine) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// FlagBy is detect.flag_by: what raises a flag.
type FlagBy string

// The flag_by words.
const (
	FlagBySignificance FlagBy = "significance" // the combined score at least min_score, alarm starts capped at alarm_rate of the records
	FlagByRate         FlagBy = "rate"         // the combined score above the window's (1 - alarm_rate) quantile: a quota
	FlagByVerdicts     FlagBy = "verdicts"     // the paper's verdicts and the combine rule
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *FlagBy) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// KeyBy is detect.key_by: one model for the stream, or one per record key besides it.
type KeyBy string

// The key_by words.
const (
	KeyByNone KeyBy = "none" // one model for the whole stream
	KeyByKey  KeyBy = "key"  // a model per record key (keyed.go)
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *KeyBy) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// ScoreDetectors is detect.score.detectors: which calibrated scores the combined score takes.
type ScoreDetectors string

// The score.detectors words.
const (
	DetectorsBoth     ScoreDetectors = "both"     // the tail score's and the k-NN distance's (score.combine joins them)
	DetectorsDensity  ScoreDetectors = "density"  // the per-feature tail score alone
	DetectorsDistance ScoreDetectors = "distance" // the k-NN distance to the window sample alone
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *ScoreDetectors) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// ScoreCombine is detect.score.combine: how the calibrated scores of both detectors make the
// combined score.
type ScoreCombine string

// The score.combine words.
const (
	CombineMean ScoreCombine = "mean" // the mean surprisal: a record rare for both detectors ranks first
	CombineMax  ScoreCombine = "max"  // the largest: a record rare for either detector ranks high
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *ScoreCombine) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// ScoreWeights is detect.score.weights: how combine: mean weights the two detectors.
type ScoreWeights string

// The score.weights words.
const (
	WeightsAgreement ScoreWeights = "agreement" // per model, by how well the other detector confirms each one's top records
	WeightsEqual     ScoreWeights = "equal"     // the plain mean
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *ScoreWeights) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// RecentPastWeight is detect.recent_past_weight: how much of the recent past's decades Recent
// adds to a record's combined score (recent_past.go).
type RecentPastWeight string

// The recent_past_weight words.
const (
	PastWeightOne   RecentPastWeight = "one"   // all of them (docs/BENCHMARKS.md §12.19)
	PastWeightStale RecentPastWeight = "stale" // the share of the stream's last recent_past scored records its model scored at 2 decades or more
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *RecentPastWeight) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// RecentFarSide is detect.recent_far_side: how the combined score that Recent ranks grows beyond
// its model's calibrations (recent.go).
type RecentFarSide string

// The recent_far_side words.
const (
	FarSideLinear RecentFarSide = "linear" // as the combined score: linearly (rank.Calibration.Surprisal)
	FarSideLog    RecentFarSide = "log"    // the distance's: a Pareto tail of index 1 (Ranker.combineFar)
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *RecentFarSide) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// KeysTail is detect.keys.tail: where a key's model reads the significance of its records'
// deviations (keyed_fleet.go).
type KeysTail string

// The keys.tail words.
const (
	TailOwn   KeysTail = "own"   // the key's own calibration alone (its last keys.window records)
	TailFleet KeysTail = "fleet" // raised to a tail fitted on the fleet's pooled deviations
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *KeysTail) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// DensityMode is detect.density.mode: which subspaces the density test tests
// (ALGORITHMS.md §2; package density's Mode).
type DensityMode string

// The density.mode words.
const (
	DensityIndependent DensityMode = "independent"
	DensityRollup      DensityMode = "rollup"
	DensityRestricted  DensityMode = "restricted"
	DensityAveraging   DensityMode = "averaging"
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *DensityMode) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }

// valid says whether m is one of the words.
func (m DensityMode) valid() bool {
	switch m {
	case DensityIndependent, DensityRollup, DensityRestricted, DensityAveraging:
		return true
	}
	return false
}

// Algo is m as package density's Mode (independent for a word Validate refuses).
func (m DensityMode) Algo() density.Mode {
	switch m {
	case DensityRollup:
		return density.Rollup
	case DensityRestricted:
		return density.Restricted
	case DensityAveraging:
		return density.Averaging
	}
	return density.Independent
}

// DistanceSpace is detect.distance_space: the space of the global model's distance score
// (calibrate.go, whiten.go).
type DistanceSpace string

// The distance_space words.
const (
	SpaceStandardised DistanceSpace = "standardised" // each feature by its median and winsorised sd (standardisationOn)
	SpaceWhitened     DistanceSpace = "whitened"     // those coordinates decorrelated by the window's shrunk covariance (whiten.go)
)

// UnmarshalYAML decodes the word (Validate checks it).
func (v *DistanceSpace) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, v) }
