package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/sink"
)

// A sink topic named as the input topic (what is a loop and what is not).
//
// Outputs or dead letters written to the input topic are read back as input: outputs scored
// again, dead letters failing again and written again, without end. But a sink that writes to
// another cluster (a mirror's topic of the same name, the usual way to carry a stream's results
// to another site) loops nothing. The config refuses the name where the file tells that the
// sink writes to the input's cluster: sink.brokers left out (ingest's), or sharing a broker
// with ingest.brokers (sinkOnInputBrokers). Two lists with no broker in common may still reach
// one cluster (each names some of its brokers), which only the brokers tell: the start's topic
// check compares the two clusters' ids then (loopOnInput).

// sinkOnInputBrokers says whether sink.brokers reach the input's cluster as far as the config
// tells: ingest's (left out: Derive), or one address in common (its host's case aside).
func (c *Config) sinkOnInputBrokers() bool {
	if c.sinkInherits.brokers {
		return true
	}
	in := make(map[string]bool, len(c.Ingest.Brokers))
	for _, b := range c.Ingest.Brokers {
		in[strings.ToLower(strings.TrimSpace(b))] = true
	}
	for _, b := range c.Sink.Brokers {
		if in[strings.ToLower(strings.TrimSpace(b))] {
			return true
		}
	}
	return false
}

// loopOnInput refuses a sink topic named as the input topic on sink brokers the config could
// not tell from the input's (no broker in common) when they answer with the input cluster's id.
// An id the brokers do not give (older than Kafka 0.10.1) cannot tell: logged, accepted.
func loopOnInput(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if cfg.sinkOnInputBrokers() { // (Validate refused the name)
		return nil
	}
	var same []TopicRef
	for _, out := range []TopicRef{OutputTopic(cfg), {sink.KeyDeadLetterTopic, cfg.Sink.DeadLetterTopic, cfg.Sink.Brokers, cfg.Sink.Security}} {
		if out.Name != "" && out.Name == cfg.Ingest.Topic {
			same = append(same, out)
		}
	}
	if len(same) == 0 {
		return nil
	}
	inID, err := clusterID(ctx, InputTopic(cfg))
	if err != nil {
		return err
	}
	outID, err := clusterID(ctx, same[0])
	if err != nil {
		return err
	}
	if inID == "" || outID == "" {
		log.Warn().Strs("ingest_brokers", cfg.Ingest.Brokers).Strs("sink_brokers", cfg.Sink.Brokers).Str("topic", cfg.Ingest.Topic).
			Msg("the sink writes to a topic named as the input topic, on brokers that give no cluster id: cannot tell whether they are the input's cluster (a loop) or another")
		return nil
	}
	if inID != outID {
		return nil
	}
	var errs []error
	for _, out := range same {
		what := "outputs"
		if out.Key == sink.KeyDeadLetterTopic {
			what = "dead letters"
		}
		errs = append(errs, fmt.Errorf("pipeline: %s: %q is the input topic: sink.brokers %s and ingest.brokers %s reach the same cluster (cluster id %q): %s would be read back as input",
			out.Key, out.Name, strings.Join(cfg.Sink.Brokers, ","), strings.Join(cfg.Ingest.Brokers, ","), inID, what))
	}
	return errors.Join(errs...)
}

// clusterID is the id of the cluster t's brokers belong to, as their metadata gives it ("":
// none given). The topic check reached them a moment before: one attempt.
func clusterID(ctx context.Context, t TopicRef) (string, error) {
	cl, tr, err := t.Client()
	if err != nil {
		return "", err
	}
	defer tr.CloseIdleConnections()
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.Name}})
	if err != nil {
		return "", fmt.Errorf("pipeline: %s: asking %s for their cluster's id (is %q the input topic's cluster?): %w", t.Key, strings.Join(t.Brokers, ","), t.Name, err)
	}
	return md.ClusterID, nil
}
