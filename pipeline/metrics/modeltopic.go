package metrics

import "github.com/prometheus/client_golang/prometheus"

// The model topic's refusals (run.role builder and scorer: pipeline/modelrefuse.go).

// ModelTopicRefusedReasons are outlierd_model_topic_refused_total's reasons, each a series from
// the start (0 until one is refused): too_large, a publication larger than any model of the
// configuration (detect.PublicationBound); incomplete, one dropped unfinished when another
// started; version_ahead, a model (or a key's) whose version is more than an hour ahead of the
// clock (a version is its builder's clock in ms: pipeline/modelversion.go).
var ModelTopicRefusedReasons = []string{"too_large", "incomplete", "version_ahead"}

func newModelTopicRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outlierd_model_topic_refused_total",
		Help: "Model topic messages refused by reason: too_large (a publication larger than any model of this configuration), incomplete (a publication dropped unfinished when another started), version_ahead (a version, its builder's clock in ms, more than an hour ahead of this clock)."},
		[]string{"reason"})
	for _, r := range ModelTopicRefusedReasons {
		c.WithLabelValues(r)
	}
	return c
}

// AddModelTopicRefused counts one refusal of the model topic for reason.
func (m *Metrics) AddModelTopicRefused(reason string) {
	m.modelTopicRefused.WithLabelValues(reason).Inc()
}

// ModelTopicFollowers are outlierd_model_topic_read_failures_total's followers, each a series
// from the start: model, the global model's (partition 0); keys, the keys' models' partitions'.
var ModelTopicFollowers = []string{"model", "keys"}

func newModelTopicReadFailures() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outlierd_model_topic_read_failures_total",
		Help: "Reads of the model topic by a scorer's followers that failed, by follower: model (the global model's partition) or keys (the keys' models' partitions); each is retried after a backoff, and the warnings are paced (one at a follower's first failure, then 30 s later, the gap doubling to 5 min)."},
		[]string{"follower"})
	for _, f := range ModelTopicFollowers {
		c.WithLabelValues(f)
	}
	return c
}

// AddModelTopicReadFailure counts one failed read of the model topic by follower.
func (m *Metrics) AddModelTopicReadFailure(follower string) {
	m.modelTopicReadFailures.WithLabelValues(follower).Inc()
}
