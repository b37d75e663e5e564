package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// Checking the topics at start. A missing output or dead-letter topic used to show only once
// records flowed: the sink retried forever (or stopped on a client-side "topic not found"),
// and a malformed record with the dead-letter topic missing froze every partition behind it.
// So New asks the brokers, through metadata requests that never auto-create, whether the
// input, output and dead-letter topics exist, and fails at once naming the config key and the
// topic; or, with sink.create_topics, creates the missing output topics. The input topic is
// never created: reading from a topic nobody writes to is a mistake worth stopping for.

// topicCheckWait bounds how long New waits for brokers that cannot be reached at all before
// it gives up (a broker that answers is never waited for: its answer decides). 30 s rides out
// a broker that starts at the same time as outlierd (a JVM start took 3-16 s here) without
// making a wrong bootstrap address look like a hang.
const topicCheckWait = 30 * time.Second

// topicRef is one topic the pipeline needs, with the key that names it.
type topicRef struct {
	key, name string
	brokers   []string
	security  kafkasec.Config
}

// checkTopics makes sure every topic of cfg exists, creating the sink's missing ones when
// sink.create_topics is on. It returns every missing topic at once (errors.Join).
func checkTopics(cfg Config, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), topicCheckWait)
	defer cancel()
	in := topicRef{"ingest.topic", cfg.Ingest.Topic, cfg.Ingest.Brokers, cfg.Ingest.Security}
	log.Info().Str("input", cfg.Ingest.Topic).Str("output", cfg.Sink.Topic).Str("dead_letters", cfg.Sink.DeadLetterTopic).
		Str("brokers", strings.Join(cfg.Ingest.Brokers, ",")).Msg("checking that the topics exist")
	inParts, err := settledPartitions(ctx, in, log)
	if err != nil {
		return err
	}
	var errs []error
	if inParts == 0 {
		errs = append(errs, fmt.Errorf("pipeline: ingest.topic: topic %q does not exist on %s (outlierd never creates its input topic)",
			in.name, strings.Join(in.brokers, ",")))
	}
	if cfg.Run.Role != detect.RoleAll {
		// Asked without auto-creation: a model topic the broker auto-created would be
		// delete-policy (retention could empty it); the operator creates it compacted.
		mt := topicRef{"run.model_topic", cfg.Run.ModelTopic, cfg.Sink.Brokers, cfg.Sink.Security}
		switch n, err := settledPartitions(ctx, mt, log); {
		case err != nil:
			errs = append(errs, err)
		case n == 0:
			errs = append(errs, fmt.Errorf("pipeline: run.model_topic: topic %q does not exist on %s (create it with one partition and cleanup.policy=compact: docs/OPERATIONS.md)",
				mt.name, strings.Join(mt.brokers, ",")))
		}
	}
	if cfg.Run.Role == detect.RoleBuilder { // a builder writes no outputs and no dead letters
		return errors.Join(errs...)
	}
	for _, out := range []topicRef{
		{sink.KeyTopic, cfg.Sink.Topic, cfg.Sink.Brokers, cfg.Sink.Security},
		{sink.KeyDeadLetterTopic, cfg.Sink.DeadLetterTopic, cfg.Sink.Brokers, cfg.Sink.Security},
	} {
		n, err := topicPartitions(ctx, out, log)
		switch {
		case err != nil:
			errs = append(errs, err)
		case n > 0:
		case !cfg.Sink.CreateTopics:
			errs = append(errs, fmt.Errorf("pipeline: %s: topic %q does not exist on %s (create it, or set sink.create_topics: true)",
				out.key, out.name, strings.Join(out.brokers, ",")))
		default:
			parts := cfg.Sink.CreatePartitions
			if parts == 0 {
				parts = max(inParts, 1)
			}
			if err := createTopic(ctx, out, parts, cfg.Sink.CreateReplicationFactor, nil); err != nil {
				errs = append(errs, err)
				continue
			}
			log.Info().Str("key", out.key).Str("topic", out.name).Int("partitions", parts).
				Int("replication_factor", cfg.Sink.CreateReplicationFactor).Msg("created the missing topic (sink.create_topics; replication factor 0: the broker's default)")
		}
	}
	return errors.Join(errs...)
}

// client is a kafka-go client for t's brokers on a transport of its own (kafka-go's
// transports cache metadata: a fresh one sees the topics as they are now).
func (t topicRef) client() (*kafka.Client, *kafka.Transport, error) {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second}
	if t.security.Enabled() {
		var err error
		if tr, err = t.security.Transport(); err != nil {
			return nil, nil, fmt.Errorf("pipeline: %s: %w", t.key, err)
		}
	}
	return &kafka.Client{Addr: kafka.TCP(t.brokers...), Timeout: 10 * time.Second, Transport: tr}, tr, nil
}

// metadataSettle is how long a topic the brokers do not list is asked for again before it is
// called missing: a topic created a moment ago may not be in every broker's metadata yet.
var metadataSettle = 2 * time.Second

// settledPartitions is topicPartitions for a topic outlierd never creates (the input and the
// model topic): an answer "unknown" is asked again for metadataSettle, with a log line, before
// it stands.
func settledPartitions(ctx context.Context, t topicRef, log zerolog.Logger) (int, error) {
	deadline := time.Now().Add(metadataSettle)
	for attempt := 1; ; attempt++ {
		n, err := topicPartitions(ctx, t, log)
		if err != nil || n > 0 || time.Now().After(deadline) {
			return n, err
		}
		log.Info().Str("key", t.key).Str("topic", t.name).Int("attempt", attempt).
			Msg("topic not in the brokers' metadata (yet?); asking again in case it was created a moment ago")
		if !backoffMax(ctx, attempt, time.Second) {
			return n, nil
		}
	}
}

// topicPartitions returns the partition count of t (0 when the broker says it does not
// exist). While the brokers cannot be reached it retries (logging each failure) until ctx
// ends; an answer refusing the request (authorization) is an error naming the key.
func topicPartitions(ctx context.Context, t topicRef, log zerolog.Logger) (int, error) {
	cl, tr, err := t.client()
	if err != nil {
		return 0, err
	}
	defer tr.CloseIdleConnections()
	for attempt := 1; ; attempt++ {
		// kafka.MetadataRequest never sets AllowAutoTopicCreation: asking does not create.
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.name}})
		if err == nil {
			for _, tp := range md.Topics {
				if tp.Name != t.name {
					continue
				}
				switch {
				case errors.Is(tp.Error, kafka.UnknownTopicOrPartition):
					return 0, nil
				case tp.Error != nil && !errors.Is(tp.Error, kafka.LeaderNotAvailable):
					return 0, fmt.Errorf("pipeline: %s: topic %q on %s: %w", t.key, t.name, strings.Join(t.brokers, ","), tp.Error)
				}
				return len(tp.Partitions), nil
			}
			return 0, nil // not listed: unknown
		}
		if !unreachable(err) && !transient(err) {
			return 0, fmt.Errorf("pipeline: %s: checking topic %q on %s: %w", t.key, t.name, strings.Join(t.brokers, ","), err)
		}
		log.Warn().Err(err).Str("key", t.key).Str("topic", t.name).Int("attempt", attempt).
			Str("brokers", strings.Join(t.brokers, ",")).Float64("gives_up_after_s", topicCheckWait.Seconds()).
			Msg("waiting for the brokers to check the topic: unreachable; retrying")
		if !backoff(ctx, attempt) {
			return 0, fmt.Errorf("pipeline: %s: cannot check topic %q: brokers %s unreachable for %s: %w",
				t.key, t.name, strings.Join(t.brokers, ","), topicCheckWait, err)
		}
	}
}

// createTopic creates t with parts partitions, replication factor rf (0: the broker's default)
// and the topic configs entries, and waits until every partition has a leader, so the first
// write finds it.
func createTopic(ctx context.Context, t topicRef, parts, rf int, entries []kafka.ConfigEntry) error {
	cl, tr, err := t.client()
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	if rf == 0 {
		rf = -1 // CreateTopics v4+: the broker's default.replication.factor
	}
	res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: t.name, NumPartitions: parts, ReplicationFactor: rf, ConfigEntries: entries}}})
	if err == nil {
		err = res.Errors[t.name]
	}
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) { // another instance was first
		return fmt.Errorf("pipeline: %s: creating topic %q (sink.create_topics): %w", t.key, t.name, err)
	}
	for attempt := 1; ; attempt++ {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.name}})
		ready := err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil && len(md.Topics[0].Partitions) > 0
		if ready {
			for _, p := range md.Topics[0].Partitions {
				ready = ready && p.Leader.Host != ""
			}
		}
		if ready {
			return nil
		}
		if !backoff(ctx, attempt) {
			return fmt.Errorf("pipeline: %s: topic %q created but without leaders after %s (last error %v)", t.key, t.name, topicCheckWait, err)
		}
	}
}
