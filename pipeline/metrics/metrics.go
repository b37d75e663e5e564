// Package metrics is the pipeline's observability surface: Prometheus collectors fed by the
// pipeline once per batch (never per record), a consumer-lag poller, and the HTTP listener
// that serves /metrics, /healthz, /readyz and the live view at / (live.go, liveview.go).
//
// Every series is named outlierd_*; docs/OPERATIONS.md lists them with the alerts worth
// setting. A Metrics owns its own registry (no global state), so several pipelines in one
// process (tests, the demo) do not collide.
package metrics

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Stage names a pipeline stage whose per-batch latency is recorded.
type Stage int

// The stages of outlierd_batch_duration_seconds{stage}.
const (
	// StageFetch is one Source.Next call: waiting for the first message, then filling the
	// batch (at most ingest.max_wait after the first message). On a quiet topic it includes
	// the idle wait.
	StageFetch Stage = iota
	// StageDetect is one detect-stage Process call: window push, live micro-clusters and
	// scoring (and, once, the synchronous first model build under before_model: hold). On a
	// GPU a call begins its batch and finishes an earlier one (detect.Deps.Overlap): it times
	// the stage's goroutine, not one batch from start to end.
	StageDetect
	// StageSink is one sink write: encoding and producing the outputs until the broker
	// acknowledged them (acks=all).
	StageSink
	numStages
)

// String is the stage's label value.
func (s Stage) String() string {
	switch s {
	case StageFetch:
		return "fetch"
	case StageDetect:
		return "detect"
	case StageSink:
		return "sink"
	}
	return "stage(" + strconv.Itoa(int(s)) + ")"
}

// batchBuckets span 0.5 ms to about 16 s in doublings: a detect call on a small batch takes
// about a millisecond, a sink write waits for acks=all (milliseconds to seconds), and a fetch
// on a quiet topic waits for input (seconds).
var batchBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// ModelInfo is what the metrics show of the model now serving.
type ModelInfo struct {
	// Version increments with every rebuild (1 = the first model).
	Version uint64
	// BuiltAt is when the build finished; the model's age is measured from it.
	BuiltAt time.Time
	// BuildTime is how long the build took.
	BuildTime time.Duration
	// WindowRecords is how many records the model was built from.
	WindowRecords int
	// MicroClusters is the number of micro-clusters (q) of the model.
	MicroClusters int
	// SolvingSetSize is the number of points in the solving set.
	SolvingSetSize int
	// WStar is the weight of the window's n-th top outlier: the distance detector's threshold.
	WStar float64
}

// Metrics holds the pipeline's collectors and its readiness. All methods are safe for
// concurrent use; the recording methods are a few atomic operations each, meant to be called
// once per batch.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time // the clock of model age (tests replace it)

	recordsIn, recordsOut, flagged, deadLetters prometheus.Counter
	batchDuration                               [numStages]prometheus.Observer
	commits, commitErrors, lagPollErrors        prometheus.Counter
	windowRecords, windowCapacity               prometheus.Gauge
	keysLive, keysWarming, keysBytes            prometheus.Gauge // detect.key_by (SetKeys)
	keyEvictions                                prometheus.Counter
	keyModelsTooLarge, keyModelsRead            prometheus.Counter     // run.role builder / scorer with key_by
	modelTopicRefused                           *prometheus.CounterVec // run.role builder / scorer (modeltopic.go)
	modelTopicReadFailures                      *prometheus.CounterVec // run.role scorer (modeltopic.go)
	keyEvictionsSeen                            uint64
	alertGroupEvictions                         prometheus.Counter // detect.alert_cooldown (SetAlertGroupEvictions)
	alertGroupEvictionsSeen                     uint64
	derive                                      deriveMetrics // ingest.derive (SetDerive: derive.go)
	bounds                                      boundMetrics  // bounds.go
	gpuKernelSeconds                            prometheus.Counter
	gpuFallbacks                                prometheus.Counter
	gpuBytesToDevice, gpuBytesToHost            prometheus.Counter
	brokerConnected                             prometheus.Gauge
	// detectorOutliers: density, distance, hypercube (outlierd_detector_outliers_total).
	detectorOutliers [3]prometheus.Counter

	// mu guards the state read at scrape time by the custom collectors below.
	mu     sync.Mutex
	model  *ModelInfo
	device string
	lag    map[int]int64 // partition -> lag, of group on topic
	group  string
	topic  string
	queues map[string]func() int
	// kernelTimes reads the GPU's per-kernel totals (SetKernelTimes; nil on the CPU).
	kernelTimes func() map[string]KernelTime
	// live is the live view's feed (live.go, liveview.go); liveStreams counts its open pages.
	live        *liveFeed
	liveStreams liveStreamCap

	connected atomic.Bool
	serving   atomic.Bool
	stopping  atomic.Bool
	// staleAfter (nanoseconds; 0: never) makes a model older than it "not ready" once records
	// have arrived for longer than it that a live builder would have rebuilt from (a scorer whose
	// builder stopped publishing: models are built from arriving records, so a quiet input ages
	// them too). A builder rebuilds at the first batch once refresh (detect.refresh_interval)
	// has passed since its last build: arriving is when the source first handed out records
	// refresh or more after the serving model was set at modelSet (unix nanoseconds on m.now's
	// clock; 0: none yet).
	staleAfter, staleRefresh atomic.Int64
	modelSet, arriving       atomic.Int64

	// The source's and the sink's part of readiness (Ready). progress is when the source last
	// handed out records or dead letters (Fetched), unix nanoseconds on m.now's clock, 0 since
	// the brokers were lost or answered again; caughtUp is whether the last lag poll found no
	// lag; sourceStaleAfter is how old progress may be while there is lag (0: not judged, no
	// lag poller). sinkFailing holds, per write path, why the sink cannot write (guarded by mu).
	progress         atomic.Int64
	caughtUp         atomic.Bool
	sourceStaleAfter atomic.Int64
	joining          atomic.Pointer[func() string] // SetJoining's (joining.go)
	sinkFailing      map[string]string
	// waiting says what the first model waits for (SetWaiting; guarded by mu), /readyz's
	// reason until a model serves.
	waiting string
	// starting says what pipeline.New waits for (SetStarting; guarded by mu): while it is set,
	// it is /readyz's only reason.
	starting string
	// inputMissing says that the last lag poll found no input topic (setInputMissing; guarded
	// by mu; "" otherwise): a reason of /readyz.
	inputMissing string
	// lagHealth is when a lag poll last succeeded, and since, how many failed (lagstale.go).
	lagHealth lagHealth
}

// New returns a Metrics with its own registry, holding the pipeline's series plus the Go
// runtime and process collectors (memory, goroutines, CPU, open files). The device is "cpu"
// until SetDevice.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), now: time.Now, device: "cpu", queues: map[string]func() int{}, sinkFailing: map[string]string{},
		live: newLiveFeed()}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m.recordsIn = counter("outlierd_records_in_total", "Records decoded from the input topic into batches.")
	m.recordsOut = counter("outlierd_records_out_total", "Records whose batch the sink wrote and the broker acknowledged.")
	m.flagged = counter("outlierd_records_flagged_total", "Acknowledged records whose combined verdict is outlier.")
	m.deadLetters = counter("outlierd_dead_letters_total", "Input messages written to the dead-letter topic (malformed input).")
	byDetector := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outlierd_detector_outliers_total",
		Help: "Acknowledged records each detector's own verdict calls outliers (density: eta-probability < delta, PROCLUS included; distance: w_k(q, S) >= w*; hypercube: too few grid neighbours; 0 while a detector is off), flagged by the combined rule or not."},
		[]string{"detector"})
	for i, d := range []string{"density", "distance", "hypercube"} {
		m.detectorOutliers[i] = byDetector.WithLabelValues(d)
	}
	m.commits = counter("outlierd_offset_commits_total", "Offset commits that succeeded (an interval with nothing new to commit sends none and counts none).")
	m.commitErrors = counter("outlierd_offset_commit_errors_total", "Offset commits that failed (retried at the next interval).")
	m.lagPollErrors = counter("outlierd_lag_poll_errors_total", "Consumer-lag polls that failed.")
	m.windowRecords = gauge("outlierd_window_records", "Records in the sliding window the next model is built from.")
	m.windowCapacity = gauge("outlierd_window_capacity", "Capacity of the sliding window (detect.window).")
	m.keysLive = gauge("outlierd_keys_live", "Keys with a model of their own (detect.key_by: key).")
	m.keysWarming = gauge("outlierd_keys_warming", "Keys held but still scored by the global model (fewer than detect.keys.min_records records).")
	m.keysBytes = gauge("outlierd_keys_bytes", "Bytes of the keys' windows and models, as detect accounts them (bounded by detect.keys.max_bytes).")
	m.keyEvictions = counter("outlierd_key_evictions_total", "Keys evicted, least recently seen first (detect.keys.max_keys, max_bytes).")
	m.alertGroupEvictions = counter("outlierd_alert_group_evictions_total", "Alert groups (detect.alert_cooldown) evicted within their cooldown, oldest alert first, past 65,536 keys with open groups: each key's next flagged record within its cooldown is an alert of its own.")
	m.keyModelsTooLarge = counter("outlierd_key_models_too_large_total", "Keys' models a builder did not publish for their size (over sink.max_message_bytes): a tombstone instead, the scorers score those keys with the global model.")
	m.keyModelsRead = counter("outlierd_key_models_read_total", "Messages a scorer read from the model topic's partitions of its keys (restores after rebalances and what the builder published since).")
	m.gpuKernelSeconds = counter("outlierd_gpu_kernel_seconds_total", "Time spent in GPU kernels (0 on the CPU).")
	m.gpuFallbacks = counter("outlierd_gpu_fallbacks_total", "GPU steps that failed on the device and ran on the CPU instead (same results; internal/accel's policy).")
	bytesMoved := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outlierd_gpu_transfer_bytes_total",
		Help: "Bytes copied between host and GPU (0 on the CPU)."}, []string{"direction"})
	m.gpuBytesToDevice = bytesMoved.WithLabelValues("host_to_device")
	m.gpuBytesToHost = bytesMoved.WithLabelValues("device_to_host")
	m.modelTopicRefused = newModelTopicRefused()
	m.modelTopicReadFailures = newModelTopicReadFailures()
	m.brokerConnected = gauge("outlierd_broker_connected", "1 while the last round trip to the brokers (the lag poll) succeeded.")
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "outlierd_batch_duration_seconds",
		Help:    "Per-batch latency of each stage: fetch (Source.Next, includes waiting for input), detect (window, micro-clusters, scoring), sink (encode and produce until acknowledged).",
		Buckets: batchBuckets}, []string{"stage"})
	for s := range numStages {
		m.batchDuration[s] = hist.WithLabelValues(s.String())
	}
	m.reg.MustRegister(m.recordsIn, m.recordsOut, m.flagged, m.deadLetters, byDetector, m.commits, m.commitErrors,
		m.lagPollErrors, m.windowRecords, m.windowCapacity, m.keysLive, m.keysWarming, m.keysBytes, m.keyEvictions, m.alertGroupEvictions, m.keyModelsTooLarge, m.keyModelsRead, m.modelTopicRefused, m.modelTopicReadFailures, m.gpuKernelSeconds, m.gpuFallbacks, bytesMoved,
		m.brokerConnected, hist, stateCollector{m}, kernelCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.derive = newDeriveMetrics(m.reg)
	m.bounds = newBoundMetrics(m.reg)
	return m
}

// Registry is the registry the metrics are gathered from (for tests and embedding).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// AddRecordsIn counts n records decoded into a batch.
func (m *Metrics) AddRecordsIn(n int) { m.recordsIn.Add(float64(n)) }

// Fetched notes a Source.Next that handed out records or dead letters after d (the fetch
// stage's latency): the source consumes (Ready). Dead letters count here, when fetched, not
// when written: the sink may write after an outage what was fetched before it.
func (m *Metrics) Fetched(d time.Duration) {
	m.batchDuration[StageFetch].Observe(d.Seconds())
	now := m.now().UnixNano()
	m.progress.Store(now)
	if m.arriving.Load() == 0 && now-m.modelSet.Load() >= m.staleRefresh.Load() {
		m.arriving.CompareAndSwap(0, now)
	}
}

// AddRecordsOut counts an acknowledged batch: out records, of which flagged are outliers.
func (m *Metrics) AddRecordsOut(out, flagged int) {
	m.recordsOut.Add(float64(out))
	m.flagged.Add(float64(flagged))
}

// AddDetectorOutliers counts an acknowledged batch's records that the density, distance and
// hypercube detectors each call outliers (outlierd_detector_outliers_total{detector}).
func (m *Metrics) AddDetectorOutliers(density, distance, hypercube int) {
	for i, n := range [...]int{density, distance, hypercube} {
		if n > 0 {
			m.detectorOutliers[i].Add(float64(n))
		}
	}
}

// AddKeyModelsTooLarge counts n keys' models a builder did not publish for their size.
func (m *Metrics) AddKeyModelsTooLarge(n int) { m.keyModelsTooLarge.Add(float64(n)) }

// AddKeyModelsRead counts n messages a scorer read from its keys' model partitions.
func (m *Metrics) AddKeyModelsRead(n int) { m.keyModelsRead.Add(float64(n)) }

// AddDeadLetters counts n messages written to the dead-letter topic.
func (m *Metrics) AddDeadLetters(n int) { m.deadLetters.Add(float64(n)) }

// SetSinkFailing records why the sink cannot write on the write path named what ("" once it
// writes again); /readyz is 503 with the reason while any path fails.
func (m *Metrics) SetSinkFailing(what, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if why == "" {
		delete(m.sinkFailing, what)
		return
	}
	m.sinkFailing[what] = why
}

// setSourceStaleAfter turns on the source's part of readiness (the lag poller does, since it
// provides the lag it needs): with lag, records must have moved within d.
func (m *Metrics) setSourceStaleAfter(d time.Duration) { m.sourceStaleAfter.Store(int64(d)) }

// ObserveBatch records one batch's latency in stage s.
func (m *Metrics) ObserveBatch(s Stage, d time.Duration) {
	if s >= 0 && s < numStages {
		m.batchDuration[s].Observe(d.Seconds())
	}
}

// CommitDone counts one offset commit, failed when err is not nil.
func (m *Metrics) CommitDone(err error) {
	if err != nil {
		m.commitErrors.Inc()
		return
	}
	m.commits.Inc()
}

// SetWindow sets the window's fill: records held out of capacity.
func (m *Metrics) SetWindow(records, capacity int) {
	m.windowRecords.Set(float64(records))
	m.windowCapacity.Set(float64(capacity))
}

// SetKeys records the models per key's figures (detect.Stage.KeyStats): keys live and warming,
// the bytes they hold, and the evictions so far (a running total: the counter takes the growth).
// Called from the detect goroutine only.
func (m *Metrics) SetKeys(live, warming int, bytes int64, evictions uint64) {
	m.keysLive.Set(float64(live))
	m.keysWarming.Set(float64(warming))
	m.keysBytes.Set(float64(bytes))
	if evictions > m.keyEvictionsSeen {
		m.keyEvictions.Add(float64(evictions - m.keyEvictionsSeen))
		m.keyEvictionsSeen = evictions
	}
}

// SetAlertGroupEvictions records the alert groups evicted within their cooldown so far
// (detect.Stage.AlertGroupEvictions, a running total: the counter takes the growth). Called
// from the detect goroutine only.
func (m *Metrics) SetAlertGroupEvictions(evictions uint64) {
	if evictions > m.alertGroupEvictionsSeen {
		m.alertGroupEvictions.Add(float64(evictions - m.alertGroupEvictionsSeen))
		m.alertGroupEvictionsSeen = evictions
	}
}

// SetModel records the model that now serves; from then on /readyz may report ready. The same
// build shown again (a reload retuned it: its version and build time) keeps its staleness clock.
func (m *Metrics) SetModel(info ModelInfo) {
	m.live.modelChanged(info, m.now())
	m.mu.Lock()
	same := m.model != nil && m.model.Version == info.Version && m.model.BuiltAt.Equal(info.BuiltAt)
	m.model = &info
	m.mu.Unlock()
	if !same {
		m.modelSet.Store(m.now().UnixNano())
		m.arriving.Store(0)
	}
	m.serving.Store(true)
}

// SetWaiting says what the first model waits for ("holding 100 of 5000 records
// (detect.min_records) for the first model"); /readyz gives it as the reason while no model
// serves.
func (m *Metrics) SetWaiting(why string) {
	m.mu.Lock()
	m.waiting = why
	m.mu.Unlock()
}

// SetStarting says what the pipeline's start waits for (the topic check: "checking that the
// topics exist on …: waiting for …"), or why the start failed; "" once it has started. The
// HTTP listener serves before the start, so /readyz can say it while it lasts.
func (m *Metrics) SetStarting(why string) {
	m.mu.Lock()
	m.starting = why
	m.mu.Unlock()
}

// SetDevice names the device the detectors run on ("cpu", or "cuda:<GPU name>").
func (m *Metrics) SetDevice(name string) {
	m.mu.Lock()
	m.device = name
	m.mu.Unlock()
}

// AddGPU adds GPU work: kernel time, bytes copied each way, and the steps that failed on the
// device and ran on the CPU instead. Nothing calls it on the CPU,
// where the series stay 0.
func (m *Metrics) AddGPU(kernel time.Duration, hostToDevice, deviceToHost, fallbacks int64) {
	m.gpuKernelSeconds.Add(kernel.Seconds())
	m.gpuFallbacks.Add(float64(fallbacks))
	m.gpuBytesToDevice.Add(float64(hostToDevice))
	m.gpuBytesToHost.Add(float64(deviceToHost))
}

// SetLag replaces the consumer lag of group on topic, per partition (records between the
// partition's high watermark and the group's committed offset). Partitions absent from lag
// disappear from the output.
func (m *Metrics) SetLag(group, topic string, lag map[int]int64) {
	cp := make(map[int]int64, len(lag))
	for p, l := range lag {
		cp[p] = l
	}
	m.mu.Lock()
	m.group, m.topic, m.lag = group, topic, cp
	m.mu.Unlock()
	total := int64(0)
	for _, l := range lag {
		total += max(l, 0)
	}
	m.caughtUp.Store(total == 0)
}

// LagPollFailed counts a failed lag poll.
func (m *Metrics) LagPollFailed() { m.lagPollErrors.Inc() }

// SetBrokerConnected records whether the brokers answered the last round trip.
func (m *Metrics) SetBrokerConnected(ok bool) {
	was := m.connected.Swap(ok)
	if ok {
		m.brokerConnected.Set(1)
	} else {
		m.brokerConnected.Set(0)
		m.caughtUp.Store(false)
	}
	// What moved before the brokers answered again says nothing about whether the source
	// consumes now (it may wait to rejoin its group): what it hands out while they are lost
	// was fetched before (queued chunks). It must move again, or the lag show nothing left.
	if ok != was {
		m.progress.Store(0)
	}
}

// SetStaleModelAfter makes /readyz report "not ready" while the serving model is older than
// d and records have arrived for longer than d that a live builder, rebuilding at the first
// batch once refresh has passed since its last build, would have published a newer model from
// (0: never). A reload of detect.refresh_interval sets it again.
func (m *Metrics) SetStaleModelAfter(d, refresh time.Duration) {
	m.staleAfter.Store(int64(d))
	m.staleRefresh.Store(int64(refresh))
}

// setInputMissing says why the input topic cannot be consumed because the brokers do not know
// it ("" once a lag poll finds it again): the lag poller sets it.
func (m *Metrics) setInputMissing(why string) {
	m.mu.Lock()
	m.inputMissing = why
	m.mu.Unlock()
}

// SetStopping marks the pipeline as stopping (the soft stop began, or it ended): /readyz
// reports not ready from then on.
func (m *Metrics) SetStopping() { m.stopping.Store(true) }

// SetQueue registers the length function of a named queue between stages, read at scrape
// time as outlierd_queue_batches{queue=name}; a nil function removes it.
func (m *Metrics) SetQueue(name string, length func() int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if length == nil {
		delete(m.queues, name)
		return
	}
	m.queues[name] = length
}

// Ready reports whether the pipeline is ready and, when it is not, why. Ready means: not
// stopping, connected to the brokers (the last lag poll was answered), a model serving, the
// sink writing (its last write on each path succeeded), and the source consuming: it fetched
// within the stale time since the brokers last answered, or the last lag poll found no lag
// (nothing to consume). Outputs and dead letters written do not count: after an outage the
// sink may drain what was fetched before it while the source still waits to rejoin its group. Under
// backpressure the source fetches at the pipeline's pace, so a slow pipeline stays ready. The
// stale time is 3 lag intervals, at least 10 s (lag.go): lag is only seen once an interval,
// and a loaded pipeline may take seconds per batch without being stuck. While the pipeline is
// starting (SetStarting), what the start waits for is the only reason: the brokers, the model,
// the sink and the source are judged once it runs; a stop during the start says "stopping
// during the start" instead.
func (m *Metrics) Ready() (bool, string) {
	m.mu.Lock()
	starting := m.starting
	m.mu.Unlock()
	if starting != "" {
		if m.stopping.Load() {
			return false, "stopping during the start"
		}
		return false, starting
	}
	var why []string
	if m.stopping.Load() {
		why = append(why, "stopping")
	}
	if !m.connected.Load() {
		why = append(why, "not connected to the brokers")
	}
	if !m.serving.Load() {
		m.mu.Lock()
		waiting := m.waiting
		m.mu.Unlock()
		if waiting != "" {
			why = append(why, "no model serving yet: "+waiting)
		} else {
			why = append(why, "no model serving yet")
		}
	} else if d := time.Duration(m.staleAfter.Load()); d > 0 {
		m.mu.Lock()
		version, age := m.model.Version, m.now().Sub(m.model.BuiltAt)
		m.mu.Unlock()
		since := m.arriving.Load()
		if age > d && since != 0 && m.now().Sub(time.Unix(0, since)) > d {
			why = append(why, fmt.Sprintf("model version %d is %s old (stale after %s) while records arrive: is the builder publishing?", version, age.Round(time.Second), d))
		}
	}
	m.mu.Lock()
	failing := make([]string, 0, len(m.sinkFailing))
	for _, f := range m.sinkFailing {
		failing = append(failing, f)
	}
	inputMissing := m.inputMissing
	m.mu.Unlock()
	sort.Strings(failing)
	why = append(why, failing...)
	if inputMissing != "" {
		why = append(why, inputMissing)
	}
	if unknown, ok := m.lagUnknown(); ok { // (the source's part needs the lag: lagstale.go)
		why = append(why, unknown)
	} else if stale := time.Duration(m.sourceStaleAfter.Load()); stale > 0 && !m.caughtUp.Load() {
		if notConsuming := m.sourceNotConsuming(stale); notConsuming != "" {
			why = append(why, notConsuming)
		}
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; ")
	}
	return true, ""
}

// The descriptions of the series computed at scrape time.
var (
	descModelVersion = prometheus.NewDesc("outlierd_model_version",
		"Version of the model now serving (0 before the first model).", nil, nil)
	descModelBuilt = prometheus.NewDesc("outlierd_model_built_timestamp_seconds",
		"Unix time when the serving model's build finished.", nil, nil)
	descModelAge = prometheus.NewDesc("outlierd_model_age_seconds",
		"Seconds since the serving model's build finished.", nil, nil)
	descModelBuild = prometheus.NewDesc("outlierd_model_build_seconds",
		"How long the serving model took to build.", nil, nil)
	descModelWindow = prometheus.NewDesc("outlierd_model_window_records",
		"Records the serving model was built from.", nil, nil)
	descMicroClusters = prometheus.NewDesc("outlierd_microclusters",
		"Micro-clusters (q) of the serving model.", nil, nil)
	descSolvingSet = prometheus.NewDesc("outlierd_solving_set_size",
		"Points in the serving model's solving set.", nil, nil)
	descWStar = prometheus.NewDesc("outlierd_w_star",
		"w*: the weight of the window's n-th top outlier, the distance detector's threshold.", nil, nil)
	descDevice = prometheus.NewDesc("outlierd_device_info",
		"The device the detectors run on (value always 1).", []string{"device"}, nil)
	descLag = prometheus.NewDesc("outlierd_consumer_lag",
		"Records between a partition's high watermark and the committed offset of the consumer group (a builder's is a group of its own), from the last lag poll.",
		[]string{"group", "topic", "partition"}, nil)
	descQueue = prometheus.NewDesc("outlierd_queue_batches",
		"Batches waiting in a queue between stages (bounded by run.queue_batches).", []string{"queue"}, nil)
)

// stateCollector emits the series whose values are read at scrape time: the model (only
// once one serves, except its version), the device, the lag and the queue lengths.
type stateCollector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descModelVersion, descModelBuilt, descModelAge, descModelBuild,
		descModelWindow, descMicroClusters, descSolvingSet, descWStar, descDevice, descLag, descQueue} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	model, device, group, topic := m.model, m.device, m.group, m.topic
	lag := make([]int, 0, len(m.lag))
	for p := range m.lag {
		lag = append(lag, p)
	}
	sort.Ints(lag)
	lagValues := make([]int64, len(lag))
	for i, p := range lag {
		lagValues[i] = m.lag[p]
	}
	queues := make(map[string]func() int, len(m.queues))
	for k, f := range m.queues {
		queues[k] = f
	}
	m.mu.Unlock()

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if model == nil {
		gauge(descModelVersion, 0)
	} else {
		gauge(descModelVersion, float64(model.Version))
		gauge(descModelBuilt, float64(model.BuiltAt.UnixNano())/1e9)
		gauge(descModelAge, m.now().Sub(model.BuiltAt).Seconds())
		gauge(descModelBuild, model.BuildTime.Seconds())
		gauge(descModelWindow, float64(model.WindowRecords))
		gauge(descMicroClusters, float64(model.MicroClusters))
		gauge(descSolvingSet, float64(model.SolvingSetSize))
		gauge(descWStar, model.WStar)
	}
	gauge(descDevice, 1, device)
	for i, p := range lag {
		gauge(descLag, float64(lagValues[i]), group, topic, strconv.Itoa(p))
	}
	for name, f := range queues {
		gauge(descQueue, float64(f()), name)
	}
}
