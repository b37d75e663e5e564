package pipeline

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// TestBuilderCountsNoOutputs: a builder writes no output, yet its sink goroutine counted every
// record of the stream in outlierd_records_out_total (operator29: a builder and a scorer over
// 6,000 records each showed 6000). The alert OutlierdStalled
// (deploy/prometheus/alerts.yml: sum(rate(outlierd_records_out_total[5m])) == 0, "a builder
// writes none") then never fired while the scorers were stuck and the builder read on, and
// the dashboard's "Scored" doubled and "Flagged share" halved. A builder's batches are acked
// (its group commits) and count in the run's stats (the stop's log line), not in the metric.
func TestBuilderCountsNoOutputs(t *testing.T) {
	rows := make([]testbatch.Row, 5)
	for i := range rows {
		rows[i] = testbatch.Row{Offset: int64(i), Features: []float32{1}}
	}
	bt := testbatch.New(t, memory.NewGoAllocator(), "in", []string{"x"}, false, false, rows)
	acks := &countAcks{}
	bt.SetAck(acks)
	p := &Pipeline{cfg: Default(), metrics: metrics.New()}
	in := make(chan item, 1)
	in <- item{b: bt}
	close(in)
	p.builderAckLoop(in) // (releases the batch)
	if acks.n != len(rows) {
		t.Errorf("%d records acked, want %d (the builder's group commits them)", acks.n, len(rows))
	}
	if got := p.stats.RecordsOut.Load(); got != int64(len(rows)) {
		t.Errorf("stats: %d records done, want %d", got, len(rows))
	}
	fams, err := p.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "outlierd_records_out_total" {
			if v := f.GetMetric()[0].GetCounter().GetValue(); v != 0 {
				t.Errorf("outlierd_records_out_total = %v on a builder, want 0 (it writes no output)", v)
			}
		}
	}
}
