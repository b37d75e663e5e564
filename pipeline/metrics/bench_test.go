package metrics

import (
	"testing"
	"time"
)

// BenchmarkPerBatch is the metrics work the pipeline does for one batch: records in, the
// three stage latencies, the window fill and the acknowledged records. Divide by the batch
// size for the cost per record.
func BenchmarkPerBatch(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.AddRecordsIn(1000)
		m.ObserveBatch(StageFetch, 3*time.Millisecond)
		m.ObserveBatch(StageDetect, 2*time.Millisecond)
		m.SetWindow(50000, 50000)
		m.ObserveBatch(StageSink, 5*time.Millisecond)
		m.AddRecordsOut(1000, 7)
	}
}

// BenchmarkScrape is one /metrics gather with a model, 12 partitions of lag and two queues.
func BenchmarkScrape(b *testing.B) {
	m := New()
	m.SetModel(ModelInfo{Version: 1, BuiltAt: time.Now()})
	lag := map[int]int64{}
	for p := range 12 {
		lag[p] = int64(p)
	}
	m.SetLag("g", "t", lag)
	m.SetQueue("fetched", func() int { return 1 })
	m.SetQueue("scored", func() int { return 2 })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
