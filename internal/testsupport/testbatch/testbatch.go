// Package testbatch builds batches for tests with the real batch schema (batch.Schema), the one the ingest
// stage produces, so that no test re-derives the column layout.
package testbatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Row is one record of a test batch.
type Row struct {
	Partition int32
	Offset    int64
	Key       []byte    // nil: a null key
	Time      time.Time // the Kafka message time; zero: none (a null _timestamp)
	Features  []float32 // one per feature
	SD        []float32 // one per feature; read only when the batch has uncertainty columns
	Payload   []byte
	Score     batch.Score // read only when the batch is scored
}

// New builds a batch of topic with these features (and their "_sd" uncertainty columns when
// withSD) holding rows, its Record from mem (release it when done). scored=false leaves Scores
// nil (a batch before the first model).
func New(tb testing.TB, mem memory.Allocator, topic string, features []string, withSD, scored bool, rows []Row) *batch.Batch {
	tb.Helper()
	b, err := Build(mem, topic, features, withSD, scored, rows)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Build is New returning its error rather than failing the test: for batches made on other
// goroutines than the test's (t.Fatal must be called from the test's own).
func Build(mem memory.Allocator, topic string, features []string, withSD, scored bool, rows []Row) (*batch.Batch, error) {
	rb := array.NewRecordBuilder(mem, batch.Schema(features, withSD))
	defer rb.Release()
	var payloads [][]byte
	var scores []batch.Score
	d := len(features)
	for i, r := range rows {
		if len(r.Features) != d || withSD && len(r.SD) != d {
			return nil, fmt.Errorf("row %d: %d features and %d uncertainties for %d feature columns", i, len(r.Features), len(r.SD), d)
		}
		for j := range d {
			rb.Field(j).(*array.Float32Builder).Append(r.Features[j])
		}
		col := d
		if withSD {
			for j := range d {
				rb.Field(col + j).(*array.Float32Builder).Append(r.SD[j])
			}
			col += d
		}
		rb.Field(col).(*array.Int32Builder).Append(r.Partition)
		rb.Field(col + 1).(*array.Int64Builder).Append(r.Offset)
		if r.Key == nil {
			rb.Field(col + 2).(*array.BinaryBuilder).AppendNull()
		} else {
			rb.Field(col + 2).(*array.BinaryBuilder).Append(r.Key)
		}
		if r.Time.IsZero() { // none, as the ingest builder has it
			rb.Field(col + 3).(*array.TimestampBuilder).AppendNull()
		} else {
			rb.Field(col + 3).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Time.UnixMilli()))
		}
		payloads = append(payloads, r.Payload)
		if scored {
			scores = append(scores, r.Score)
		}
	}
	rec := rb.NewRecord()
	b, err := batch.New(topic, features, rec, payloads)
	if err != nil {
		rec.Release()
		return nil, err
	}
	b.Scores = scores
	return b, nil
}

// FromColumns builds an unscored batch of rows [lo, hi) of the feature columns cols (and of
// the uncertainty columns sd when withSD), all on partition 0 at offsets first, first+1, ...,
// with null keys, no time (null) and empty payloads: what the detect stage reads.
func FromColumns(tb testing.TB, mem memory.Allocator, topic string, features []string, cols, sd [][]float32, withSD bool, lo, hi int, first int64) *batch.Batch {
	tb.Helper()
	rows := make([]Row, hi-lo)
	for i := range rows {
		r := Row{Offset: first + int64(i), Features: make([]float32, len(cols))}
		for j := range cols {
			r.Features[j] = cols[j][lo+i]
		}
		if withSD {
			r.SD = make([]float32, len(sd))
			for j := range sd {
				r.SD[j] = sd[j][lo+i]
			}
		}
		rows[i] = r
	}
	return New(tb, mem, topic, features, withSD, false, rows)
}
