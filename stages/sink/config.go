package sink

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
)

// Emit is sink.emit: which records become output messages. The word is decoded once when the
// YAML is loaded (UnmarshalYAML) and checked by Validate.
type Emit string

// Emit values.
const (
	EmitOutliers Emit = "outliers" // only records whose Score.Outlier is true
	EmitAll      Emit = "all"      // every record, scored or not (each carries its verdict)
)

// UnmarshalYAML decodes the word (Validate checks it).
func (e *Emit) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, e) }

// Format is sink.format: how outputs are encoded. The word is decoded once when the YAML is
// loaded and checked by Validate.
type Format string

// Format values.
const (
	FormatJSON  Format = "json"  // one JSON object per emitted record (see encodeJSON for the schema)
	FormatArrow Format = "arrow" // one Arrow IPC stream per batch and source partition (see arrowSchema)
)

// UnmarshalYAML decodes the word (Validate checks it).
func (f *Format) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, f) }

// Compression is sink.compression: the produce codec's word, decoded once when the YAML is
// loaded and checked by Validate (compressionCodecs).
type Compression string

// UnmarshalYAML decodes the word (Validate checks it).
func (c *Compression) UnmarshalYAML(n *yaml.Node) error { return config.DecodeEnum(n, c) }

// AcksAll is the only accepted RequiredAcks value.
const AcksAll = "all"

// MaxCreatePartitions bounds the partitions of a topic outlierd creates (sink.create_partitions,
// topics create --partitions): the request's count is an int32, and a larger value wraps.
const MaxCreatePartitions = 1_000_000

// Config configures the sink. Zero values are not defaults: start from Default() and override.
type Config struct {
	// Brokers are the bootstrap brokers, "host:port". In a pipeline config the default is
	// ingest.brokers (and sink.security ingest.security, when sink.security is left out: the
	// same cluster); set them for an output cluster of its own. Listing more than one only
	// matters for the first connection: the writer learns the cluster from metadata.
	Brokers []string `yaml:"brokers"`

	// Topic receives the outputs. Required. The topic must exist, or CreateTopics must be on:
	// the start fails otherwise, naming the key and the topic (the writer never asks the
	// broker to auto-create it: a typo must not silently create a topic with broker-default
	// partitions and retention).
	Topic string `yaml:"topic"`

	// DeadLetterTopic receives messages that could not be decoded, and records whose output could
	// not be encoded, with the reason in a header. Required, and different from Topic so that
	// consumers of the outputs never see raw input messages. Must exist, as Topic.
	DeadLetterTopic string `yaml:"dead_letter_topic"`

	// CreateTopics: true creates Topic and DeadLetterTopic at start when they do not exist,
	// with CreatePartitions partitions and CreateReplicationFactor replicas (and the broker's
	// defaults for everything else, retention included). Default false: a missing topic fails
	// the start, naming the key and the topic, since creating it is a decision about its
	// partitions, replication and retention that an operator should make. An existing topic
	// is never changed.
	CreateTopics bool `yaml:"create_topics"`

	// CreatePartitions is the partition count of a topic CreateTopics creates. Default 0: as
	// many as the input topic has (the outputs of one key then keep their order on one
	// partition, like the inputs).
	CreatePartitions int `yaml:"create_partitions"`

	// CreateReplicationFactor is the replication factor of a topic CreateTopics creates.
	// Default 0: the broker's default.replication.factor. acks=all makes every output wait
	// for all in-sync replicas, so more replicas cost write latency, not durability.
	CreateReplicationFactor int `yaml:"create_replication_factor"`

	// Emit is "outliers" (default: only flagged records are written, the usual alerting use)
	// or "all" (every record with its scores: a full audit trail, at the cost of output volume
	// equal to the input volume).
	Emit Emit `yaml:"emit"`

	// Format is "json" (default: one self-describing message per record, for humans and
	// generic consumers) or "arrow" (one Arrow IPC stream per batch and source partition: far
	// fewer and smaller messages for analytical consumers, but binary and batch-grained).
	Format Format `yaml:"format"`

	// BatchSize is the most messages the writer puts in one produce request per partition
	// (kafka-go Writer.BatchSize). Default 1000. Larger batches mean fewer requests; a batch that
	// is not full waits up to BatchTimeout before it is sent. Measured (BenchmarkWrite, 1000
	// JSON outputs per Write over 3 partitions) 100 and 1000 were within noise of each other.
	BatchSize int `yaml:"batch_size"`

	// BatchTimeout is how long a partly filled produce batch waits for more messages before it
	// is sent (kafka-go Writer.BatchTimeout). Default 1ms. Write is synchronous and hands the
	// writer all outputs of a batch at once, so waiting gains nothing, and every Write pays this
	// delay once (the last, partial batch of each partition is only sent on the timer). With
	// kafka-go's own default (1s) a Write of 1000 outputs took 1.01 s (~990 records/s); with 1ms
	// 6-19 ms on kfake and 16-29 ms on Apache Kafka 4.1.1 (shared 2-core machine, load 5-12);
	// 10ms added ~10 ms per Write. Must be > 0 (kafka-go reads 0 as "use 1s").
	BatchTimeout time.Duration `yaml:"batch_timeout"`

	// MaxMessageBytes caps one produce request and so one message (kafka-go
	// Writer.BatchBytes), in bytes. Default 1,000,000, just under the broker's default
	// message.max.bytes (1,048,588); raise both together. A JSON output above it becomes a
	// dead letter; an Arrow output above it is split into several messages by rows.
	MaxMessageBytes int `yaml:"max_message_bytes"`

	// RequiredAcks must be "all" (the default), the only accepted value. Write's contract is that
	// once it returns nil every output is durable, and the caller then commits the input offsets.
	// With acks=1 a leader that fails before its followers copy the outputs loses them after the
	// inputs were committed: silent data loss. With acks=0 there is no acknowledgement at all.
	// The field exists so that a config asking for anything else fails loudly instead of being
	// ignored.
	RequiredAcks string `yaml:"required_acks"`

	// Compression is the produce compression codec: "none" (default), "gzip", "snappy", "lz4"
	// or "zstd". JSON outputs compress several-fold with lz4/zstd, trading producer CPU for
	// network and broker disk; on a loopback or fast LAN "none" is fastest.
	Compression Compression `yaml:"compression"`

	// WriteTimeout bounds one produce request (kafka-go Writer.WriteTimeout). Default 10s; at
	// least MinWriteTimeout (1ns timed every write out, and the sink waited for the broker as
	// for an outage, without end).
	WriteTimeout time.Duration `yaml:"write_timeout"`

	// MaxAttempts is how many times a write the broker refuses is tried before the pipeline
	// gives up and stops with an error naming the topic, this key and the attempts (the
	// batch's offsets are not committed: it is read again after a restart). Default 10. The
	// writer tries each partition's produce request up to MaxAttempts times, 100 ms to 1 s
	// apart (kafka-go Writer.MaxAttempts), and the pipeline counts those tries: a refused
	// produce uses the whole budget in one write, and a write that fails before producing (the
	// topic's metadata is missing: deleted) counts one per try, 100 ms to 5 s apart, so 10
	// span about 20 s: enough for a leader election, short enough that a deleted or
	// unwritable topic stops the pipeline instead of freezing it. Tries that do not reach the
	// broker at all (connection refused or reset, timeouts: an outage) are not counted: the
	// pipeline waits for the broker however long it is away, with /readyz 503 naming the
	// topic and a warning per failed write. A retry after a lost acknowledgement can
	// duplicate outputs (kafka-go has no idempotent producer): consumers de-duplicate by the
	// "id" field / outlierd-id header.
	MaxAttempts int `yaml:"max_attempts"`

	// Security is TLS and SASL for the connections to Brokers (see pipeline/kafkasec). Default
	// none (plaintext, unauthenticated). Kept per stage, beside Brokers: the outputs may go to
	// another cluster than the input, or be written as another principal.
	Security kafkasec.Config `yaml:"security"`
}

// MinWriteTimeout is sink.write_timeout's floor.
const MinWriteTimeout = 10 * time.Millisecond

// Default returns the default sink configuration; Brokers, Topic and DeadLetterTopic still need
// to be set.
func Default() Config {
	return Config{
		Emit:            EmitOutliers,
		Format:          FormatJSON,
		BatchSize:       1000,
		BatchTimeout:    time.Millisecond,
		MaxMessageBytes: 1_000_000,
		RequiredAcks:    AcksAll,
		Compression:     "none",
		WriteTimeout:    10 * time.Second,
		MaxAttempts:     10,
	}
}

// compressionCodecs maps Config.Compression to kafka-go codecs.
var compressionCodecs = map[Compression]kafka.Compression{
	"none":   0,
	"gzip":   kafka.Gzip,
	"snappy": kafka.Snappy,
	"lz4":    kafka.Lz4,
	"zstd":   kafka.Zstd,
}

// Validate reports every problem of c at once (errors.Join), each a config.FieldError naming
// its key ("sink.emit"), so that a config file points at the line to fix.
func (c *Config) Validate() error {
	var errs []error
	add := func(key, format string, a ...any) { errs = append(errs, config.Fieldf(key, format, a...)) }

	if len(c.Brokers) == 0 {
		add("sink.brokers", "at least one broker (host:port) is required")
	}
	for i, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			add(fmt.Sprintf("sink.brokers[%d]", i), "%s", config.NotHostPort(b))
			continue
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			add(fmt.Sprintf("sink.brokers[%d]", i), "%q: port must be 1..65535", b)
		}
	}
	if err := ValidTopicName(c.Topic); err != nil {
		add("sink.topic", "%w", err)
	}
	if err := ValidTopicName(c.DeadLetterTopic); err != nil {
		add("sink.dead_letter_topic", "%w", err)
	}
	if c.Topic != "" && c.Topic == c.DeadLetterTopic {
		add("sink.dead_letter_topic", "must differ from sink.topic (%q)", c.Topic)
	}
	if c.Emit != EmitOutliers && c.Emit != EmitAll {
		add("sink.emit", "%q, want %q or %q", c.Emit, EmitOutliers, EmitAll)
	}
	if c.Format != FormatJSON && c.Format != FormatArrow {
		add("sink.format", "%q, want %q or %q", c.Format, FormatJSON, FormatArrow)
	}
	if c.BatchSize < 1 || c.BatchSize > 1_000_000 {
		add("sink.batch_size", "%d, want 1..1000000", c.BatchSize)
	}
	if c.BatchTimeout <= 0 || c.BatchTimeout > time.Minute {
		add("sink.batch_timeout", "%v, want > 0 and <= 1m", c.BatchTimeout)
	}
	// 1 KiB leaves room for a useful message; 1 GiB is far beyond any broker's limit.
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > 1<<30 {
		add("sink.max_message_bytes", "%d, want 1024..%d", c.MaxMessageBytes, 1<<30)
	}
	if c.RequiredAcks != AcksAll {
		add("sink.required_acks", "%q, only %q is supported (outputs must be durable before input offsets are committed)", c.RequiredAcks, AcksAll)
	}
	if _, ok := compressionCodecs[c.Compression]; !ok {
		add("sink.compression", "%q, want none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	if c.WriteTimeout < MinWriteTimeout {
		add("sink.write_timeout", "%v, want >= %v (an acks=all produce waits for the replicas: shorter timed every write out, retried as for a broker outage without end)", c.WriteTimeout, MinWriteTimeout)
	}
	if c.MaxAttempts < 1 {
		add("sink.max_attempts", "%d, want >= 1", c.MaxAttempts)
	}
	// Kafka's own bounds: partitions are an int32 count, the replication factor an int16.
	if c.CreatePartitions < 0 || c.CreatePartitions > MaxCreatePartitions {
		add("sink.create_partitions", "%d, want 0 (as many as the input topic) .. %d", c.CreatePartitions, MaxCreatePartitions)
	}
	if c.CreateReplicationFactor < 0 || c.CreateReplicationFactor > 32767 {
		add("sink.create_replication_factor", "%d, want 0 (the broker's default) .. 32767", c.CreateReplicationFactor)
	}
	errs = append(errs, c.Security.Problems("sink.security.")...)
	return errors.Join(errs...)
}

// ValidTopicName applies Kafka's topic name rules: 1..249 characters of [a-zA-Z0-9._-], not "."
// or "..". The broker refuses other names, so a config naming one cannot run; the pipeline's
// Validate applies the rule to ingest.topic too.
func ValidTopicName(t string) error {
	if t == "" {
		return errors.New("required")
	}
	if len(t) > 249 {
		return fmt.Errorf("%d characters, Kafka allows at most 249", len(t))
	}
	if t == "." || t == ".." {
		return fmt.Errorf("%q is not a valid topic name", t)
	}
	for _, r := range t {
		if !(r == '.' || r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			return fmt.Errorf("%q: Kafka topic names use only [a-zA-Z0-9._-]", t)
		}
	}
	return nil
}
