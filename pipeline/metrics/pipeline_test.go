package metrics_test

import (
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/ingest"
)

// TestPipelineMetrics runs the whole pipeline on an in-process broker with a known input
// (valid and malformed messages over two partitions) and checks, on a scrape of its /metrics,
// that the series agree with what went through: records in and out, dead letters, flagged,
// the model and window gauges, the per-stage latency counts, and a consumer lag of 0 once
// everything is committed; and /readyz from 503 (before Run) to 200 (brokers answer, a model
// serves) to 503 (stopped).
func TestPipelineMetrics(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(2, "in"), kfake.SeedTopics(1, "out", "dlq"))
	brokers := br.Addrs

	// 6000 messages of the demo's sensor stream, 1% malformed, alternating partitions.
	const total = 6000
	gen := synth.NewSensorStream(7, 0.01, 0.01)
	msgs := make([]*kgo.Record, total)
	bad := 0
	for i := range msgs {
		_, v, _, malformed := gen.Next()
		if malformed {
			bad++
		}
		msgs[i] = &kgo.Record{Topic: "in", Partition: int32(i % 2), Key: []byte(strconv.Itoa(i % 2)), Value: v}
	}
	good := total - bad
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testsupport.Produce(t, br, msgs...)

	cfg := pipeline.Default()
	cfg.Ingest.Brokers, cfg.Ingest.Topic, cfg.Ingest.GroupID = brokers, "in", "metrics-test"
	cfg.Ingest.Features = synth.SensorFeatures
	cfg.Ingest.Uncertainty = &ingest.Uncertainty{Suffix: "_sd"}
	cfg.Ingest.BatchSize, cfg.Ingest.MaxWait = 500, 20*time.Millisecond
	cfg.Sink.Brokers, cfg.Sink.Topic, cfg.Sink.DeadLetterTopic = brokers, "out", "dlq"
	const window, clusters = 3000, 50
	cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.RefreshRecords = window, 2000, 100000
	cfg.Detect.Density.Clusters, cfg.Detect.Density.Samples = clusters, 100
	cfg.Detect.Distance.K, cfg.Detect.Distance.N = 10, 20
	cfg.Run.CommitInterval = 50 * time.Millisecond
	cfg.HTTP.LagInterval = 100 * time.Millisecond
	p, err := pipeline.New(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Metrics().Handler())
	defer srv.Close()
	if st, body := testsupport.Get(t, srv.URL+"/readyz"); st != 503 {
		t.Fatalf("/readyz before Run: %d %q", st, body)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(runCtx) }()

	// Done when every valid record is out, the lag poll shows nothing left on either
	// partition, and /readyz says ready (the poll succeeded and the model serves).
	var fams map[string]*dto.MetricFamily
	for {
		fams = testsupport.Scrape(t, srv.URL+"/metrics")
		st, _ := testsupport.Get(t, srv.URL+"/readyz")
		if value(fams, "outlierd_records_out_total") == float64(good) && st == 200 &&
			value(fams, "outlierd_consumer_lag", "partition", "0") == 0 && value(fams, "outlierd_consumer_lag", "partition", "1") == 0 {
			break
		}
		select {
		case err := <-runErr:
			t.Fatalf("Run ended early: %v", err)
		case <-ctx.Done():
			t.Fatalf("not done after 60 s: out %v of %d, lag %v / %v, /readyz %d", value(fams, "outlierd_records_out_total"), good,
				value(fams, "outlierd_consumer_lag", "partition", "0"), value(fams, "outlierd_consumer_lag", "partition", "1"), st)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stats := p.Stats()
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"outlierd_records_in_total", nil, float64(good)},
		{"outlierd_records_out_total", nil, float64(good)},
		{"outlierd_dead_letters_total", nil, float64(bad)},
		{"outlierd_records_flagged_total", nil, float64(stats.Flagged.Load())},
		{"outlierd_model_version", nil, float64(stats.ModelVersion.Load())},
		{"outlierd_window_records", nil, window},
		{"outlierd_window_capacity", nil, window},
		{"outlierd_microclusters", nil, clusters},
		{"outlierd_broker_connected", nil, 1},
		{"outlierd_gpu_kernel_seconds_total", nil, 0},
		{"outlierd_queue_batches", []string{"queue", "fetched"}, 0},
		{"outlierd_queue_batches", []string{"queue", "scored"}, 0},
	} {
		if got := value(fams, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if stats.ModelVersion.Load() < 1 || bad == 0 {
		t.Fatalf("the input must exercise a model and dead letters: model v%d, %d malformed", stats.ModelVersion.Load(), bad)
	}
	for _, name := range []string{"outlierd_solving_set_size", "outlierd_w_star", "outlierd_offset_commits_total"} {
		if v := value(fams, name); !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	// The first model is built once the window holds min_records, so from less than one
	// batch more than that.
	if v := value(fams, "outlierd_model_window_records"); !(v >= 2000 && v < 2000+float64(cfg.Ingest.BatchSize)) {
		t.Errorf("outlierd_model_window_records = %v, want in [2000, 2500)", v)
	}
	if age := value(fams, "outlierd_model_age_seconds"); !(age >= 0 && age < 60) {
		t.Errorf("model age %v s: the model was built during this test", age)
	}
	// Every record went through one fetch, one detect call and one sink write per batch.
	batches := map[string]uint64{}
	for _, m := range fams["outlierd_batch_duration_seconds"].GetMetric() {
		batches[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
	}
	minBatches := uint64(good / cfg.Ingest.BatchSize)
	for _, stage := range []string{"fetch", "detect", "sink"} {
		if batches[stage] < minBatches {
			t.Errorf("stage %s: %d batches observed, want >= %d (%d records of at most %d)", stage, batches[stage], minBatches, good, cfg.Ingest.BatchSize)
		}
	}
	if d := fams["outlierd_device_info"].GetMetric(); len(d) != 1 || d[0].GetLabel()[0].GetValue() == "" {
		t.Errorf("outlierd_device_info: %v", d)
	}

	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if st, body := testsupport.Get(t, srv.URL+"/readyz"); st != 503 || !strings.Contains(body, "stopping") {
		t.Fatalf("/readyz after Run: %d %q", st, body)
	}
}

// value is the value of the gauge or counter sample of family name whose labels include
// the given name/value pairs (NaN when there is none).
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		if f.GetType() == dto.MetricType_COUNTER {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return math.NaN()
}
