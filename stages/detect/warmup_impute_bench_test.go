package detect

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// BenchmarkWarmingScore: the global model's scoring of a batch of 1,000 fleet records (4
// features, R of score.sample 2,048), plain and with both rolling means warming on every record
// (a fleet's cold start: each record imputed, warmup_impute.go), and the imputation alone; per
// record: go test -run XXX -bench WarmingScore ./stages/detect/ (docs/BENCHMARKS.md §12.65).
func BenchmarkWarmingScore(b *testing.B) {
	f := newBaselines(50, 5)
	s := newBaselineStage(b, f)
	mem := memory.NewGoAllocator()
	rs := f.rows(4000, 1000)
	b.Run("plain", func(b *testing.B) {
		for range b.N {
			bt := testbatch.New(b, mem, "in", fleetFeatures, false, true, rs)
			if err := s.score(bt); err != nil {
				b.Fatal(err)
			}
			bt.Record.Release()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/record")
	})
	b.Run("warming", func(b *testing.B) {
		for range b.N {
			bt := meansWarming(b, append([]testbatch.Row(nil), rs...))
			if err := s.score(bt); err != nil {
				b.Fatal(err)
			}
			bt.Record.Release()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/record")
	})
	b.Run("impute", func(b *testing.B) {
		bt := meansWarming(b, append([]testbatch.Row(nil), rs...))
		defer bt.Record.Release()
		means := make([][]float32, len(fleetFeatures))
		for j := range means {
			means[j] = bt.Feature(j)
		}
		b.ResetTimer()
		for range b.N {
			imputedColumns(s.model, bt, means, nil, nil)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/record")
	})
}
