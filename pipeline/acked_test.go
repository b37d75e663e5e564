package pipeline

import (
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// countAcks is the source's checkpoint as acked sees it: one call per record.
type countAcks struct{ n int }

func (c *countAcks) Done(int, int64) bool { c.n++; return true }

// BenchmarkAcked is the sink goroutine's step after the broker acknowledged a batch (acked:
// the acks, the counts, the metrics) for 1000 records with 1% flagged, without the live view
// (http.listen empty) and with it (metrics.OfferBatch's hand-off): the difference is what the
// live view costs the pipeline per batch.
func BenchmarkAcked(b *testing.B) {
	rows := make([]testbatch.Row, 1000)
	for i := range rows {
		rows[i] = testbatch.Row{Partition: int32(i % 3), Offset: int64(i), Key: []byte("sensor-" + string(rune('a'+i%26))),
			Time: time.UnixMilli(int64(i)), Features: make([]float32, sensorDims),
			Score: batch.Score{Scored: true, Outlier: i%100 == 50, Score: float64(i%100) / 25, Threshold: 2}}
	}
	features := []string{"temp", "pressure", "humidity", "vibration", "current", "voltage", "rpm", "flow"}
	bt := testbatch.New(b, memory.NewGoAllocator(), "in", features, false, true, rows)
	defer bt.Release()
	for _, live := range []bool{false, true} {
		name := "live=off"
		cfg := Default()
		cfg.HTTP.Listen = ""
		if live {
			name, cfg.HTTP.Listen = "live=on", "127.0.0.1:0"
		}
		b.Run(name, func(b *testing.B) {
			p := &Pipeline{cfg: cfg, metrics: metrics.New()}
			acks := &countAcks{}
			b.ReportAllocs()
			for b.Loop() {
				bt.SetAck(acks)
				p.acked(bt)
			}
			if acks.n == 0 {
				b.Fatal("acked acked nothing")
			}
		})
	}
}

// TestAckedCountsDetectors: acked counts the combined flags and each detector's own verdicts
// into the metrics.
func TestAckedCountsDetectors(t *testing.T) {
	scores := []batch.Score{
		{Scored: true, Outlier: true, DensityOutlier: true, DistanceOutlier: true},
		{Scored: true, DensityOutlier: true},
		{Scored: true, Outlier: true, Hypercube: &batch.HypercubeScore{Outlier: true}},
		{Scored: true, Hypercube: &batch.HypercubeScore{}},
	}
	rows := make([]testbatch.Row, len(scores))
	for i := range rows {
		rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{1}, Score: scores[i]}
	}
	bt := testbatch.New(t, memory.NewGoAllocator(), "in", []string{"x"}, false, true, rows)
	defer bt.Release()
	cfg := Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	p := &Pipeline{cfg: cfg, metrics: metrics.New()}
	p.acked(bt)
	fams, err := p.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"outlierd_records_out_total": 4, "outlierd_records_flagged_total": 2,
		"outlierd_detector_outliers_total/density": 2, "outlierd_detector_outliers_total/distance": 1,
		"outlierd_detector_outliers_total/hypercube": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
