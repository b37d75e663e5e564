package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// TopicResult is what CreateTopics did with one topic.
type TopicResult struct {
	Key        string `json:"key"`   // the config key naming it: ingest.topic, sink.topic, ...
	Topic      string `json:"topic"` // its name
	Partitions int    `json:"partitions"`
	Created    bool   `json:"created"` // false: it existed (left as it is)
}

// CreateTopics creates the topics cfg names (`outlierd topics create`): ingest.topic with
// inputPartitions, sink.topic and sink.dead_letter_topic with sink.create_partitions (0: as many
// as the input topic), and run.model_topic when set, with one partition and
// cleanup.policy=compact (what the builder and scorers expect, docs/OPERATIONS.md), each with
// sink.create_replication_factor (0: the broker's default). A topic that exists is reported
// and left unchanged, so it is idempotent. Every failure is returned at once (errors.Join),
// beside the results of the topics that worked.
func CreateTopics(ctx context.Context, cfg Config, inputPartitions int, log zerolog.Logger) ([]TopicResult, error) {
	if inputPartitions < 1 || inputPartitions > sink.MaxCreatePartitions {
		return nil, fmt.Errorf("pipeline: input partitions must be in [1, %d], got %d", sink.MaxCreatePartitions, inputPartitions)
	}
	if _, ok := ctx.Value(waitLimitKey{}).(time.Duration); !ok {
		// The caller's deadline (topics create --timeout) is the limit every topic's messages name.
		ctx = context.WithValue(ctx, waitLimitKey{}, waitLimit(ctx))
	}
	rf := cfg.Sink.CreateReplicationFactor
	var out []TopicResult
	var errs []error
	// ensure creates t unless it exists and returns its partition count.
	ensure := func(t TopicRef, parts int, entries []kafka.ConfigEntry) int {
		ids, err := topicPartitions(ctx, t, log, nil)
		if err != nil {
			errs = append(errs, err)
			return 0
		}
		if n := len(ids); n > 0 {
			out = append(out, TopicResult{Key: t.Key, Topic: t.Name, Partitions: n})
			return n
		}
		if err := createTopic(ctx, t, parts, rf, entries, nil); err != nil {
			errs = append(errs, err)
			return 0
		}
		out = append(out, TopicResult{Key: t.Key, Topic: t.Name, Partitions: parts, Created: true})
		return parts
	}
	inParts := ensure(InputTopic(cfg), inputPartitions, nil)
	if inParts == 0 { // (the input could not be checked: its error is in errs)
		inParts = inputPartitions
	}
	outParts := cfg.Sink.CreatePartitions
	if outParts == 0 {
		outParts = inParts // as many as the input topic has, created now or before
	}
	for _, t := range []TopicRef{
		OutputTopic(cfg),
		{sink.KeyDeadLetterTopic, cfg.Sink.DeadLetterTopic, cfg.Sink.Brokers, cfg.Sink.Security},
	} {
		ensure(t, outParts, nil)
	}
	if cfg.Run.ModelTopic != "" {
		mtParts := 1 // the global model's chunks
		if cfg.Detect.KeyBy == detect.KeyByKey {
			mtParts += inParts // and one for each input partition's keys' models (keyfollow.go)
		}
		ensure(TopicRef{"run.model_topic", cfg.Run.ModelTopic, cfg.Sink.Brokers, cfg.Sink.Security}, mtParts,
			[]kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}})
	}
	return out, errors.Join(errs...)
}
