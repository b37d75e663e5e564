package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KernelTime is one GPU kernel's running totals since the device opened
// (gpukern.Device.KernelTimes).
type KernelTime struct {
	Launches int64
	Time     time.Duration
}

var (
	descKernelTime = prometheus.NewDesc("outlierd_gpu_kernel_time_seconds_total",
		"GPU time per kernel since start: the split of outlierd_gpu_kernel_seconds_total (a batch's kernels run side by side on streams, so the sum can exceed wall time).",
		[]string{"kernel"}, nil)
	descKernelLaunches = prometheus.NewDesc("outlierd_gpu_kernel_launches_total",
		"Launches per GPU kernel since start.", []string{"kernel"}, nil)
)

// SetKernelTimes makes every scrape read the per-kernel totals from times (the device's running
// totals; nil: none, as on the CPU): where the device's time goes, kernel by kernel.
func (m *Metrics) SetKernelTimes(times func() map[string]KernelTime) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kernelTimes = times
}

// kernelCollector reports SetKernelTimes' totals at scrape time.
type kernelCollector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (c kernelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descKernelTime
	ch <- descKernelLaunches
}

// Collect implements prometheus.Collector.
func (c kernelCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	times := c.m.kernelTimes
	c.m.mu.Unlock()
	if times == nil {
		return
	}
	for name, t := range times() {
		ch <- prometheus.MustNewConstMetric(descKernelTime, prometheus.CounterValue, t.Time.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descKernelLaunches, prometheus.CounterValue, float64(t.Launches), name)
	}
}
