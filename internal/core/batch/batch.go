// Package batch holds the contract that flows between the stages of the pipeline: a Batch
// travels source -> detect -> sink, carrying its records (an Arrow record of the one Schema),
// their scores and the ack that tells the source they are done; DeadLetters go from the source
// to the sink's dead-letter topic with an ack of their own.
//
// Ownership, the one rule: a Batch has exactly one owner at a time, the goroutine holding it; it
// hands the batch on over a channel and does not touch it afterwards. The last owner calls
// Release: the sink loop (or the builder role's ack loop) after Ack, once the broker
// acknowledged the batch's outputs; any owner that drops a batch instead (a failure, the hard
// stop, batches held for a first model that never came) releases it without Ack, so its records
// are never committed and are read again after a restart (at-least-once).
package batch

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// Column names of the source coordinates in Batch.Record, after the feature and uncertainty columns.
const (
	ColPartition = "_partition" // Int32
	ColOffset    = "_offset"    // Int64
	ColKey       = "_key"       // Binary, nullable
	ColTimestamp = "_timestamp" // Timestamp(ms, UTC), nullable: event time if configured, else the Kafka message time (null: none)
)

// UncertaintySuffix names the uncertainty column of a feature: "<feature>_sd".
const UncertaintySuffix = "_sd"

// Schema is the Arrow schema of every batch of these features, the one definition that the
// source builds and every stage reads: one Float32 column per feature (named as the feature),
// one Float32 "<feature>_sd" per feature when withSD, then _partition (Int32), _offset (Int64),
// _key (Binary, nullable) and _timestamp (Timestamp ms, UTC, nullable: a record without a time).
func Schema(features []string, withSD bool) *arrow.Schema {
	fields := make([]arrow.Field, 0, 2*len(features)+4)
	for _, f := range features {
		fields = append(fields, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Float32})
	}
	if withSD {
		for _, f := range features {
			fields = append(fields, arrow.Field{Name: f + UncertaintySuffix, Type: arrow.PrimitiveTypes.Float32})
		}
	}
	fields = append(fields,
		arrow.Field{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: ColTimestamp, Type: TimestampType, Nullable: true},
	)
	return arrow.NewSchema(fields, nil)
}

// TimestampType is the type of the _timestamp column: milliseconds, UTC.
var TimestampType = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}

// Acker is told which source records are done; the source's checkpoint.Checkpointer is one.
type Acker interface {
	Done(partition int, offset int64) bool
}

// Batch is the unit of work of the pipeline. Make it with New (the columns are checked and
// resolved there, once); the accessors of a Batch not made by New return nil.
type Batch struct {
	// Topic is the source topic of every record in the batch.
	Topic string
	// Features are the feature names, in the column order of the Float32 feature columns.
	Features []string
	// Record holds the columns of Schema(Features, withSD).
	Record arrow.Record
	// Payloads are the original message values, row-aligned with Record.
	Payloads [][]byte
	// Scores are filled by the detect stage, row-aligned; nil before scoring.
	Scores []Score
	// ModelVersion is the version of the model that scored the batch (0 = none yet).
	ModelVersion uint64

	cols *columns // resolved by New; nil after Release
	ack  Acker    // set by the source (SetAck); nil once Ack ran
}

// columns are Record's columns, typed.
type columns struct {
	features, sds []*array.Float32 // sds nil without uncertainty columns
	partition     *array.Int32
	offset        *array.Int64
	key           *array.Binary
	ts            *array.Timestamp
}

// New makes a batch of rec, whose columns must be Schema(features, withSD) for either withSD
// (names, order and types; an error names the first column that differs). payloads are the
// original message values, one per row, or nil (a batch that never reaches the sink). The
// batch owns rec from here (see the package doc).
func New(topic string, features []string, rec arrow.Record, payloads [][]byte) (*Batch, error) {
	if rec == nil {
		return nil, fmt.Errorf("batch: topic %q: no record", topic)
	}
	d, n := len(features), int(rec.NumCols())
	withSD := n == 2*d+4
	if n != d+4 && !withSD {
		return nil, fmt.Errorf("batch: topic %q: %d columns, want %d or %d (features %v, then the uncertainties when configured, then %s, %s, %s, %s)",
			topic, n, d+4, 2*d+4, features, ColPartition, ColOffset, ColKey, ColTimestamp)
	}
	if payloads != nil && len(payloads) != int(rec.NumRows()) {
		return nil, fmt.Errorf("batch: topic %q: %d rows but %d payloads", topic, rec.NumRows(), len(payloads))
	}
	want := Schema(features, withSD)
	for i, f := range want.Fields() {
		got := rec.Schema().Field(i)
		if got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			return nil, fmt.Errorf("batch: topic %q: column %d is %q (%s), want %q (%s)", topic, i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	c := &columns{features: make([]*array.Float32, d)}
	for j := range d {
		c.features[j] = rec.Column(j).(*array.Float32)
	}
	if withSD {
		c.sds = make([]*array.Float32, d)
		for j := range d {
			c.sds[j] = rec.Column(d + j).(*array.Float32)
		}
	}
	at := n - 4
	c.partition = rec.Column(at).(*array.Int32)
	c.offset = rec.Column(at + 1).(*array.Int64)
	c.key = rec.Column(at + 2).(*array.Binary)
	c.ts = rec.Column(at + 3).(*array.Timestamp)
	return &Batch{Topic: topic, Features: features, Record: rec, Payloads: payloads, cols: c}, nil
}

// Len is the number of records in the batch.
func (b *Batch) Len() int {
	if b == nil || b.Record == nil {
		return 0
	}
	return int(b.Record.NumRows())
}

// Resolved reports whether b was made by New and not released: its accessors are valid.
func (b *Batch) Resolved() bool { return b != nil && b.cols != nil }

// Feature is feature column j's values, sharing the Arrow buffer.
func (b *Batch) Feature(j int) []float32 {
	if b.cols == nil {
		return nil
	}
	return b.cols.features[j].Float32Values()
}

// Warming reports whether feature column j holds a record whose rolling window was still
// filling when it was derived (ingest.derive's mean and std: a null, its value kept in the
// buffer), and is then the column's array, whose IsNull(i) says which; nil otherwise.
func (b *Batch) Warming(j int) *array.Float32 {
	if b.cols == nil || b.cols.features[j].NullN() == 0 {
		return nil
	}
	return b.cols.features[j]
}

// FeatureArray is feature column j as an Arrow array (with its validity, for writers that keep
// nulls).
func (b *Batch) FeatureArray(j int) *array.Float32 {
	if b.cols == nil {
		return nil
	}
	return b.cols.features[j]
}

// HasUncertainty reports whether the batch has the "<feature>_sd" columns.
func (b *Batch) HasUncertainty() bool { return b.cols != nil && b.cols.sds != nil }

// Uncertainty is feature j's uncertainty column's values, sharing the Arrow buffer; nil without
// uncertainty columns.
func (b *Batch) Uncertainty(j int) []float32 {
	if !b.HasUncertainty() {
		return nil
	}
	return b.cols.sds[j].Float32Values()
}

// UncertaintyArray is feature j's uncertainty column as an Arrow array; nil without.
func (b *Batch) UncertaintyArray(j int) *array.Float32 {
	if !b.HasUncertainty() {
		return nil
	}
	return b.cols.sds[j]
}

// Partitions are the records' source partitions (_partition), sharing the Arrow buffer.
func (b *Batch) Partitions() []int32 {
	if b.cols == nil {
		return nil
	}
	return b.cols.partition.Int32Values()
}

// Offsets are the records' source offsets (_offset), sharing the Arrow buffer.
func (b *Batch) Offsets() []int64 {
	if b.cols == nil {
		return nil
	}
	return b.cols.offset.Int64Values()
}

// PartitionArray is the _partition column as an Arrow array.
func (b *Batch) PartitionArray() *array.Int32 {
	if b.cols == nil {
		return nil
	}
	return b.cols.partition
}

// OffsetArray is the _offset column as an Arrow array.
func (b *Batch) OffsetArray() *array.Int64 {
	if b.cols == nil {
		return nil
	}
	return b.cols.offset
}

// Keys is the _key column (null where the message had no key).
func (b *Batch) Keys() *array.Binary {
	if b.cols == nil {
		return nil
	}
	return b.cols.key
}

// Timestamps is the _timestamp column (milliseconds, UTC).
func (b *Batch) Timestamps() *array.Timestamp {
	if b.cols == nil {
		return nil
	}
	return b.cols.ts
}

// Time is record i's timestamp, and false when it is null.
func (b *Batch) Time(i int) (time.Time, bool) {
	if b.cols == nil || b.cols.ts.IsNull(i) {
		return time.Time{}, false
	}
	return b.cols.ts.Value(i).ToTime(arrow.Millisecond).UTC(), true
}

// SetAck is called by the source that made b: Ack then marks b's records done in a.
func (b *Batch) SetAck(a Acker) { b.ack = a }

// Ack marks every record of b done at its source, so that their offsets may be committed. The
// sink loop calls it once the broker acknowledged b's outputs (the builder role's ack loop once
// b is in the window: it writes nothing), before Release; nothing else does. Later calls do
// nothing.
func (b *Batch) Ack() {
	if b == nil || b.ack == nil {
		return
	}
	parts, offs := b.Partitions(), b.Offsets()
	for i := range parts {
		b.ack.Done(int(parts[i]), offs[i])
	}
	b.ack = nil
}

// Release frees b's Arrow record (see the package doc for who calls it); the accessors return
// nil afterwards. Safe on a nil batch and more than once.
func (b *Batch) Release() {
	if b == nil || b.Record == nil {
		return
	}
	b.Record.Release()
	b.Record, b.cols = nil, nil
}

// DeadLetters are the messages the source could not decode while filling one batch, with the
// ack that marks them done at their source. The sink loop writes them to the dead-letter topic
// and calls Ack once the broker acknowledged them (the builder role, which writes nothing, calls
// Ack at once: the scorers write them).
type DeadLetters struct {
	Letters []DeadLetter
	ack     Acker
}

// NewDeadLetters is called by the source: Ack marks letters done in a (nil: nowhere).
func NewDeadLetters(letters []DeadLetter, a Acker) *DeadLetters {
	return &DeadLetters{Letters: letters, ack: a}
}

// All are the dead letters (nil on a nil DeadLetters).
func (d *DeadLetters) All() []DeadLetter {
	if d == nil {
		return nil
	}
	return d.Letters
}

// Len is the number of dead letters.
func (d *DeadLetters) Len() int {
	if d == nil {
		return 0
	}
	return len(d.Letters)
}

// Ack marks every dead letter done at its source; later calls do nothing.
func (d *DeadLetters) Ack() {
	if d == nil || d.ack == nil {
		return
	}
	for _, l := range d.Letters {
		d.ack.Done(l.Partition, l.Offset)
	}
	d.ack = nil
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
	// Recent is Score ranked among the last detect.recent_scores scores of the record's own
	// series (its key under detect.key_by: key, else the stream): -log10 of its tail
	// probability there, rising by Score's excess beyond the largest of them. Comparable
	// across series whether or not the model fits each (stages/detect/recent.go); not the
	// flag's score. NaN when off or unscored.
	Recent float64
	// Threshold is the combined score the model flags above at detect.alarm_rate.
	Threshold float64
	// DensityScore is the density detector's raw ranking score: the per-feature tail score
	// (sum over features of -ln of the rarer tail probability in the window, ECOD), in nats.
	DensityScore float64
	// DistanceScore is the distance detector's raw ranking score: w_k(q, R), the k-NN weight
	// against a uniform sample R of the window (in the window's standardised units).
	DistanceScore float64
	// Suppressed: the record reached the flag's threshold (detect.min_score) but the alarm cap
	// (detect.alarm_rate of the last detect.window records) was spent, so it is not flagged.
	Suppressed bool
	// Held: a flagged record below detect.min_score, flagged because its series' previous
	// record was flagged and its score stays at or above detect.flag_clear's share of min_score
	// (the alarm's deadband).
	Held bool
	// Deviations name, for a flagged or suppressed record, the features farthest out and how
	// far, in robust standard deviations from the window's median (its key's window's under
	// detect.key_by when its key's model scored it), farthest first.
	Deviations []Deviation
	// ByKey: the record was scored by its key's own model (detect.key_by); Warming: key_by is
	// set but the key has too few records for a model yet, so the global model scored it.
	ByKey, Warming bool
	// KeyModelVersion, with ByKey, is the version of the key's model a builder published
	// (run.role scorer; 0 where the key's model was built by the stage itself).
	KeyModelVersion uint64
	// Grouped: a flagged record that falls within its key's alert cooldown
	// (detect.alert_cooldown) after the key's last alert: folded into that alert, so the sink
	// does not emit it under emit: outliers (it does under emit: all).
	Grouped bool
	// AlertTimed, on a Grouped record: the key's alert it was folded into had a timestamp,
	// AlertAt; false when that alert's record had none (AlertAt 0; the sink's "alert_timestamp"
	// null). Apart from AlertAt, since 0 is a time too: 1970-01-01T00:00:00Z.
	AlertTimed bool
	// AlertAt, on a Grouped record with AlertTimed, is the timestamp (ms since the epoch, UTC)
	// of the key's alert it was folded into: with the key, it names that alert (the sink's
	// "alert_timestamp").
	AlertAt int64
	// Folded, on an alert (a flagged record not Grouped), is how many flagged records of its key
	// were folded into the key's previous alert (0 without a cooldown).
	Folded int
}

// HeldReason is what the explanation of a record the alarm's deadband held (Score.Held) says
// after its score and threshold: the sink's and replay's reasons say it in the same words.
const HeldReason = "continues the alarm of its series' previous record (detect.flag_clear)"

// WarmingReason is what the explanation of a flagged record of a warming key adds (Score.Warming):
// the sink's and replay's reasons say it in the same words.
const WarmingReason = "scored by the global model: its key has too few records for its own (detect.keys.min_records)"

// SuppressedReason begins the explanation of a record the alarm cap held back (Score.Suppressed),
// before its score: the sink's and replay's reasons say it in the same words.
const SuppressedReason = "not flagged, the alarm cap is spent (detect.alarm_rate)"

// AlertReason is what the explanation of a flagged record adds about its alert group
// (detect.alert_cooldown: Score.Grouped, Score.Folded), "" for none: the sink's and replay's
// reasons say it in the same words.
func AlertReason(s *Score) string {
	switch {
	case !s.Outlier:
		return ""
	case s.Grouped:
		return "folded into this key's open alert (detect.alert_cooldown)"
	case s.Folded > 0:
		return strconv.Itoa(s.Folded) + " more flagged records of this key were folded into its previous alert (detect.alert_cooldown)"
	}
	return ""
}

// Deviation is how far one feature of a record lies from the model's window: (x - median) /
// (interquartile range / 1.349).
type Deviation struct {
	Feature  string
	RobustSD float64
}

// FarSD is how far, in robust sd, a feature must lie from the window's median to be given as
// the cause of a flag: within it a reading is ordinary (a Gaussian reading is within 3 sd 99.7 %
// of the time), and beside a farther feature it is not named at all (detect's
// explainDeviations names a second feature only from here).
const FarSD = 3

// DeviationsText renders s's deviations as "temp +23.4 robust sd, pressure -5.12 robust sd from
// the window's median" ("" for none): the explanations' wording, shared by replay and the sink.
// A record its key's model scored (ByKey) is measured against its key's window: "from its key's
// window's median". Where even the farthest is within FarSD (a record rare for the combination
// of its readings, or for a reading at its time of day: none of them far out), naming it as the
// cause would give an ordinary reading as the reason for the page: "every feature within 3
// robust sd of the window's median (the farthest: temp -1.3): the combination is what is rare"
// (without the last clause for a held record, whose score is below the threshold).
func DeviationsText(s *Score) string {
	devs := s.Deviations
	if len(devs) == 0 {
		return ""
	}
	window := "the window's median"
	if s.ByKey {
		window = "its key's window's median"
	}
	if math.Abs(devs[0].RobustSD) < FarSD {
		b := append([]byte("every feature within "), strconv.Itoa(FarSD)+" robust sd of "+window+" (the farthest: "+devs[0].Feature+" "...)
		b = appendSigned(b, devs[0].RobustSD)
		b = append(b, ')')
		if !s.Held {
			b = append(b, ": the combination is what is rare"...)
		}
		return string(b)
	}
	var b []byte
	for i, d := range devs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, d.Feature...)
		b = append(b, ' ')
		b = appendSigned(b, d.RobustSD)
		b = append(b, " robust sd"...)
	}
	return string(append(append(b, " from "...), window...))
}

// appendSigned appends v with its sign and 3 significant digits (+23.4, -5.12).
func appendSigned(b []byte, v float64) []byte {
	if v >= 0 {
		b = append(b, '+')
	}
	return strconv.AppendFloat(b, v, 'g', 3, 64)
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
	// Reason says what was wrong, for people, e.g. `field "temp": not a number: "abc"`.
	Reason string
	// Code is the kind of problem as one word, for programs (the sink's outlierd-reason header):
	// the decoders' ("missing", "not_a_number", ..., "malformed") or the sink's
	// ("output_too_large", "output_unencodable"); "" for none. Its words are kept; Reason's
	// wording may change.
	Code string
	// Field is the configured field the problem is about (the sink's outlierd-field header),
	// as the decoder's FieldError names it: a JSON path, CSV column or logfmt key; "" when the
	// problem is no one field's (malformed syntax, the sink's own Codes).
	Field string
}
