package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestScrapeAfterKnownEvents feeds known per-batch events and checks every outlierd series
// on a real HTTP scrape of /metrics.
func TestScrapeAfterKnownEvents(t *testing.T) {
	m := New()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	// Before any event: counters 0, model version 0 and no other model series, device cpu.
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(`
# HELP outlierd_model_version Version of the model now serving (0 before the first model).
# TYPE outlierd_model_version gauge
outlierd_model_version 0
# HELP outlierd_records_in_total Records decoded from the input topic into batches.
# TYPE outlierd_records_in_total counter
outlierd_records_in_total 0
# HELP outlierd_device_info The device the detectors run on (value always 1).
# TYPE outlierd_device_info gauge
outlierd_device_info{device="cpu"} 1
`), "outlierd_model_version", "outlierd_model_age_seconds", "outlierd_w_star", "outlierd_records_in_total", "outlierd_device_info"); err != nil {
		t.Fatalf("before events: %v", err)
	}

	for range 3 {
		m.AddRecordsIn(1000)
	}
	m.AddRecordsOut(1000, 12)
	m.AddRecordsOut(900, 3)
	m.AddDetectorOutliers(9, 4, 0)
	m.AddDetectorOutliers(2, 0, 0)
	m.AddDeadLetters(5)
	m.CommitDone(nil)
	m.CommitDone(nil)
	m.CommitDone(errors.New("coordinator moved"))
	m.SetWindow(5000, 20000)
	m.SetModel(ModelInfo{Version: 3, BuiltAt: now.Add(-90 * time.Second), BuildTime: 1500 * time.Millisecond,
		WindowRecords: 20000, MicroClusters: 200, SolvingSetSize: 740, WStar: 2.5})
	m.SetLag("g", "sensors", map[int]int64{0: 5, 2: 17, 1: 0})
	m.SetQueue("fetched", func() int { return 3 })
	m.SetQueue("scored", func() int { return 1 })
	m.ObserveBatch(StageFetch, 3*time.Millisecond)
	m.ObserveBatch(StageFetch, 5*time.Millisecond)
	m.ObserveBatch(StageDetect, 10*time.Millisecond)
	m.ObserveBatch(StageSink, 200*time.Millisecond)

	want := `
# HELP outlierd_records_in_total Records decoded from the input topic into batches.
# TYPE outlierd_records_in_total counter
outlierd_records_in_total 3000
# HELP outlierd_records_out_total Records whose batch the sink wrote and the broker acknowledged.
# TYPE outlierd_records_out_total counter
outlierd_records_out_total 1900
# HELP outlierd_records_flagged_total Acknowledged records whose combined verdict is outlier.
# TYPE outlierd_records_flagged_total counter
outlierd_records_flagged_total 15
# HELP outlierd_dead_letters_total Input messages written to the dead-letter topic (malformed input).
# TYPE outlierd_dead_letters_total counter
outlierd_dead_letters_total 5
# HELP outlierd_detector_outliers_total Acknowledged records each detector's own verdict calls outliers (density: eta-probability < delta, PROCLUS included; distance: w_k(q, S) >= w*; hypercube: too few grid neighbours; 0 while a detector is off), flagged by the combined rule or not.
# TYPE outlierd_detector_outliers_total counter
outlierd_detector_outliers_total{detector="density"} 11
outlierd_detector_outliers_total{detector="distance"} 4
outlierd_detector_outliers_total{detector="hypercube"} 0
# HELP outlierd_offset_commits_total Offset commits that succeeded (an interval with nothing new to commit sends none and counts none).
# TYPE outlierd_offset_commits_total counter
outlierd_offset_commits_total 2
# HELP outlierd_offset_commit_errors_total Offset commits that failed (retried at the next interval).
# TYPE outlierd_offset_commit_errors_total counter
outlierd_offset_commit_errors_total 1
# HELP outlierd_window_records Records in the sliding window the next model is built from.
# TYPE outlierd_window_records gauge
outlierd_window_records 5000
# HELP outlierd_window_capacity Capacity of the sliding window (detect.window).
# TYPE outlierd_window_capacity gauge
outlierd_window_capacity 20000
# HELP outlierd_model_version Version of the model now serving (0 before the first model).
# TYPE outlierd_model_version gauge
outlierd_model_version 3
# HELP outlierd_model_age_seconds Seconds since the serving model's build finished.
# TYPE outlierd_model_age_seconds gauge
outlierd_model_age_seconds 90
# HELP outlierd_model_built_timestamp_seconds Unix time when the serving model's build finished.
# TYPE outlierd_model_built_timestamp_seconds gauge
outlierd_model_built_timestamp_seconds 1.77236631e+09
# HELP outlierd_model_build_seconds How long the serving model took to build.
# TYPE outlierd_model_build_seconds gauge
outlierd_model_build_seconds 1.5
# HELP outlierd_model_window_records Records the serving model was built from.
# TYPE outlierd_model_window_records gauge
outlierd_model_window_records 20000
# HELP outlierd_microclusters Micro-clusters (q) of the serving model.
# TYPE outlierd_microclusters gauge
outlierd_microclusters 200
# HELP outlierd_solving_set_size Points in the serving model's solving set.
# TYPE outlierd_solving_set_size gauge
outlierd_solving_set_size 740
# HELP outlierd_w_star w*: the weight of the window's n-th top outlier, the distance detector's threshold.
# TYPE outlierd_w_star gauge
outlierd_w_star 2.5
# HELP outlierd_consumer_lag Records between a partition's high watermark and the committed offset of the consumer group (a builder's is a group of its own), from the last lag poll.
# TYPE outlierd_consumer_lag gauge
outlierd_consumer_lag{group="g",partition="0",topic="sensors"} 5
outlierd_consumer_lag{group="g",partition="1",topic="sensors"} 0
outlierd_consumer_lag{group="g",partition="2",topic="sensors"} 17
# HELP outlierd_queue_batches Batches waiting in a queue between stages (bounded by run.queue_batches).
# TYPE outlierd_queue_batches gauge
outlierd_queue_batches{queue="fetched"} 3
outlierd_queue_batches{queue="scored"} 1
# HELP outlierd_gpu_kernel_seconds_total Time spent in GPU kernels (0 on the CPU).
# TYPE outlierd_gpu_kernel_seconds_total counter
outlierd_gpu_kernel_seconds_total 0
# HELP outlierd_gpu_transfer_bytes_total Bytes copied between host and GPU (0 on the CPU).
# TYPE outlierd_gpu_transfer_bytes_total counter
outlierd_gpu_transfer_bytes_total{direction="device_to_host"} 0
outlierd_gpu_transfer_bytes_total{direction="host_to_device"} 0
# HELP outlierd_broker_connected 1 while the last round trip to the brokers (the lag poll) succeeded.
# TYPE outlierd_broker_connected gauge
outlierd_broker_connected 0
`
	names := []string{"outlierd_records_in_total", "outlierd_records_out_total", "outlierd_records_flagged_total",
		"outlierd_dead_letters_total", "outlierd_detector_outliers_total", "outlierd_offset_commits_total", "outlierd_offset_commit_errors_total",
		"outlierd_window_records", "outlierd_window_capacity", "outlierd_model_version", "outlierd_model_age_seconds",
		"outlierd_model_built_timestamp_seconds", "outlierd_model_build_seconds", "outlierd_model_window_records",
		"outlierd_microclusters", "outlierd_solving_set_size", "outlierd_w_star", "outlierd_consumer_lag",
		"outlierd_queue_batches", "outlierd_gpu_kernel_seconds_total", "outlierd_gpu_transfer_bytes_total",
		"outlierd_broker_connected"}
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// The latency histogram: counts and sums per stage, and the buckets the values fall in.
	fams := testsupport.Scrape(t, srv.URL+"/metrics")
	hist := fams["outlierd_batch_duration_seconds"]
	if hist == nil || hist.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("outlierd_batch_duration_seconds missing or not a histogram: %v", hist)
	}
	wantHist := map[string]struct {
		count uint64
		sum   float64
		le    float64 // a bucket bound
		below uint64  // observations <= le
	}{
		"fetch":  {2, 0.008, 0.004, 1}, // 3 ms <= 4 ms < 5 ms
		"detect": {1, 0.010, 0.008, 0},
		"sink":   {1, 0.200, 0.256, 1},
	}
	for _, mt := range hist.GetMetric() {
		stage := mt.GetLabel()[0].GetValue()
		w, ok := wantHist[stage]
		if !ok {
			t.Fatalf("unexpected stage %q", stage)
		}
		delete(wantHist, stage)
		h := mt.GetHistogram()
		// 1e-12: the sum of two float64 seconds values, exact up to rounding.
		if h.GetSampleCount() != w.count || math.Abs(h.GetSampleSum()-w.sum) > 1e-12 {
			t.Errorf("%s: count %d sum %g, want %d and %g", stage, h.GetSampleCount(), h.GetSampleSum(), w.count, w.sum)
		}
		found := false
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == w.le {
				found = true
				if b.GetCumulativeCount() != w.below {
					t.Errorf("%s: bucket le=%g holds %d, want %d", stage, w.le, b.GetCumulativeCount(), w.below)
				}
			}
		}
		if !found {
			t.Errorf("%s: no bucket le=%g", stage, w.le)
		}
	}
	if len(wantHist) > 0 {
		t.Errorf("stages missing from the histogram: %v", wantHist)
	}
	// The Go runtime and process collectors are there too (memory alerts use them).
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}

	// Later changes replace the state: a new device, lag without partition 2, GPU work.
	m.SetDevice("cuda:NVIDIA H100")
	m.SetLag("g", "sensors", map[int]int64{0: 1})
	m.SetQueue("scored", nil)
	m.AddGPU(250*time.Millisecond, 4096, 1024, 2)
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(`
# HELP outlierd_device_info The device the detectors run on (value always 1).
# TYPE outlierd_device_info gauge
outlierd_device_info{device="cuda:NVIDIA H100"} 1
# HELP outlierd_consumer_lag Records between a partition's high watermark and the committed offset of the consumer group (a builder's is a group of its own), from the last lag poll.
# TYPE outlierd_consumer_lag gauge
outlierd_consumer_lag{group="g",partition="0",topic="sensors"} 1
# HELP outlierd_queue_batches Batches waiting in a queue between stages (bounded by run.queue_batches).
# TYPE outlierd_queue_batches gauge
outlierd_queue_batches{queue="fetched"} 3
# HELP outlierd_gpu_kernel_seconds_total Time spent in GPU kernels (0 on the CPU).
# TYPE outlierd_gpu_kernel_seconds_total counter
outlierd_gpu_kernel_seconds_total 0.25
# HELP outlierd_gpu_transfer_bytes_total Bytes copied between host and GPU (0 on the CPU).
# TYPE outlierd_gpu_transfer_bytes_total counter
outlierd_gpu_transfer_bytes_total{direction="device_to_host"} 1024
outlierd_gpu_transfer_bytes_total{direction="host_to_device"} 4096
# HELP outlierd_gpu_fallbacks_total GPU steps that failed on the device and ran on the CPU instead (same results; internal/accel's policy).
# TYPE outlierd_gpu_fallbacks_total counter
outlierd_gpu_fallbacks_total 2
`), "outlierd_device_info", "outlierd_consumer_lag", "outlierd_queue_batches", "outlierd_gpu_kernel_seconds_total",
		"outlierd_gpu_transfer_bytes_total", "outlierd_gpu_fallbacks_total"); err != nil {
		t.Fatalf("after changes: %v", err)
	}
}

// scrapeAndCompare scrapes url and compares the named families with the expected text
// exposition: the same HELP, TYPE and samples (by name and labels) with the same values,
// exactly. A family named but absent from both is fine (a series that must not exist yet).
func scrapeAndCompare(t *testing.T, url string, expected io.Reader, names ...string) error {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	want, err := p.TextToMetricFamilies(expected)
	if err != nil {
		return fmt.Errorf("parsing the expected text: %w", err)
	}
	got := testsupport.Scrape(t, url)
	var diffs []string
	for _, name := range names {
		g, w := flatten(got[name]), flatten(want[name])
		for k, wv := range w {
			if gv, ok := g[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("missing %s (want %s)", k, wv))
			} else if gv != wv {
				diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", k, gv, wv))
			}
		}
		for k, gv := range g {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("unexpected %s = %s", k, gv))
			}
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return errors.New(strings.Join(diffs, "\n"))
	}
	return nil
}

// flatten maps "# HELP", "# TYPE" and each sample "name{k=v,...}" of a gauge or counter
// family to its text.
func flatten(f *dto.MetricFamily) map[string]string {
	out := map[string]string{}
	if f == nil {
		return out
	}
	out["# HELP "+f.GetName()] = f.GetHelp()
	out["# TYPE "+f.GetName()] = f.GetType().String()
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		sort.Strings(labels)
		v := m.GetGauge().GetValue()
		if f.GetType() == dto.MetricType_COUNTER {
			v = m.GetCounter().GetValue()
		}
		out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return out
}

// TestReadyzTransitions walks /readyz through every condition: while starting, what the start
// waits for and nothing else; then ready only while connected, serving a model and not
// stopping; /healthz stays 200 throughout.
func TestReadyzTransitions(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	steps := []struct {
		name   string
		do     func()
		status int
		body   []string // substrings of the body
	}{
		{"topic check", func() { m.SetStarting(`checking that the topics exist on b:9092: waiting for ingest.topic "in"`) }, 503,
			[]string{"not ready: checking that the topics exist on b:9092: waiting for ingest.topic \"in\"\n"}},
		{"started", func() { m.SetStarting("") }, 503, []string{"not connected to the brokers", "no model serving yet"}},
		{"connected", func() { m.SetBrokerConnected(true) }, 503, []string{"no model serving yet"}},
		{"model", func() { m.SetModel(ModelInfo{Version: 1, BuiltAt: time.Now()}) }, 200, []string{"ready"}},
		{"broker lost", func() { m.SetBrokerConnected(false) }, 503, []string{"not connected to the brokers"}},
		{"broker back", func() { m.SetBrokerConnected(true) }, 200, []string{"ready"}},
		{"next model", func() { m.SetModel(ModelInfo{Version: 2, BuiltAt: time.Now()}) }, 200, []string{"ready"}},
		{"stopping", m.SetStopping, 503, []string{"stopping"}},
	}
	for _, s := range steps {
		s.do()
		status, body := testsupport.Get(t, srv.URL+"/readyz")
		if status != s.status {
			t.Errorf("%s: /readyz %d (%q), want %d", s.name, status, body, s.status)
		}
		for _, sub := range s.body {
			if !strings.Contains(body, sub) {
				t.Errorf("%s: /readyz body %q lacks %q", s.name, body, sub)
			}
		}
		if s.status == 200 && strings.Contains(body, "not") {
			t.Errorf("%s: ready body %q", s.name, body)
		}
		if st, body := testsupport.Get(t, srv.URL+"/healthz"); st != 200 || body != "ok\n" {
			t.Errorf("%s: /healthz %d %q", s.name, st, body)
		}
	}
	if st, _ := testsupport.Get(t, srv.URL+"/nothing"); st != 404 {
		t.Errorf("/nothing: %d, want 404", st)
	}
}

// TestListen serves on a free port, refuses a taken one and shuts down.
func TestListen(t *testing.T) {
	m := New()
	s, err := Listen("127.0.0.1:0", m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if st, body := testsupport.Get(t, "http://"+s.Addr()+"/healthz"); st != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", st, body)
	}
	if st, _ := testsupport.Get(t, "http://"+s.Addr()+"/metrics"); st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	if _, err := Listen(s.Addr(), m, zerolog.Nop()); err == nil {
		t.Fatalf("a second listener on %s: no error", s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Fatal("still serving after Shutdown")
	}
	if _, err := Listen("127.0.0.1:notaport", m, zerolog.Nop()); err == nil {
		t.Fatal("bad address: no error")
	}
}

func TestStageString(t *testing.T) {
	for s, want := range map[Stage]string{StageFetch: "fetch", StageDetect: "detect", StageSink: "sink", Stage(7): "stage(7)"} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", int(s), got, want)
		}
	}
	m := New()
	m.ObserveBatch(Stage(7), time.Second) // out of range: ignored, no panic
	m.ObserveBatch(Stage(-1), time.Second)
}

// TestReadyzStaleModel: with SetStaleModelAfter, a model older than the limit while records
// have arrived for longer than it (a scorer whose builder stopped publishing: a live builder
// rebuilds at the first batch once detect.refresh_interval has passed since its last build)
// makes /readyz 503 with the model's version and age; a newer model makes it ready again. A
// quiet input ages the model too, as the builder builds from arriving records only: before,
// every scorer went unready on a quiet night ("is the builder publishing?") while its builder
// was fine, and when records came back it was 503 at once, before the builder had rebuilt.
func TestReadyzStaleModel(t *testing.T) {
	m := New()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	m.SetBrokerConnected(true)
	m.SetModel(ModelInfo{Version: 7, BuiltAt: now.Add(-90 * time.Second)})
	for range 4 { // records arrive throughout: the model is 3m30s old at the end
		m.Fetched(time.Millisecond)
		now = now.Add(40 * time.Second)
	}
	m.Fetched(time.Millisecond)
	if ok, why := m.Ready(); !ok {
		t.Fatalf("no limit: not ready: %s", why)
	}
	m.SetStaleModelAfter(time.Minute, 30*time.Second)
	if ok, why := m.Ready(); ok || !strings.Contains(why, "model version 7 is 4m10s old") {
		t.Fatalf("stale model: ready %v, %q", ok, why)
	}
	m.SetModel(ModelInfo{Version: 8, BuiltAt: now.Add(-time.Second)})
	if ok, why := m.Ready(); !ok {
		t.Fatalf("fresh model: not ready: %s", why)
	}
	// A burst within refresh_interval of the model (the builder does not rebuild for it), then
	// a quiet input for hours: ready.
	now = now.Add(5 * time.Second)
	m.Fetched(time.Millisecond)
	now = now.Add(3 * time.Hour)
	if ok, why := m.Ready(); !ok {
		t.Fatalf("quiet input, model 3h old: not ready: %s", why)
	}
	// Records come back: the builder rebuilds from them, and has the limit to publish.
	m.Fetched(time.Millisecond)
	now = now.Add(30 * time.Second)
	m.Fetched(time.Millisecond)
	if ok, why := m.Ready(); !ok {
		t.Fatalf("records back for 30s of a 1m limit: not ready: %s", why)
	}
	now = now.Add(31 * time.Second)
	m.Fetched(time.Millisecond)
	if ok, why := m.Ready(); ok || !strings.Contains(why, "model version 8 is 3h1m") {
		t.Fatalf("records back for 61s, no newer model: ready %v, %q", ok, why)
	}
}

// TestReadyzStaleModelRetuneKeepsItStale: a reload that retunes the serving model (the same
// build: its version and build time) shows it again (SetModel), which reset the staleness clock:
// a scorer whose builder had stopped went ready again for refresh_interval + stale_model_after.
func TestReadyzStaleModelRetuneKeepsItStale(t *testing.T) {
	m := New()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	m.SetBrokerConnected(true)
	m.SetStaleModelAfter(time.Minute, 30*time.Second)
	model := ModelInfo{Version: 7, BuiltAt: now}
	m.SetModel(model)
	for range 6 { // records arrive for 4 minutes, no newer model
		now = now.Add(40 * time.Second)
		m.Fetched(time.Millisecond)
	}
	if ok, why := m.Ready(); ok || !strings.Contains(why, "model version 7") {
		t.Fatalf("stale model: ready %v, %q", ok, why)
	}
	model.WStar = 1.5 // retuned by a reload: the same build
	m.SetModel(model)
	now = now.Add(time.Second)
	m.Fetched(time.Millisecond)
	if ok, why := m.Ready(); ok || !strings.Contains(why, "model version 7") {
		t.Fatalf("the same build retuned: ready %v, %q; want still stale", ok, why)
	}
}

// TestKernelTimes: with SetKernelTimes each scrape reports the device's per-kernel totals as
// read then (none without it, as on the CPU).
func TestKernelTimes(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(""), "outlierd_gpu_kernel_time_seconds_total", "outlierd_gpu_kernel_launches_total"); err != nil {
		t.Fatalf("without a GPU: %v", err)
	}
	launches := int64(0)
	m.SetKernelTimes(func() map[string]KernelTime {
		launches += 1000
		return map[string]KernelTime{"knn_split_q64_d8": {Launches: launches, Time: time.Duration(launches) * 100 * time.Microsecond}}
	})
	want := func(n int64, seconds string) string {
		return `
# HELP outlierd_gpu_kernel_launches_total Launches per GPU kernel since start.
# TYPE outlierd_gpu_kernel_launches_total counter
outlierd_gpu_kernel_launches_total{kernel="knn_split_q64_d8"} ` + strconv.FormatInt(n, 10) + `
# HELP outlierd_gpu_kernel_time_seconds_total GPU time per kernel since start: the split of outlierd_gpu_kernel_seconds_total (a batch's kernels run side by side on streams, so the sum can exceed wall time).
# TYPE outlierd_gpu_kernel_time_seconds_total counter
outlierd_gpu_kernel_time_seconds_total{kernel="knn_split_q64_d8"} ` + seconds + `
`
	}
	for i, seconds := range []string{"0.1", "0.2"} {
		if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(want(int64(1000*(i+1)), seconds)), "outlierd_gpu_kernel_time_seconds_total", "outlierd_gpu_kernel_launches_total"); err != nil {
			t.Fatalf("scrape %d: %v", i+1, err)
		}
	}
}

// TestSetKeys: the models per key's gauges, and evictions as a counter of the running total's
// growth (a total that does not grow adds nothing).
func TestSetKeys(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.SetKeys(10, 4, 180000, 5)
	m.SetKeys(12, 3, 190000, 7)
	m.SetKeys(12, 3, 190000, 7)
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(`
# HELP outlierd_keys_live Keys with a model of their own (detect.key_by: key).
# TYPE outlierd_keys_live gauge
outlierd_keys_live 12
# HELP outlierd_keys_warming Keys held but still scored by the global model (fewer than detect.keys.min_records records).
# TYPE outlierd_keys_warming gauge
outlierd_keys_warming 3
# HELP outlierd_keys_bytes Bytes of the keys' windows and models, as detect accounts them (bounded by detect.keys.max_bytes).
# TYPE outlierd_keys_bytes gauge
outlierd_keys_bytes 190000
# HELP outlierd_key_evictions_total Keys evicted, least recently seen first (detect.keys.max_keys, max_bytes).
# TYPE outlierd_key_evictions_total counter
outlierd_key_evictions_total 7
`), "outlierd_keys_live", "outlierd_keys_warming", "outlierd_keys_bytes", "outlierd_key_evictions_total"); err != nil {
		t.Fatal(err)
	}
}

// TestSetAlertGroupEvictions: the alert groups evicted within their cooldown, as a counter of
// the running total's growth (a total that does not grow adds nothing).
func TestSetAlertGroupEvictions(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.SetAlertGroupEvictions(1024)
	m.SetAlertGroupEvictions(2048)
	m.SetAlertGroupEvictions(2048)
	if err := scrapeAndCompare(t, srv.URL+"/metrics", strings.NewReader(`
# HELP outlierd_alert_group_evictions_total Alert groups (detect.alert_cooldown) evicted within their cooldown, oldest alert first, past 65,536 keys with open groups: each key's next flagged record within its cooldown is an alert of its own.
# TYPE outlierd_alert_group_evictions_total counter
outlierd_alert_group_evictions_total 2048
`), "outlierd_alert_group_evictions_total"); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsOpenMetricsWhenAsked: docs/OPERATIONS.md says /metrics answers in the Prometheus
// text format, or OpenMetrics if asked (content negotiation, as Prometheus asks by default);
// the text format, whatever the Accept header, is not what it says.
func TestMetricsOpenMetricsWhenAsked(t *testing.T) {
	m := New()
	m.AddRecordsOut(100, 1)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	get := func(accept string) (string, string) {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("/metrics (Accept %q): %d %v", accept, resp.StatusCode, err)
		}
		return resp.Header.Get("Content-Type"), string(body)
	}
	// What Prometheus 3 sends: OpenMetrics first, the text format as the fallback.
	ct, body := get("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
	if !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("asked for OpenMetrics, got Content-Type %q, body ending %q", ct, body[max(0, len(body)-40):])
	}
	if !strings.Contains(body, "outlierd_records_out_total 100") {
		t.Fatalf("OpenMetrics body without outlierd_records_out_total 100:\n%s", body)
	}
	if ct, body := get(""); !strings.HasPrefix(ct, "text/plain") || strings.Contains(body, "# EOF") {
		t.Fatalf("no Accept header: Content-Type %q (want the text format)", ct)
	}
}

// TestCommitsHelpMatchesWhatIsCounted: outlierd_offset_commits_total's HELP said it counted
// "(including those with nothing new to commit)", while the commit loop sends no commit for an
// interval with nothing new and counts none (pipeline/commit.go; OPERATIONS' Metrics table says
// so): a scrape's own description contradicted the series. It now says what is counted.
func TestCommitsHelpMatchesWhatIsCounted(t *testing.T) {
	fams, err := New().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "outlierd_offset_commits_total" {
			continue
		}
		if h := f.GetHelp(); strings.Contains(h, "including those with nothing new") || !strings.Contains(h, "nothing new to commit sends none and counts none") {
			t.Errorf("HELP %q: want it to say an interval with nothing new to commit sends none and counts none", h)
		}
		return
	}
	t.Fatal("outlierd_offset_commits_total not registered")
}
