package sink

import (
	"bytes"
	"fmt"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// columns is the sink's view of a batch's columns (typed and checked by batch.New, never
// looked up here) and of the emit mode its Write started with.
type columns struct {
	rows      int
	features  []*array.Float32 // row-aligned with Batch.Features
	sds       []*array.Float32 // "<feature>_sd" per feature; nil entries where absent
	partition *array.Int32
	offset    *array.Int64
	key       *array.Binary
	ts        *array.Timestamp
	tsUnit    arrow.TimeUnit
	emit      Emit // the sink's Emit when this batch's Write started
}

// batchColumns checks that b holds to the batch contract (made by batch.New, Payloads and
// Scores row-aligned) and returns its columns. A batch that breaks the contract is a bug
// upstream: it is an error, not a dead letter, so that it cannot be committed past silently.
func batchColumns(b *batch.Batch) (*columns, error) {
	if !b.Resolved() {
		return nil, fmt.Errorf("sink: batch has no record made by batch.New")
	}
	c := &columns{rows: b.Len(), partition: b.PartitionArray(), offset: b.OffsetArray(), key: b.Keys(), ts: b.Timestamps()}
	if len(b.Payloads) != c.rows {
		return nil, fmt.Errorf("sink: batch of topic %q has %d rows but %d payloads", b.Topic, c.rows, len(b.Payloads))
	}
	if b.Scores != nil && len(b.Scores) != c.rows {
		return nil, fmt.Errorf("sink: batch of topic %q has %d rows but %d scores", b.Topic, c.rows, len(b.Scores))
	}
	c.features = make([]*array.Float32, len(b.Features))
	c.sds = make([]*array.Float32, len(b.Features))
	for j := range b.Features {
		c.features[j], c.sds[j] = b.FeatureArray(j), b.UncertaintyArray(j)
	}
	c.tsUnit = c.ts.DataType().(*arrow.TimestampType).Unit
	return c, nil
}

// keyAt returns a copy of row i's Kafka key, nil when the key was null and empty (not nil) when
// it was present and empty: Arrow gives nil for an empty value when no row of the batch has key
// bytes, and a nil key would make the output's key null and its partition random. A copy,
// because kafka-go may still read a message after a cancelled WriteMessages returned, when the
// caller may have released the record that the key's bytes live in.
func (c *columns) keyAt(i int) []byte {
	if c.key.IsNull(i) {
		return nil
	}
	if v := c.key.Value(i); len(v) > 0 {
		return bytes.Clone(v)
	}
	return []byte{}
}

// timeAt returns row i's timestamp in UTC, and false when it is null.
func (c *columns) timeAt(i int) (time.Time, bool) {
	if c.ts.IsNull(i) {
		return time.Time{}, false
	}
	return c.ts.Value(i).ToTime(c.tsUnit).UTC(), true
}

// deadLetter builds the dead letter for row i of b (its original message and coordinates);
// code is its batch.DeadLetter.Code ("" for none).
func (c *columns) deadLetter(b *batch.Batch, i int, code, reason string) batch.DeadLetter {
	t, _ := c.timeAt(i)
	return batch.DeadLetter{
		Topic:     b.Topic,
		Partition: int(c.partition.Value(i)),
		Offset:    c.offset.Value(i),
		Key:       c.keyAt(i),
		Value:     bytes.Clone(b.Payloads[i]), // see keyAt
		Time:      t,
		Reason:    reason,
		Code:      code,
	}
}

// emitted reports whether row i becomes an output under the emit mode.
func emitted(b *batch.Batch, i int, emit Emit) bool {
	if emit == EmitAll {
		return true
	}
	// A record grouped into its key's open alert (detect.alert_cooldown) is not an alert of
	// its own.
	return b.Scores != nil && b.Scores[i].Scored && b.Scores[i].Outlier && !b.Scores[i].Grouped
}
