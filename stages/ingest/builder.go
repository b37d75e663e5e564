package ingest

import (
	"fmt"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Builder accumulates decoded records into one batch.Batch at a time. Its buffers come from
// the injected allocator; Build hands them over to the batch's Record. Not safe for
// concurrent use.
type Builder struct {
	topic    string
	features []string
	withSD   bool
	capacity int

	rb        *array.RecordBuilder
	values    []*array.Float32Builder
	sds       []*array.Float32Builder
	partition *array.Int32Builder
	offset    *array.Int64Builder
	key       *array.BinaryBuilder
	timestamp *array.TimestampBuilder
	payloads  [][]byte
	n         int
	one       [1]float32 // a warming value, appended with invalid's cleared validity bit
	invalid   [1]bool
}

// NewBuilder returns a Builder for batches of topic with these features (and their
// uncertainty columns when withSD). capacity is the expected batch size, reserved up front.
// Release it when done.
func NewBuilder(alloc memory.Allocator, topic string, features []string, withSD bool, capacity int) *Builder {
	b := &Builder{
		topic:    topic,
		features: append([]string(nil), features...),
		withSD:   withSD,
		capacity: max(capacity, 1),
		rb:       array.NewRecordBuilder(alloc, batch.Schema(features, withSD)),
	}
	i := 0
	for range features {
		b.values = append(b.values, b.rb.Field(i).(*array.Float32Builder))
		i++
	}
	if withSD {
		for range features {
			b.sds = append(b.sds, b.rb.Field(i).(*array.Float32Builder))
			i++
		}
	}
	b.partition = b.rb.Field(i).(*array.Int32Builder)
	b.offset = b.rb.Field(i + 1).(*array.Int64Builder)
	b.key = b.rb.Field(i + 2).(*array.BinaryBuilder)
	b.timestamp = b.rb.Field(i + 3).(*array.TimestampBuilder)
	return b
}

// Append adds one record. d must match the builder's features (and carry SD when withSD).
// key is the record key (nil appends a null key) and ts its time (the zero time appends a null
// one: kafka-go reads a Kafka timestamp of 0 or less, -1 being "none", as the zero time, which
// is no instant to compare or print as year 1); payload is kept by reference, not copied. It returns an error, and appends nothing, when d has the wrong shape.
func (b *Builder) Append(d *Decoded, partition int32, offset int64, key []byte, ts time.Time, payload []byte) error {
	if len(d.Values) != len(b.features) || (b.withSD && len(d.SD) != len(b.features)) {
		return fmt.Errorf("ingest: builder: record has %d values and %d uncertainties, want %d features (uncertainty %v)",
			len(d.Values), len(d.SD), len(b.features), b.withSD)
	}
	if b.n == 0 {
		b.rb.Reserve(b.capacity)
	}
	for j, v := range d.Values {
		if j < len(d.Warming) && d.Warming[j] { // null, the value kept (derive_warmup.go)
			b.one[0] = v
			b.values[j].AppendValues(b.one[:], b.invalid[:])
			continue
		}
		b.values[j].Append(v)
	}
	if b.withSD {
		for j, v := range d.SD {
			b.sds[j].Append(v)
		}
	}
	b.partition.Append(partition)
	b.offset.Append(offset)
	if key == nil {
		b.key.AppendNull()
	} else {
		b.key.Append(key)
	}
	if ts.IsZero() {
		b.timestamp.AppendNull()
	} else {
		b.timestamp.Append(arrow.Timestamp(ts.UnixMilli()))
	}
	b.payloads = append(b.payloads, payload)
	b.n++
	return nil
}

// Len is the number of records appended since the last Build.
func (b *Builder) Len() int { return b.n }

// Build returns the records appended since the last Build as a batch, or nil when there are
// none. The caller owns the batch and must Release its Record; the builder starts empty.
func (b *Builder) Build() *batch.Batch {
	if b.n == 0 {
		return nil
	}
	out, err := batch.New(b.topic, append([]string(nil), b.features...), b.rb.NewRecord(), b.payloads)
	if err != nil { // the builder's record is batch.Schema by construction
		panic(fmt.Sprintf("ingest: builder made a batch outside the contract: %v", err))
	}
	b.payloads = make([][]byte, 0, b.capacity)
	b.n = 0
	return out
}

// Release frees the builder's buffers, including any records appended and not built.
func (b *Builder) Release() {
	if b.rb != nil {
		b.rb.Release()
		b.rb = nil
	}
}
