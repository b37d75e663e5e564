package testbatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestNewIsWhatIngestBuilds: New gives the same batch as the ingest stage's builder fed the
// same records (schema, every column, payloads), with and without uncertainty columns, and
// the scores when asked.
func TestNewIsWhatIngestBuilds(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	features := []string{"temp", "hum"}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	rows := []testbatch.Row{
		{Partition: 2, Offset: 7, Key: []byte("k"), Time: t0, Features: []float32{1, 2}, SD: []float32{0.1, 0.2}, Payload: []byte("p0"),
			Score: batch.Score{Scored: true, Outlier: true, Weight: 3}},
		{Partition: 0, Offset: 9, Time: t0.Add(time.Second), Features: []float32{3, 4}, SD: []float32{0.3, 0.4}, Payload: []byte("p1")},
	}
	for _, withSD := range []bool{false, true} {
		b := testbatch.New(t, mem, "in", features, withSD, true, rows)
		ib := ingest.NewBuilder(mem, "in", features, withSD, len(rows))
		for _, r := range rows {
			d := &ingest.Decoded{Values: r.Features}
			if withSD {
				d.SD = r.SD
			}
			if err := ib.Append(d, r.Partition, r.Offset, r.Key, r.Time, r.Payload); err != nil {
				t.Fatal(err)
			}
		}
		want := ib.Build()
		ib.Release()
		if !array.RecordEqual(b.Record, want.Record) {
			t.Errorf("withSD %v: record\n%v\nwant the ingest builder's\n%v", withSD, b.Record, want.Record)
		}
		if b.Topic != want.Topic || len(b.Payloads) != len(want.Payloads) || string(b.Payloads[1]) != string(want.Payloads[1]) {
			t.Errorf("withSD %v: topic %q payloads %q, want %q %q", withSD, b.Topic, b.Payloads, want.Topic, want.Payloads)
		}
		if len(b.Scores) != len(rows) || b.Scores[0].Weight != 3 || !b.Scores[0].Outlier || b.Scores[1].Scored {
			t.Errorf("withSD %v: scores %+v", withSD, b.Scores)
		}
		b.Record.Release()
		want.Record.Release()
	}
	b := testbatch.New(t, mem, "in", features, false, false, rows)
	defer b.Record.Release()
	if b.Scores != nil {
		t.Errorf("unscored batch has scores %+v", b.Scores)
	}
}

// TestBuildReturnsItsError: Build (for batches made off the test's goroutine) reports a row of
// the wrong width as an error naming the row, and leaks nothing.
func TestBuildReturnsItsError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := []testbatch.Row{{Features: []float32{1, 2}}, {Features: []float32{3}}}
	b, err := testbatch.Build(mem, "in", []string{"temp", "hum"}, false, false, rows)
	if err == nil || b != nil || !strings.Contains(err.Error(), "row 1: 1 features") {
		t.Fatalf("Build of a short row: %v, %v; want an error naming row 1", b, err)
	}
	b, err = testbatch.Build(mem, "in", []string{"temp", "hum"}, false, false, rows[:1])
	if err != nil || b.Len() != 1 {
		t.Fatalf("Build of a good row: %v", err)
	}
	b.Release()
}
