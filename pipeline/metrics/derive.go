package metrics

import "github.com/prometheus/client_golang/prometheus"

// ingest.derive's series (stages/ingest/derive.go): held, evicted past derive.max_keys, loaded
// from detect.state_dir at the start. 0 without ingest.derive.

// deriveMetrics are the outlierd_derive_* series.
type deriveMetrics struct {
	series, restored prometheus.Gauge
	evictions        prometheus.Counter
	evictionsSeen    uint64
}

// newDeriveMetrics makes the outlierd_derive_* series and registers them on reg.
func newDeriveMetrics(reg *prometheus.Registry) deriveMetrics {
	d := deriveMetrics{
		series: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outlierd_derive_series",
			Help: "Series of ingest.derive held, one per (partition, key) (at most derive.max_keys)."}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "outlierd_derive_evictions_total",
			Help: "Series of ingest.derive evicted past derive.max_keys, least recently seen first: the key's rolling columns warm again when it returns."}),
		restored: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outlierd_derive_state_restored_series",
			Help: "Series of ingest.derive loaded from detect.state_dir at the start (0: none loaded)."}),
	}
	reg.MustRegister(d.series, d.evictions, d.restored)
	return d
}

// SetDerive records ingest.derive's figures (ingest.DeriveStats): the series held, the
// evictions so far (a running total: the counter takes the growth) and the series loaded at the
// start. Called from the fetch goroutine only.
func (m *Metrics) SetDerive(series int, evictions uint64, restored int) {
	d := &m.derive
	d.series.Set(float64(series))
	d.restored.Set(float64(restored))
	if evictions > d.evictionsSeen {
		d.evictions.Add(float64(evictions - d.evictionsSeen))
		d.evictionsSeen = evictions
	}
}
