package sink

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Arrow output (format: arrow). Each Kafka message value is one complete Arrow IPC stream
// (schema message, one record batch, end-of-stream marker), readable with ipc.NewReader, holding
// the emitted rows of one batch that came from one source partition, in batch order. Key:
// "<topic>/<partition>/<first offset>-<last offset>" of the rows it holds (also in header
// outlierd-id). A stream larger than max_message_bytes is split by rows into several messages,
// each with its own offset range.
//
// De-duplication is by row, with the _id column, not by message: a batch re-read after a
// restart or rebalance can have other boundaries than the first time, so the same row can
// arrive again in a message with another key and other neighbours; its _id stays the same.
//
// Schema, in column order:
//
//	<feature>...        float32, one per Batch.Features, as in the input; a derived column
//	                    still warming (see warming) holds its partial window's value
//	<feature>_sd...     float32, the input's uncertainty columns, when present
//	_partition          int32    source partition
//	_offset             int64    source offset
//	_key                binary   source key (null without a key)
//	_timestamp          timestamp, as in the input (ms, UTC)
//	_id                 utf8     "<topic>/<partition>/<offset>" of the source message: the
//	                             row's stable id, the JSON output's "id"
//	scored              bool     false: passed through before the first model; the score
//	                             columns below are then null
//	outlier             bool     the combined decision
//	density_outlier     bool
//	eta_probability     float64  the lowest eta-probability seen
//	distance_outlier    bool
//	weight              float64  w_k(q, S)
//	w_star              float64
//	subspace            list<utf8> feature names of eta_probability's subspace
//	explanation         utf8     the same line as the JSON output's "explanation"
//	hypercube_score     float64  the hypercube detector's O = 1 - w/w_max; null when it did
//	                             not run (detect.hypercube.enabled false, or not scored)
//	hypercube_neighbours int64   its w (the record itself included); null likewise
//	hypercube_outlier   bool     its verdict; null likewise
//	score               float64  the combined outlier score, higher = more outlying (null when
//	                             not scored)
//	recent              float64  the score ranked among its series' recent scores
//	                             (detect.recent_scores; null when not scored or off)
//	suppressed          bool     over the threshold, not flagged: the alarm cap is spent
//	                             (detect.alarm_rate); null when not scored
//	folded              bool     flagged, folded into its key's open alert
//	                             (detect.alert_cooldown); null when not scored
//	alert_timestamp     timestamp (ms, UTC) with folded: that alert's time; null otherwise or
//	                             when the alert had none
//	folded_into_previous_alert int64 on an alert, how many flagged records of its key were
//	                             folded into the key's previous alert (0 otherwise); null when
//	                             not scored
//	key_model_version   uint64   with detect.key_by on a scorer, the builder's version of the
//	                             key's model that scored the record; null otherwise
//	warming             list<utf8> the feature columns still warming on the row: a derived
//	                             mean or std whose series held fewer than `last` values
//	                             (batch.Batch.Warming); its value above is the partial window's
//	                             (a std of one value: 0), and the record was scored with the
//	                             column at a value its model gave it (a key's model: its
//	                             centre; the global model: the column's mean over the
//	                             record's nearest sample records); empty when none
//
// The last five are the JSON output's "scores" fields of the same names (suppressed, folded,
// alert_timestamp, folded_into_previous_alert, key_model_version), so that a program reads
// them without parsing the explanation.
//
// Schema metadata: "outlierd.topic" (source topic) and "outlierd.model_version" (decimal).
// Payloads are not included: the columns are the decoded record.

// Names of the columns the sink adds to the Arrow output.
const (
	ColID              = "_id" // "<topic>/<partition>/<offset>": the row's de-duplication id
	ColScored          = "scored"
	ColOutlier         = "outlier"
	ColDensityOutlier  = "density_outlier"
	ColEtaProbability  = "eta_probability"
	ColDistanceOutlier = "distance_outlier"
	ColWeight          = "weight"
	ColWStar           = "w_star"
	ColSubspace        = "subspace"
	ColExplanation     = "explanation"
	// The hypercube detector's columns (null when it did not run).
	ColHypercubeScore      = "hypercube_score"
	ColHypercubeNeighbours = "hypercube_neighbours"
	ColHypercubeOutlier    = "hypercube_outlier"
	ColScore               = "score"
	ColRecent              = "recent" // batch.Score.Recent (null: not scored, or detect.recent_scores 0)
	// The alarm cap's, the alert groups' and the key model's columns (batch.Score's
	// Suppressed, Grouped with AlertAt, Folded, KeyModelVersion).
	ColSuppressed         = "suppressed"
	ColFolded             = "folded"
	ColAlertTimestamp     = "alert_timestamp"
	ColFoldedIntoPrevious = "folded_into_previous_alert"
	ColKeyModelVersion    = "key_model_version"
	ColWarming            = "warming" // the feature columns still warming (batch.Batch.Warming)
)

// arrowSchema builds the output schema for batch b (see the table above).
func arrowSchema(b *batch.Batch, c *columns) *arrow.Schema {
	fields := make([]arrow.Field, 0, 2*len(b.Features)+29)
	for _, f := range b.Features {
		fields = append(fields, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Float32, Nullable: true})
	}
	for j, f := range b.Features {
		if c.sds[j] != nil {
			fields = append(fields, arrow.Field{Name: f + batch.UncertaintySuffix, Type: arrow.PrimitiveTypes.Float32, Nullable: true})
		}
	}
	fields = append(fields,
		arrow.Field{Name: batch.ColPartition, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: batch.ColOffset, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: batch.ColKey, Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: batch.ColTimestamp, Type: c.ts.DataType(), Nullable: true},
		arrow.Field{Name: ColID, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColScored, Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: ColOutlier, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: ColDensityOutlier, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: ColEtaProbability, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: ColDistanceOutlier, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: ColWeight, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: ColWStar, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: ColSubspace, Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		arrow.Field{Name: ColExplanation, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColHypercubeScore, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: ColHypercubeNeighbours, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: ColHypercubeOutlier, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: ColScore, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: ColRecent, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: ColSuppressed, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: ColFolded, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: ColAlertTimestamp, Type: batch.TimestampType, Nullable: true},
		arrow.Field{Name: ColFoldedIntoPrevious, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: ColKeyModelVersion, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		arrow.Field{Name: ColWarming, Type: arrow.ListOf(arrow.BinaryTypes.String)},
	)
	md := arrow.NewMetadata(
		[]string{"outlierd.topic", "outlierd.model_version"},
		[]string{b.Topic, strconv.FormatUint(b.ModelVersion, 10)},
	)
	return arrow.NewSchema(fields, &md)
}

// encodeArrowRows builds the record of the given rows of b and returns it as one IPC stream.
func encodeArrowRows(mem memory.Allocator, sch *arrow.Schema, b *batch.Batch, c *columns, rows []int) ([]byte, error) {
	rb := array.NewRecordBuilder(mem, sch)
	defer rb.Release()
	col := 0
	next := func() array.Builder { bl := rb.Field(col); col++; return bl }

	appendF32 := func(bl *array.Float32Builder, a *array.Float32) {
		bl.Reserve(len(rows))
		for _, i := range rows { // a derived column still warming is null in the batch, its value kept: written, named in warming (ingest's derive_warmup.go)
			bl.UnsafeAppend(a.Value(i))
		}
	}
	for j := range b.Features {
		appendF32(next().(*array.Float32Builder), c.features[j])
	}
	for j := range b.Features {
		if c.sds[j] != nil {
			appendF32(next().(*array.Float32Builder), c.sds[j])
		}
	}
	part := next().(*array.Int32Builder)
	off := next().(*array.Int64Builder)
	key := next().(*array.BinaryBuilder)
	ts := next().(*array.TimestampBuilder)
	id := next().(*array.StringBuilder)
	scored := next().(*array.BooleanBuilder)
	outlier := next().(*array.BooleanBuilder)
	density := next().(*array.BooleanBuilder)
	eta := next().(*array.Float64Builder)
	distance := next().(*array.BooleanBuilder)
	weight := next().(*array.Float64Builder)
	wstar := next().(*array.Float64Builder)
	sub := next().(*array.ListBuilder)
	subNames := sub.ValueBuilder().(*array.StringBuilder)
	expl := next().(*array.StringBuilder)
	hcScore := next().(*array.Float64Builder)
	hcNeighbours := next().(*array.Int64Builder)
	hcOutlier := next().(*array.BooleanBuilder)
	score := next().(*array.Float64Builder)
	recent := next().(*array.Float64Builder)
	suppressed := next().(*array.BooleanBuilder)
	folded := next().(*array.BooleanBuilder)
	alertAt := next().(*array.TimestampBuilder)
	foldedPrev := next().(*array.Int64Builder)
	keyModel := next().(*array.Uint64Builder)
	warm := next().(*array.ListBuilder)
	warmNames := warm.ValueBuilder().(*array.StringBuilder)
	warming := make([]*array.Float32, len(b.Features)) // (nil: the column has no warming row)
	for j := range b.Features {
		warming[j] = b.Warming(j)
	}

	for _, i := range rows {
		part.Append(c.partition.Value(i))
		off.Append(c.offset.Value(i))
		if c.key.IsNull(i) {
			key.AppendNull()
		} else {
			key.Append(c.key.Value(i))
		}
		if c.ts.IsNull(i) {
			ts.AppendNull()
		} else {
			ts.Append(c.ts.Value(i))
		}
		id.Append(OutputID(b.Topic, c.partition.Value(i), c.offset.Value(i)))
		var s batch.Score
		if b.Scores != nil {
			s = b.Scores[i]
		}
		scored.Append(s.Scored)
		if s.Scored {
			outlier.Append(s.Outlier)
			density.Append(s.DensityOutlier)
			eta.Append(s.EtaProbability)
			distance.Append(s.DistanceOutlier)
			weight.Append(s.Weight)
			wstar.Append(s.WStar)
			sub.Append(true)
			for _, n := range s.Subspace {
				subNames.Append(n)
			}
		} else {
			outlier.AppendNull()
			density.AppendNull()
			eta.AppendNull()
			distance.AppendNull()
			weight.AppendNull()
			wstar.AppendNull()
			sub.AppendNull()
		}
		expl.Append(Explain(s))
		if h := s.Hypercube; s.Scored && h != nil {
			hcScore.Append(h.Score)
			hcNeighbours.Append(h.Neighbours)
			hcOutlier.Append(h.Outlier)
		} else {
			hcScore.AppendNull()
			hcNeighbours.AppendNull()
			hcOutlier.AppendNull()
		}
		if s.Scored {
			score.Append(s.Score) // non-finite as IEEE 754, like the other float columns
		} else {
			score.AppendNull()
		}
		if s.Scored && !math.IsNaN(s.Recent) {
			recent.Append(s.Recent)
		} else {
			recent.AppendNull()
		}
		if s.Scored {
			suppressed.Append(s.Suppressed)
			folded.Append(s.Grouped)
			foldedPrev.Append(int64(s.Folded))
		} else {
			suppressed.AppendNull()
			folded.AppendNull()
			foldedPrev.AppendNull()
		}
		if s.Scored && s.Grouped && s.AlertTimed {
			alertAt.Append(arrow.Timestamp(s.AlertAt))
		} else {
			alertAt.AppendNull()
		}
		if s.Scored && s.KeyModelVersion != 0 {
			keyModel.Append(s.KeyModelVersion)
		} else {
			keyModel.AppendNull()
		}
		warm.Append(true)
		for j, a := range warming {
			if a != nil && a.IsNull(i) {
				warmNames.Append(b.Features[j])
			}
		}
	}

	rec := rb.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sch), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("write arrow ipc record: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close arrow ipc stream: %w", err)
	}
	return buf.Bytes(), nil
}

// arrowKey is the message key of an Arrow output holding rows of one partition.
func arrowKey(topic string, partition int32, first, last int64) string {
	return topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(first, 10) + "-" + strconv.FormatInt(last, 10)
}
