package sink

import (
	"bytes"
	"fmt"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// columns gives typed access to the columns of a Batch.Record (layout in package batch).
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

// batchColumns checks b against the batch contract and returns its columns. A batch that breaks
// the contract is a bug upstream: it is an error, not a dead letter, so that it cannot be
// committed past silently.
func batchColumns(b *batch.Batch) (*columns, error) {
	if b == nil || b.Record == nil {
		return nil, fmt.Errorf("sink: batch has no record")
	}
	rec := b.Record
	c := &columns{rows: int(rec.NumRows())}
	if len(b.Payloads) != c.rows {
		return nil, fmt.Errorf("sink: batch of topic %q has %d rows but %d payloads", b.Topic, c.rows, len(b.Payloads))
	}
	if b.Scores != nil && len(b.Scores) != c.rows {
		return nil, fmt.Errorf("sink: batch of topic %q has %d rows but %d scores", b.Topic, c.rows, len(b.Scores))
	}
	sch := rec.Schema()
	col := func(name string) (arrow.Array, error) {
		idx := sch.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("sink: batch of topic %q: want exactly one column %q, have %d", b.Topic, name, len(idx))
		}
		return rec.Column(idx[0]), nil
	}
	for _, f := range b.Features {
		a, err := col(f)
		if err != nil {
			return nil, err
		}
		fa, ok := a.(*array.Float32)
		if !ok {
			return nil, fmt.Errorf("sink: batch of topic %q: feature column %q is %s, want float32", b.Topic, f, a.DataType())
		}
		c.features = append(c.features, fa)
		var sd *array.Float32
		if idx := sch.FieldIndices(f + batch.UncertaintySuffix); len(idx) == 1 {
			if sd, ok = rec.Column(idx[0]).(*array.Float32); !ok {
				return nil, fmt.Errorf("sink: batch of topic %q: uncertainty column %q is not float32", b.Topic, f+batch.UncertaintySuffix)
			}
		}
		c.sds = append(c.sds, sd)
	}
	var ok bool
	a, err := col(batch.ColPartition)
	if err != nil {
		return nil, err
	}
	if c.partition, ok = a.(*array.Int32); !ok {
		return nil, fmt.Errorf("sink: batch of topic %q: %s is %s, want int32", b.Topic, batch.ColPartition, a.DataType())
	}
	if a, err = col(batch.ColOffset); err != nil {
		return nil, err
	}
	if c.offset, ok = a.(*array.Int64); !ok {
		return nil, fmt.Errorf("sink: batch of topic %q: %s is %s, want int64", b.Topic, batch.ColOffset, a.DataType())
	}
	if a, err = col(batch.ColKey); err != nil {
		return nil, err
	}
	if c.key, ok = a.(*array.Binary); !ok {
		return nil, fmt.Errorf("sink: batch of topic %q: %s is %s, want binary", b.Topic, batch.ColKey, a.DataType())
	}
	if a, err = col(batch.ColTimestamp); err != nil {
		return nil, err
	}
	if c.ts, ok = a.(*array.Timestamp); !ok {
		return nil, fmt.Errorf("sink: batch of topic %q: %s is %s, want timestamp", b.Topic, batch.ColTimestamp, a.DataType())
	}
	c.tsUnit = c.ts.DataType().(*arrow.TimestampType).Unit
	return c, nil
}

// keyAt returns a copy of row i's Kafka key, nil when the key was null. A copy, because kafka-go
// may still read a message after a cancelled WriteMessages returned, when the caller may have
// released the record that the key's bytes live in.
func (c *columns) keyAt(i int) []byte {
	if c.key.IsNull(i) {
		return nil
	}
	return bytes.Clone(c.key.Value(i))
}

// timeAt returns row i's timestamp in UTC, and false when it is null.
func (c *columns) timeAt(i int) (time.Time, bool) {
	if c.ts.IsNull(i) {
		return time.Time{}, false
	}
	return c.ts.Value(i).ToTime(c.tsUnit).UTC(), true
}

// deadLetter builds the dead letter for row i of b (its original message and coordinates).
func (c *columns) deadLetter(b *batch.Batch, i int, reason string) batch.DeadLetter {
	t, _ := c.timeAt(i)
	return batch.DeadLetter{
		Topic:     b.Topic,
		Partition: int(c.partition.Value(i)),
		Offset:    c.offset.Value(i),
		Key:       c.keyAt(i),
		Value:     bytes.Clone(b.Payloads[i]), // see keyAt
		Time:      t,
		Reason:    reason,
	}
}

// emitted reports whether row i becomes an output under the emit mode.
func emitted(b *batch.Batch, i int, emit Emit) bool {
	if emit == EmitAll {
		return true
	}
	return b.Scores != nil && b.Scores[i].Scored && b.Scores[i].Outlier
}
