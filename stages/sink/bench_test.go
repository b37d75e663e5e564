package sink

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// benchBatch is a 1000-record batch over 3 partitions, every record an outlier (so emit:
// outliers writes 1000 messages), with a ~60-byte JSON payload.
func benchBatch(b *testing.B, mem memory.Allocator) *batch.Batch {
	rows := make([]testbatch.Row, 1000)
	for i := range rows {
		rows[i] = testbatch.Row{Partition: int32(i % 3), Offset: int64(i), Key: []byte(fmt.Sprintf("sensor-%d", i%50)), Time: ts0,
			Features: []float32{float32(i), float32(2 * i)},
			Payload:  []byte(fmt.Sprintf(`{"sensor":"sensor-%d","temp":%d.5,"pressure":%d}`, i%50, i, 2*i)),
			Score: batch.Score{Scored: true, Outlier: true, DistanceOutlier: true, EtaProbability: 0.7,
				Subspace: []string{"temp"}, Weight: 8.5, WStar: 6}}
	}
	return testbatch.New(b, mem, "bench", features, false, true, rows)
}

// BenchmarkWrite measures synchronous Write of 1000 outputs (acks=all) for several
// BatchSize/BatchTimeout settings, against kfake and, with KAFKA_BOOTSTRAP, the real broker.
// kafka-go's default BatchTimeout (1s) makes every Write wait for it: a partly filled batch is
// only sent on timeout.
//
//	go test -run XXX -bench Write -benchtime 20x ./stages/sink/
func BenchmarkWrite(b *testing.B) {
	targets := []string{"kfake"}
	if os.Getenv("KAFKA_BOOTSTRAP") != "" {
		targets = append(targets, "kafka")
	}
	settings := []struct {
		size    int
		timeout time.Duration
		format  Format
	}{
		{100, time.Second, FormatJSON}, // kafka-go defaults
		{1000, time.Second, FormatJSON},
		{100, time.Millisecond, FormatJSON},
		{1000, time.Millisecond, FormatJSON},
		{1000, 2 * time.Millisecond, FormatJSON},
		{1000, 10 * time.Millisecond, FormatJSON},
		{5000, time.Millisecond, FormatJSON},
		{1000, time.Millisecond, FormatArrow},
	}
	for _, target := range targets {
		for _, st := range settings {
			name := fmt.Sprintf("%s/%s/size=%d/timeout=%v", target, st.format, st.size, st.timeout)
			b.Run(name, func(b *testing.B) {
				var br testsupport.Broker
				if target == "kfake" {
					br = testsupport.KfakeBroker(b)
				} else {
					br = testsupport.RealBroker(b)
				}
				cfg := testConfig(b, br)
				cfg.BatchSize, cfg.BatchTimeout, cfg.Format = st.size, st.timeout, st.format
				s, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				mem := memory.NewGoAllocator()
				bt := benchBatch(b, mem)
				defer bt.Record.Release()
				ctx := context.Background()
				if err := s.Write(ctx, bt); err != nil { // connect and fetch metadata outside the timing
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Write(ctx, bt); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*bt.Len())/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkEncodeJSON measures encoding alone (no Kafka), per record.
func BenchmarkEncodeJSON(b *testing.B) {
	mem := memory.NewGoAllocator()
	bt := benchBatch(b, mem)
	defer bt.Record.Release()
	c, err := batchColumns(bt)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := encodeJSON(bt, c, i%c.rows); err != nil {
			b.Fatal(err)
		}
	}
}
