package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
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

// waitLimitKey keys the wait for unreachable brokers that a context's deadline was set to.
type waitLimitKey struct{}

// withWaitLimit is ctx bounded by d, with d for the messages that say how long the check waits
// (waitLimit): a deadline alone says only what is left of it.
func withWaitLimit(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	return context.WithValue(ctx, waitLimitKey{}, d), cancel
}

// waitLimit is how long the checks under ctx wait for brokers that cannot be reached: the limit
// of withWaitLimit, else what is left to ctx's deadline (a caller's, e.g. topics create
// --timeout), else topicCheckWait.
func waitLimit(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(waitLimitKey{}).(time.Duration); ok {
		return d
	}
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl).Round(time.Millisecond)
	}
	return topicCheckWait
}

// TopicRef is one topic of a config, with the key that names it, its brokers and their TLS and
// SASL settings: what a client for the topic is made from (Client, Dialer), here and in the
// commands (outlierd produce, tail).
type TopicRef struct {
	Key, Name string // the config key naming the topic ("sink.topic"), and the topic
	Brokers   []string
	Security  kafkasec.Config
}

// tlsKey is the config key that turns TLS on for t's brokers.
func (t TopicRef) tlsKey() string {
	if strings.HasPrefix(t.Key, "ingest.") {
		return "ingest.security.tls.enabled"
	}
	return "sink.security.tls.enabled (sink.security, when left out, is ingest.security)"
}

// cutHint is what the topic check's last error adds when TLS is on and the connection was made
// and then cut (an EOF or a reset, not a refusal or a timeout): a plaintext listener reads the
// ClientHello as a request and closes, which looks like a broker going away, so the words say
// which key may be wrong.
func (t TopicRef) cutHint(err error) string {
	if !t.Security.TLS.Enabled || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		return ""
	}
	return " (each connection was cut during the TLS handshake: is it a plaintext listener? " + t.tlsKey() + " is true)"
}

// InputTopic is cfg's ingest.topic, on the ingest brokers.
func InputTopic(cfg Config) TopicRef {
	return TopicRef{"ingest.topic", cfg.Ingest.Topic, cfg.Ingest.Brokers, cfg.Ingest.Security}
}

// OutputTopic is cfg's sink.topic, on the sink brokers.
func OutputTopic(cfg Config) TopicRef {
	return TopicRef{sink.KeyTopic, cfg.Sink.Topic, cfg.Sink.Brokers, cfg.Sink.Security}
}

// checkNote is told what the topic check waits for, as /readyz's reason (metrics.SetStarting);
// nil where nobody listens (outlierd topics create, produce, tail).
type checkNote func(why string)

// waitingFor tells n that the check waits for what, on t's brokers.
func (n checkNote) waitingFor(t TopicRef, what string) {
	if n != nil {
		n(fmt.Sprintf("checking that the topics exist on %s: waiting for %s", strings.Join(t.Brokers, ","), what))
	}
}

// asking tells n that the check asks the brokers about t.
func (n checkNote) asking(t TopicRef) {
	n.waitingFor(t, fmt.Sprintf("the brokers' metadata of %s %q", t.Key, t.Name))
}

// checkTopics makes sure every topic of cfg exists, creating the sink's missing ones when
// sink.create_topics is on. It returns every missing topic at once (errors.Join). note hears
// what it waits for at each step; ctx ending (a stop) ends its waits.
func checkTopics(ctx context.Context, cfg Config, log zerolog.Logger, note checkNote) error {
	ctx, cancel := withWaitLimit(ctx, topicCheckWait)
	defer cancel()
	in := InputTopic(cfg)
	log.Info().Str("input", cfg.Ingest.Topic).Str("output", cfg.Sink.Topic).Str("dead_letters", cfg.Sink.DeadLetterTopic).
		Str("brokers", strings.Join(cfg.Ingest.Brokers, ",")).Msg("checking that the topics exist")
	note.asking(in)
	inIDs, err := settledPartitions(ctx, in, log, note)
	if err != nil {
		return err
	}
	inParts := len(inIDs)
	var errs []error
	if inParts == 0 {
		errs = append(errs, fmt.Errorf("pipeline: ingest.topic: topic %q does not exist on %s (outlierd never creates its input topic)",
			in.Name, strings.Join(in.Brokers, ",")))
	}
	if cfg.Run.Role != detect.RoleAll {
		// Asked without auto-creation: a model topic the broker auto-created would be
		// delete-policy (retention could empty it); the operator creates it compacted.
		mt := TopicRef{"run.model_topic", cfg.Run.ModelTopic, cfg.Sink.Brokers, cfg.Sink.Security}
		note.asking(mt)
		switch ids, err := settledPartitions(ctx, mt, log, note); {
		case err != nil:
			errs = append(errs, err)
		case len(ids) == 0:
			errs = append(errs, fmt.Errorf("pipeline: run.model_topic: topic %q does not exist on %s (create it with one partition and cleanup.policy=compact: docs/OPERATIONS.md)",
				mt.Name, strings.Join(mt.Brokers, ",")))
		}
	}
	if cfg.Run.Role == detect.RoleBuilder { // a builder writes no outputs and no dead letters
		return errors.Join(errs...)
	}
	for _, out := range []TopicRef{
		OutputTopic(cfg),
		{sink.KeyDeadLetterTopic, cfg.Sink.DeadLetterTopic, cfg.Sink.Brokers, cfg.Sink.Security},
	} {
		note.asking(out)
		ids, err := topicPartitions(ctx, out, log, note)
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(ids) > 0:
		case !cfg.Sink.CreateTopics:
			errs = append(errs, fmt.Errorf("pipeline: %s: topic %q does not exist on %s (create it, or set sink.create_topics: true)",
				out.Key, out.Name, strings.Join(out.Brokers, ",")))
		default:
			parts := cfg.Sink.CreatePartitions
			if parts == 0 {
				parts = max(inParts, 1)
			}
			if err := createTopic(ctx, out, parts, cfg.Sink.CreateReplicationFactor, nil, note); err != nil {
				errs = append(errs, err)
				continue
			}
			log.Info().Str("key", out.Key).Str("topic", out.Name).Int("partitions", parts).
				Int("replication_factor", cfg.Sink.CreateReplicationFactor).Msg("created the missing topic (sink.create_topics; replication factor 0: the broker's default)")
		}
	}
	if len(errs) == 0 {
		errs = append(errs, loopOnInput(ctx, cfg, log))
	}
	return errors.Join(errs...)
}

// Transport is a kafka-go transport of its own for t's brokers (kafka-go's transports cache
// metadata: a fresh one sees the topics as they are now), with t's TLS and SASL. Its owner
// calls CloseIdleConnections when done (a Writer closes only a transport it made itself).
func (t TopicRef) Transport() (*kafka.Transport, error) {
	if !t.Security.Enabled() {
		return &kafka.Transport{DialTimeout: 5 * time.Second}, nil
	}
	tr, err := t.Security.Transport()
	if err != nil {
		return nil, fmt.Errorf("pipeline: %s: %w", t.Key, err)
	}
	return tr, nil
}

// Client is a kafka-go client for t's brokers on a Transport of its own, returned beside it.
func (t TopicRef) Client() (*kafka.Client, *kafka.Transport, error) {
	tr, err := t.Transport()
	if err != nil {
		return nil, nil, err
	}
	return &kafka.Client{Addr: kafka.TCP(t.Brokers...), Timeout: 10 * time.Second, Transport: tr}, tr, nil
}

// Dialer is the dialer for a kafka.Reader of t: kafka.DefaultDialer, or with t's TLS and SASL.
func (t TopicRef) Dialer() (*kafka.Dialer, error) {
	if !t.Security.Enabled() {
		return kafka.DefaultDialer, nil
	}
	d, err := t.Security.Dialer()
	if err != nil {
		return nil, fmt.Errorf("pipeline: %s: %w", t.Key, err)
	}
	return d, nil
}

// PartitionIDs returns the ids of t's partitions, for a command that reads or writes the topic
// outside a pipeline (outlierd produce, tail): asked as New asks (a topic created a moment ago
// is waited for, metadataSettle; brokers that cannot be reached, up to topicCheckWait, each
// failure logged), and a topic that does not exist is an error naming its key.
func (t TopicRef) PartitionIDs(ctx context.Context, log zerolog.Logger) ([]int, error) {
	ctx, cancel := withWaitLimit(ctx, topicCheckWait)
	defer cancel()
	ids, err := settledPartitions(ctx, t, log, nil)
	if err == nil && len(ids) == 0 {
		err = fmt.Errorf("pipeline: %s: topic %q does not exist on %s (outlierd topics create --config FILE creates it)",
			t.Key, t.Name, strings.Join(t.Brokers, ","))
	}
	return ids, err
}

// metadataSettle is how long a topic the brokers do not list is asked for again before it is
// called missing: a topic created a moment ago may not be in every broker's metadata yet.
var metadataSettle = 2 * time.Second

// settledPartitions is topicPartitions for a topic outlierd never creates (the input and the
// model topic): an answer "unknown" is asked again for metadataSettle, with a log line, before
// it stands.
func settledPartitions(ctx context.Context, t TopicRef, log zerolog.Logger, note checkNote) ([]int, error) {
	deadline := time.Now().Add(metadataSettle)
	for attempt := 1; ; attempt++ {
		ids, err := topicPartitions(ctx, t, log, note)
		if err != nil || len(ids) > 0 || time.Now().After(deadline) {
			return ids, err
		}
		note.waitingFor(t, fmt.Sprintf("%s %q to appear in the brokers' metadata (not listed there; asked again for %s in case it was created a moment ago)",
			t.Key, t.Name, metadataSettle))
		log.Info().Str("key", t.Key).Str("topic", t.Name).Int("attempt", attempt).
			Msg("topic not in the brokers' metadata (yet?); asking again in case it was created a moment ago")
		if !backoffMax(ctx, attempt, time.Second) {
			return nil, nil
		}
	}
}

// topicPartitions returns the ids of t's partitions (none when the broker says it does not
// exist). While the brokers cannot be reached it retries (logging each failure) until ctx
// ends; an answer refusing the request (authorization) is an error naming the key.
func topicPartitions(ctx context.Context, t TopicRef, log zerolog.Logger, note checkNote) ([]int, error) {
	cl, tr, err := t.Client()
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	limit := waitLimit(ctx)
	var last error // (the last attempt's error that said why the brokers did not answer)
	for attempt := 1; ; attempt++ {
		// kafka.MetadataRequest never sets AllowAutoTopicCreation: asking does not create.
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.Name}})
		if err == nil {
			for _, tp := range md.Topics {
				if tp.Name != t.Name {
					continue
				}
				switch {
				case errors.Is(tp.Error, kafka.UnknownTopicOrPartition):
					return nil, nil
				case tp.Error != nil && !errors.Is(tp.Error, kafka.LeaderNotAvailable):
					return nil, fmt.Errorf("pipeline: %s: topic %q on %s: %w", t.Key, t.Name, strings.Join(t.Brokers, ","), tp.Error)
				}
				ids := make([]int, len(tp.Partitions))
				for i, p := range tp.Partitions {
					ids[i] = p.ID
				}
				return ids, nil
			}
			return nil, nil // not listed: unknown
		}
		if ctx.Err() != nil && last != nil {
			// Cut during an attempt (the wait's end, a stop): its error is the cut's and says
			// nothing of the brokers; the attempt before it does (a TLS handshake cut: cutHint).
			return nil, fmt.Errorf("pipeline: %s: cannot check topic %q: brokers %s unreachable for %s%s: %w (the attempt under way cut: %w)",
				t.Key, t.Name, strings.Join(t.Brokers, ","), limit, t.cutHint(last), last, ctx.Err())
		}
		if plaintextToTLS(err) { // (an unexpected EOF, which unreachable takes for a broker going away)
			return nil, fmt.Errorf("pipeline: %s: checking topic %q on %s: the brokers answer in TLS and the client speaks plaintext: set %s: true: %w",
				t.Key, t.Name, strings.Join(t.Brokers, ","), t.tlsKey(), err)
		}
		if !unreachable(err) && !transient(err) {
			return nil, fmt.Errorf("pipeline: %s: checking topic %q on %s: %w", t.Key, t.Name, strings.Join(t.Brokers, ","), err)
		}
		log.Warn().Err(err).Str("key", t.Key).Str("topic", t.Name).Int("attempt", attempt).
			Str("brokers", strings.Join(t.Brokers, ",")).Float64("gives_up_after_s", limit.Seconds()).
			Msg("waiting for the brokers to check the topic: unreachable; retrying")
		note.waitingFor(t, fmt.Sprintf("the brokers to answer about %s %q (unreachable, attempt %d, gives up after %s: %v)",
			t.Key, t.Name, attempt, limit, err))
		last = err
		if !backoff(ctx, attempt) {
			return nil, fmt.Errorf("pipeline: %s: cannot check topic %q: brokers %s unreachable for %s%s: %w",
				t.Key, t.Name, strings.Join(t.Brokers, ","), limit, t.cutHint(err), err)
		}
	}
}

// createTopic creates t with parts partitions, replication factor rf (0: the broker's default)
// and the topic configs entries, and waits until every partition has a leader, so the first
// write finds it.
func createTopic(ctx context.Context, t TopicRef, parts, rf int, entries []kafka.ConfigEntry, note checkNote) error {
	cl, tr, err := t.Client()
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	if rf == 0 {
		rf = -1 // CreateTopics v4+: the broker's default.replication.factor
	}
	note.waitingFor(t, fmt.Sprintf("the brokers to create %s %q (sink.create_topics)", t.Key, t.Name))
	res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: t.Name, NumPartitions: parts, ReplicationFactor: rf, ConfigEntries: entries}}})
	if err == nil {
		err = res.Errors[t.Name]
	}
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) { // another instance was first
		return fmt.Errorf("pipeline: %s: creating topic %q (sink.create_topics): %w", t.Key, t.Name, err)
	}
	note.waitingFor(t, fmt.Sprintf("a leader for every partition of %s %q, created a moment ago", t.Key, t.Name))
	for attempt := 1; ; attempt++ {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.Name}})
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
			return fmt.Errorf("pipeline: %s: topic %q created but without leaders after %s (last error %v)", t.Key, t.Name, waitLimit(ctx), err)
		}
	}
}
