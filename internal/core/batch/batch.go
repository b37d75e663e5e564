// Package batch holds the contract types that flow between the stages of the pipeline:
// a Batch travels source -> microcluster -> detect -> sink, and a DeadLetter goes from the
// source straight to the sink's dead-letter topic.
//
// Ownership: a Batch has exactly one owner at a time, the stage that holds it. A stage hands
// it on over a channel and must not touch it afterwards. The sink releases Record after the
// broker acknowledged the batch's outputs and the offsets were marked done.
package batch

import (
	"hash/fnv"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
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

// Partitions are the records' source partitions (the _partition column), sharing the Arrow
// buffer; nil when the record has no such column.
func (b *Batch) Partitions() []int32 {
	if idx := b.Record.Schema().FieldIndices(ColPartition); len(idx) == 1 {
		if c, ok := b.Record.Column(idx[0]).(*array.Int32); ok {
			return c.Int32Values()
		}
	}
	return nil
}

// Offsets are the records' source offsets (the _offset column), sharing the Arrow buffer; nil
// when the record has no such column.
func (b *Batch) Offsets() []int64 {
	if idx := b.Record.Schema().FieldIndices(ColOffset); len(idx) == 1 {
		if c, ok := b.Record.Column(idx[0]).(*array.Int64); ok {
			return c.Int64Values()
		}
	}
	return nil
}

// TopicHash is a topic's hash, computed once for every record of a batch (StreamIndex).
type TopicHash uint64

// TopicHashOf hashes a topic name (FNV-1a, 64 bits).
func TopicHashOf(topic string) TopicHash {
	h := fnv.New64a()
	h.Write([]byte(topic))
	return TopicHash(h.Sum64())
}

// StreamIndex is a record's identity as one number: the topic's hash mixed with the partition,
// plus the offset. Whatever reads a record (a first delivery, a redelivery after a crash, another
// process), it gets the same index, so anything derived from it (the density test's random
// stream) gives the same verdict. Offsets of one partition map to consecutive, distinct indices;
// two partitions collide only if their hashes lie within the offsets' span of each other
// (probability about span/2^64).
func (t TopicHash) StreamIndex(partition int32, offset int64) uint64 {
	z := uint64(t) ^ (uint64(uint32(partition)) * 0x9E3779B97F4A7C15)
	// One splitmix64 round spreads the partitions across the 64-bit space.
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return (z ^ (z >> 31)) + uint64(offset)
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
	// SubspaceOf says where Subspace came from when a detector chose it ("PROCLUS cluster 3"),
	// empty for the density mode's own subspaces.
	SubspaceOf string
	// DistanceOutlier: Weight >= WStar.
	DistanceOutlier bool
	// Weight is w_k(q, S), the sum of the distances to the k nearest solving-set points.
	Weight float64
	// WStar is the weight of the n-th top outlier of the window the model was built from.
	WStar float64
	// Hypercube is set when the hypercube density detector ran (detect.hypercube.enabled).
	Hypercube *HypercubeScore
	// Score is the combined outlier score, higher = more outlying: the mean over the ranking
	// detectors (detect.score.detectors) of -log10 of the record's tail probability among the
	// window's own scores (stages/detect/calibrate.go). NaN when the model has no ranking part.
	Score float64
	// Threshold is the combined score the model flags above at detect.alarm_rate.
	Threshold float64
	// DensityScore is the density detector's raw ranking score: the per-feature tail score
	// (sum over features of -ln of the rarer tail probability in the window, ECOD), in nats.
	DensityScore float64
	// DistanceScore is the distance detector's raw ranking score: w_k(q, R), the k-NN weight
	// against a uniform sample R of the window (in the window's standardised units).
	DistanceScore float64
}

// HypercubeScore is the hypercube density detector's result for one record (GDBOD over the
// window's grid counts).
type HypercubeScore struct {
	// Score is O = 1 - w/w_max, higher = more outlying.
	Score float64
	// Neighbours is w: the window's records in the record's cell and every cell within ±1 of it
	// in every dimension (the record itself included).
	Neighbours int64
	// Outlier: Neighbours <= detect.hypercube.max_neighbours.
	Outlier bool
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
