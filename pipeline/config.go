// Package pipeline wires the stages of outlierd: a Kafka source yields Arrow batches, the
// detect stage scores them against a model of the recent window, and the sink produces the
// outputs; offsets are committed only once every record below them is done. The path of one
// record: stages/ingest (fetch, decode, batch) -> stages/detect (window, micro-clusters,
// model, scores) -> stages/sink (JSON or Arrow out, acks=all) -> pipeline/checkpoint (commit).
package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// Config is the whole pipeline's configuration: the YAML files in configs/ decode into it
// strictly (an unknown key is an error with its line and column).
type Config struct {
	// Device is auto (the GPU when the binary was built with CUDA and one is present, else the
	// CPU), cpu or cuda. Default auto.
	Device DeviceChoice `yaml:"device"`
	// Ingest is the Kafka source: brokers, topic, group, decoder and features.
	Ingest ingest.Config `yaml:"ingest"`
	// Detect is the model and the scoring.
	Detect detect.Config `yaml:"detect"`
	// Sink is the output and dead-letter topics.
	Sink sink.Config `yaml:"sink"`
	// Run tunes the pipeline's own loops.
	Run RunConfig `yaml:"run"`
	// HTTP is the listener serving /metrics, /healthz and /readyz (empty listen: off).
	HTTP metrics.Config `yaml:"http"`

	// sinkInherits says which of sink.brokers and sink.security Derive took from ingest (the
	// file leaves them out): a problem of theirs is ingest's, reported there alone.
	sinkInherits struct{ brokers, security bool }
}

// minCommitInterval is run.commit_interval's floor, minShutdownTimeout run.shutdown_timeout's,
// minStaleModelAfter run.stale_model_after's (but 0, off): a rebuild, its publication and the
// scorers' read of it take seconds.
const (
	minCommitInterval  = 10 * time.Millisecond
	minShutdownTimeout = 100 * time.Millisecond
	minStaleModelAfter = 10 * time.Second
)

// RunConfig tunes the loops between the stages.
type RunConfig struct {
	// QueueBatches bounds each channel between stages, in batches: a slow sink fills the
	// queues and then stops the fetching, so memory stays bounded (about 2 x QueueBatches x
	// batch size records in flight). Default 4.
	QueueBatches int `yaml:"queue_batches"`
	// SinkWriters is how many batches the sink writes at once. A write waits for the broker's
	// acknowledgement (the producer's batch timeout, 1 ms, plus a round trip): one at a time
	// capped the pipeline near 270,000 records/s whatever the detector's speed (issue 12 item 5).
	// Each batch's own outputs keep their order; outputs of batches written at once may reach
	// the output topic in either order (1 keeps batch order). Acks may then come out of order:
	// offsets are committed only below the oldest batch not yet acknowledged (at-least-once is
	// unchanged). Default 8: a batch with malformed records is two writes (outputs, dead
	// letters), so four writers capped the GPU build near 1,000,000 records/s on the 16-core
	// host, each of them waiting for acks 95% of its time (docs/BENCHMARKS.md §4.9).
	SinkWriters int `yaml:"sink_writers"`
	// CommitInterval is how often done offsets are committed to the consumer group. Shorter
	// means fewer duplicates after a crash, more commit traffic. Default 1s; at least
	// minCommitInterval (1ns ran the commit loop flat out, a core busy committing nothing).
	CommitInterval time.Duration `yaml:"commit_interval"`
	// ShutdownTimeout bounds the graceful stop (drain, flush, commit, a builder's last
	// publications, the keys' and alarm state's save to detect.state_dir) after SIGINT/SIGTERM;
	// past it in-flight work is abandoned (it is re-read after a restart), a save cut (the last
	// complete one stands). Default 30s; at least minShutdownTimeout (1ns abandoned every stop's
	// work at once: no flush, no final commit); with key_by: key, add about 10 s per 100,000
	// keys (docs/OPERATIONS.md, Shutdown).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Role is this process's part (docs/OPERATIONS.md "Builder and scorers"): all (default:
	// one process reads, builds models and scores), builder (reads the whole input topic in the
	// group "<ingest.group_id>.builder", builds models and publishes them to ModelTopic; emits
	// nothing) or scorer (scores the partitions the group gives it with the newest model of
	// ModelTopic; keeps no window, builds nothing). One model of the whole stream, many scorers.
	Role detect.Role `yaml:"role"`
	// ModelTopic is the topic models travel on from the builder to the scorers, on the output
	// cluster (sink.brokers, sink.security). Create it with one partition and
	// cleanup.policy=compact. Required for builder and scorer; unused by all. With it,
	// sink.max_message_bytes must be at least 2048 (a model chunk and its framing).
	ModelTopic string `yaml:"model_topic"`
	// StaleModelAfter makes a scorer not ready (/readyz 503, with the model's age) once its
	// model is older than this while records have arrived for longer than this that a live
	// builder would have rebuilt from (detect.refresh_interval after the model): the builder
	// stopped publishing (a quiet input ages the model too: builds come from arriving records).
	// 0 (default) never does; the age is always in outlierd_model_age_seconds. Else at least
	// minStaleModelAfter (10s): 1ns made the scorers unready at every rebuild.
	StaleModelAfter time.Duration `yaml:"stale_model_after"`
	// KeyPublishInterval, for a builder with detect.key_by: key, is the least time between two
	// publications of one key's model on ModelTopic (its first model goes out at once; a key
	// rebuilt more often is published with its newest model when the interval has passed).
	// It bounds the model topic's write rate at about keys x 15 KB / interval (docs/OPERATIONS.md
	// "Models per key"). Default 10s; 0: every rebuild (gathered once a second).
	KeyPublishInterval time.Duration `yaml:"key_publish_interval"`
	// LogLevel is the least severe level logged: debug, info (default), warn or error. debug
	// adds the Kafka client's own messages (joins, fetches, rebalances: most of the log) and
	// per-model details; `outlierd run --log-level` overrides it. A change needs a restart.
	LogLevel LogLevel `yaml:"log_level"`
}

// DeviceChoice is the device key: where detection runs. The word is decoded once when the
// YAML is loaded and checked by Validate.
type DeviceChoice string

// The device words.
const (
	DeviceAuto DeviceChoice = "auto" // the GPU when the binary has CUDA and one is present, else the CPU
	DeviceCPU  DeviceChoice = "cpu"
	DeviceCUDA DeviceChoice = "cuda"
)

// UnmarshalYAML decodes the word (Validate checks it).
func (d *DeviceChoice) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, d) }

// LogLevel is run.log_level, decoded once when the YAML is loaded and checked by Validate.
type LogLevel string

// UnmarshalYAML decodes the word (Validate checks it).
func (l *LogLevel) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, l) }

// logLevels maps run.log_level to zerolog's levels.
var logLevels = map[string]zerolog.Level{
	"debug": zerolog.DebugLevel, "info": zerolog.InfoLevel, "warn": zerolog.WarnLevel, "error": zerolog.ErrorLevel,
}

// ParseLogLevel reads a run.log_level value (debug, info, warn or error).
func ParseLogLevel(s string) (zerolog.Level, error) {
	if l, ok := logLevels[s]; ok {
		return l, nil
	}
	return zerolog.InfoLevel, fmt.Errorf("%q, want debug, info, warn or error", s)
}

// Default is the configuration with every default filled in.
func Default() Config {
	return Config{
		Device: DeviceAuto,
		Ingest: ingest.Default(),
		Detect: detect.Default(),
		Sink:   defaultSink(),
		Run: RunConfig{QueueBatches: 4, SinkWriters: 8, CommitInterval: time.Second, ShutdownTimeout: 30 * time.Second, Role: detect.RoleAll, LogLevel: "info",
			KeyPublishInterval: 10 * time.Second},
		HTTP: metrics.DefaultConfig(),
	}
}

// Derive fills the defaults that follow other keys when the file leaves them out (LoadConfig
// calls it before Validate): sink.brokers and sink.security are ingest's (the outputs go to the
// cluster the input comes from), and detect's window-bound defaults (detect.Config.Derive).
func (c *Config) Derive(written func(path string) bool) {
	if !written("sink.brokers") {
		c.Sink.Brokers = append([]string(nil), c.Ingest.Brokers...)
		c.sinkInherits.brokers = true
		if !written("sink.security") {
			c.Sink.Security = c.Ingest.Security
			c.sinkInherits.security = true
		}
	}
	c.Detect.Derive(func(key string) bool { return written("detect." + key) })
}

// defaultSink is sink.Default with ingest's default brokers (Derive makes them the file's
// ingest.brokers).
func defaultSink() sink.Config {
	s := sink.Default()
	s.Brokers = ingest.Default().Brokers
	return s
}

// Validate reports every problem of every section at once (errors.Join), each a
// config.FieldError naming its key, so that lint, the start and a reload refuse a config that
// cannot run, pointing at the line to fix. Each section checks its own keys beside its stage;
// the checks across sections (the detect stage and the feature count) are here.
func (c *Config) Validate() error {
	var errs []error
	add := func(key, format string, a ...any) { errs = append(errs, config.Fieldf(key, format, a...)) }
	switch c.Device {
	case DeviceAuto, DeviceCPU, DeviceCUDA:
	default:
		add("device", "must be auto, cpu or cuda, got %q", c.Device)
	}
	ingestErr := c.Ingest.Validate()
	for _, err := range []error{ingestErr, c.Detect.Validate(), c.sinkProblems(ingestErr), c.HTTP.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Ingest.Features) > 0 { // the detectors see the derived features as features too
		if err := c.Detect.ValidateFeatures(len(c.Ingest.Columns())); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Run.QueueBatches < 1 {
		add("run.queue_batches", "must be >= 1, got %d", c.Run.QueueBatches)
	}
	if c.Run.SinkWriters < 1 {
		add("run.sink_writers", "must be >= 1, got %d", c.Run.SinkWriters)
	}
	if c.Run.CommitInterval < minCommitInterval {
		add("run.commit_interval", "must be >= %s (shorter only loads the brokers and a core), got %s", minCommitInterval, c.Run.CommitInterval)
	}
	if c.Run.ShutdownTimeout < minShutdownTimeout {
		add("run.shutdown_timeout", "must be >= %s (shorter cannot hold the drain's flush and the final commit: every stop's work was abandoned), got %s", minShutdownTimeout, c.Run.ShutdownTimeout)
	}
	if _, err := ParseLogLevel(string(c.Run.LogLevel)); err != nil {
		add("run.log_level", "%w", err)
	}
	if c.Ingest.Topic != "" { // empty: ingest's Validate says it is required
		if err := sink.ValidTopicName(c.Ingest.Topic); err != nil {
			add("ingest.topic", "%w", err)
		}
	}
	errs = append(errs, c.validateRole()...)
	if c.Ingest.DeadLetterTopic != "" && c.Ingest.DeadLetterTopic != c.Sink.DeadLetterTopic {
		add("ingest.dead_letter_topic", "%q differs from sink.dead_letter_topic %q: the sink writes the dead letters, set it there", c.Ingest.DeadLetterTopic, c.Sink.DeadLetterTopic)
	}
	onInput := c.sinkOnInputBrokers() // (other brokers: another cluster's topic of the name, or the start tells: topicloop.go)
	if onInput && c.Sink.Topic != "" && c.Sink.Topic == c.Ingest.Topic {
		add("sink.topic", "%q is the input topic: outputs would be read back as input", c.Sink.Topic)
	}
	if onInput && c.Sink.DeadLetterTopic != "" && c.Sink.DeadLetterTopic == c.Ingest.Topic {
		add("sink.dead_letter_topic", "%q is the input topic: dead letters would be read back as input, fail again and be written again, without end", c.Sink.DeadLetterTopic)
	}
	return errors.Join(errs...)
}

// sinkProblems is the sink section's Validate less the problems of the brokers and security it
// took from ingest (Derive) where ingestErr reports those of ingest: the same values, reported
// twice, the second time as keys the file does not have.
func (c *Config) sinkProblems(ingestErr error) error {
	err := c.Sink.Validate()
	if err == nil || (!c.sinkInherits.brokers && !c.sinkInherits.security) {
		return err
	}
	keys := config.FieldKeys(ingestErr)
	has := func(prefix string) bool {
		return slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, prefix) })
	}
	drop := func(k string) bool {
		brokers := k == "sink.brokers" || strings.HasPrefix(k, "sink.brokers[")
		return brokers && c.sinkInherits.brokers && has("ingest.brokers") ||
			strings.HasPrefix(k, "sink.security.") && c.sinkInherits.security && has("ingest.security.")
	}
	var kept []error
	for _, e := range config.Flatten(err) {
		var fe *config.FieldError
		if errors.As(e, &fe) && drop(fe.Key) {
			continue
		}
		kept = append(kept, e)
	}
	return errors.Join(kept...)
}

// LoadConfig reads a YAML file over the defaults, strictly, and validates it.
func LoadConfig(path string) (Config, error) {
	cfg := Default()
	err := config.Load(path, &cfg)
	return cfg, err
}

// LoadConfigBytes is LoadConfig for an embedded file.
func LoadConfigBytes(name string, data []byte) (Config, error) {
	cfg := Default()
	err := config.LoadBytes(name, data, &cfg)
	return cfg, err
}

// summary is a short description of the config for the start-up log line.
func (c *Config) summary() string {
	return fmt.Sprintf("%s -> %s (features %s)", c.Ingest.Topic, c.Sink.Topic, strings.Join(c.Ingest.Columns(), ","))
}
