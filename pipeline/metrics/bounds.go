package metrics

import "github.com/prometheus/client_golang/prometheus"

// Bounds past which outlierd passes work on or gives a count up: the alert groups' carried
// counts (stages/detect/alert_carry.go) and a builder's scan of the model topic for keys'
// models of another configuration (pipeline/keyscanbound.go).

// boundMetrics are their series.
type boundMetrics struct {
	foldedLost     prometheus.Counter
	foldedLostSeen uint64
	stalePasses    prometheus.Counter
}

// newBoundMetrics makes the series and registers them on reg.
func newBoundMetrics(reg *prometheus.Registry) boundMetrics {
	b := boundMetrics{
		foldedLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "outlierd_alert_folded_lost_total",
			Help: "Flagged records folded into an alert (detect.alert_cooldown) whose count no later alert tells (folded_into_previous_alert): their alert groups pruned past 65,536 keys, then their counts past 4,096 keys waiting for their next alert, oldest first."}),
		stalePasses: prometheus.NewCounter(prometheus.CounterOpts{Name: "outlierd_model_topic_stale_passes_total",
			Help: "A builder's reads of the model topic again for keys' models of another configuration, past detect.keys.max_keys of them held at once: each reads on from the first key not held, once those held are tombstoned."}),
	}
	reg.MustRegister(b.foldedLost, b.stalePasses)
	return b
}

// SetAlertFoldedLost records the flagged records whose fold count was lost so far
// (detect.Stage.AlertFoldedLost, a running total: the counter takes the growth). Called from
// the detect goroutine only.
func (m *Metrics) SetAlertFoldedLost(lost uint64) {
	b := &m.bounds
	if lost > b.foldedLostSeen {
		b.foldedLost.Add(float64(lost - b.foldedLostSeen))
		b.foldedLostSeen = lost
	}
}

// AddStalePass counts one pass of a builder's scan past detect.keys.max_keys stale keys.
func (m *Metrics) AddStalePass() { m.bounds.stalePasses.Inc() }
