package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/stages/sink"
)

// topicsOutput is the JSON contract of `outlierd topics create --json`.
type topicsOutput struct {
	Brokers []string               `json:"brokers"`
	Topics  []pipeline.TopicResult `json:"topics"`
}

// runTopics is `outlierd topics create`: the topics of a pipeline config, created where missing.
func runTopics(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			return runTopicsCreate(args, stdout, stderr)
		}
		what := "no subcommand"
		if len(args) > 0 {
			what = fmt.Sprintf("unknown subcommand %q", args[0])
		}
		return usageError{fmt.Errorf("%s: the one subcommand is create (outlierd topics create --config FILE)", what)}
	}
	return runTopicsCreate(args[1:], stdout, stderr)
}

func runTopicsCreate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("topics", stdout, stderr)
	path := fs.String("config", "", "pipeline YAML file (required): its brokers, topics and sink.create_* settings")
	parts := fs.Int("partitions", 3, "partitions of the input topic (ingest.topic) when it is created, at most 1000000; the scorers of a group split them")
	wait := fs.Duration("timeout", 30*time.Second, "how long to wait for brokers that cannot be reached")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{fmt.Errorf("--config is required")}
	}
	if *parts < 1 || *parts > sink.MaxCreatePartitions {
		return usageError{fmt.Errorf("--partitions must be in [1, %d], got %d", sink.MaxCreatePartitions, *parts)}
	}
	if *wait <= 0 {
		return usageError{fmt.Errorf("--timeout must be positive (how long to wait for brokers that cannot be reached), got %s", *wait)}
	}
	cfg, err := pipeline.LoadConfig(*path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	res, err := pipeline.CreateTopics(ctx, cfg, *parts, newLogger(stderr))
	if *asJSON {
		if jerr := json.NewEncoder(stdout).Encode(topicsOutput{Brokers: cfg.Ingest.Brokers, Topics: res}); jerr != nil {
			return jerr
		}
	} else {
		for _, t := range res {
			fmt.Fprintln(stdout, topicLine(t))
		}
	}
	return err
}

// topicLine is one topic's line of `topics create`: "created  sensors  ingest.topic (3 partitions)".
func topicLine(t pipeline.TopicResult) string {
	state := "exists"
	if t.Created {
		state = "created"
	}
	unit := "partitions"
	if t.Partitions == 1 {
		unit = "partition"
	}
	return fmt.Sprintf("%-8s %-26s %s (%d %s)", state, t.Topic, t.Key, t.Partitions, unit)
}
