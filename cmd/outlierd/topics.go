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
// create's flags may stand on either side of it (topics --partitions 3 create --config FILE):
// create is the one subcommand and these flags are its own, so either place means the same,
// and a user who writes them first, as git's global flags are, is not refused for it.
func runTopics(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("topics", stdout, stderr)
	path := fs.String("config", "", "pipeline YAML file (required): its brokers, topics and sink.create_* settings")
	parts := fs.Int("partitions", 3, "partitions of the input topic (ingest.topic) when it is created, at most 1000000; the scorers of a group split them")
	wait := fs.Duration("timeout", 30*time.Second, "how long to wait for brokers that cannot be reached")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil { // the flags before create
		return err
	}
	if fs.NArg() == 0 || fs.Arg(0) != "create" {
		what := "no subcommand"
		if fs.NArg() > 0 {
			what = fmt.Sprintf("unknown subcommand %q", fs.Arg(0))
		}
		return usageError{fmt.Errorf("%s: the one subcommand is create (outlierd topics create --config FILE)", what)}
	}
	if err := parseFlags(fs, fs.Args()[1:]); err != nil { // and after it
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
