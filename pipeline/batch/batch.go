// Package batch holds the contract types that flow between the stages of the pipeline:
// a Batch travels source -> microcluster -> detect -> sink, and a DeadLetter goes from the
// source straight to the sink's dead-letter topic.
//
// Ownership: a Batch has exactly one owner at a time, the stage that holds it. A stage hands
// it on over a channel and must not touch it afterwards. The sink releases Record after the
// broker acknowledged the batch's outputs and the offsets were marked done.
package batch

import (
	"time"

	"github.com/apache/arrow/go/v15/arrow"
)

// Column names of the source coordinates in Batch.Record, after the feature and uncertainty columns.
const (
	ColPartition = "_partition" // Int32
	ColOffset    = "_offset"    // Int64
	ColKey       = "_key"       // Binary, nullable
	ColTimestamp = "_timestamp" // Timestamp(ms, UTC): event time if configured, else the Kafka message time
)

// UncertaintySuffix names the uncertainty column of a feature: "<feature>_sd".
const UncertaintySuffix = "_sd"

// Batch is the unit of work of the pipeline.
type Batch struct {
	// Topic is the source topic of every record in the batch.
	Topic string
	// Features are the feature names, in the column order of the Float32 feature columns.
	Features []string
	// Record holds one Float32 column per feature (named as the feature), one Float32 column
	// per uncertainty ("<feature>_sd", present only when uncertainty is configured), then the
	// source coordinates _partition, _offset, _key and _timestamp.
	Record arrow.Record
	// Payloads are the original message values, row-aligned with Record.
	Payloads [][]byte
	// Scores are filled by the detect stage, row-aligned; nil before scoring.
	Scores []Score
	// ModelVersion is the version of the model that scored the batch (0 = none yet).
	ModelVersion uint64
}

// Len is the number of records in the batch.
func (b *Batch) Len() int {
	if b == nil || b.Record == nil {
		return 0
	}
	return int(b.Record.NumRows())
}

// Score is one record's verdict and the explanation a user reads.
type Score struct {
	// Scored is false when the record was passed through before the first model existed.
	Scored bool
	// Outlier is the combined decision (see the detect stage's combine rule).
	Outlier bool
	// DensityOutlier: the eta-probability was below delta in some subspace.
	DensityOutlier bool
	// EtaProbability is the lowest eta-probability seen over the tested subspaces.
	EtaProbability float64
	// Subspace names the features of the subspace where EtaProbability was seen.
	Subspace []string
	// DistanceOutlier: Weight >= WStar.
	DistanceOutlier bool
	// Weight is w_k(q, S), the sum of the distances to the k nearest solving-set points.
	Weight float64
	// WStar is the weight of the n-th top outlier of the window the model was built from.
	WStar float64
	// Score is the combined outlier score, higher = more outlying: the mean over the ranking
	// detectors (detect.score.detectors) of -log10 of the record's tail probability among the
	// window's own scores (stages/detect/calibrate.go). NaN when the model has no ranking part.
	Score float64
	// Threshold is the combined score the model flags above at detect.alarm_rate.
	Threshold float64
	// DensityScore is the density detector's raw ranking score: the per-feature tail score
	// (sum over features of -ln tail probability in the window, ECOD), in nats.
	DensityScore float64
	// DistanceScore is the distance detector's raw ranking score: w_k(q, R), the k-NN weight
	// against a uniform sample R of the window (normalised units).
	DistanceScore float64
}

// DeadLetter is a message that could not be decoded, with its source coordinates.
type DeadLetter struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Time      time.Time
	// Reason says what was wrong, e.g. `field "temp": not a number: "abc"`.
	Reason string
}
