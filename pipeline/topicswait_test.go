package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestTopicWaitNamesItsLimit: `outlierd topics create --timeout 2s` against brokers that cannot
// be reached gave up after its 2 s saying "unreachable for 30s" (and logged
// gives_up_after_s 30 at every attempt): the messages named the pipeline's own start-up wait,
// not the one the caller's deadline set.
func TestTopicWaitNamesItsLimit(t *testing.T) {
	addr := refusingAddr(t)
	cfg := Default()
	cfg.Ingest.Brokers, cfg.Ingest.Topic, cfg.Ingest.Features = []string{addr}, "in", []string{"x"}
	cfg.Sink.Brokers, cfg.Sink.Topic, cfg.Sink.DeadLetterTopic = []string{addr}, "out", "dlq"
	var logs testsupport.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := CreateTopics(ctx, cfg, 1, zerolog.New(&logs))
	if took := time.Since(start); err == nil || took > 10*time.Second {
		t.Fatalf("CreateTopics against %s: %v after %v", addr, err, took)
	}
	if !strings.Contains(err.Error(), "unreachable for 1.5s") || strings.Contains(err.Error(), "30s") {
		t.Errorf("error %q: want \"unreachable for 1.5s\" (the caller's limit), not 30s", err)
	}
	lines := logs.Lines("waiting for the brokers to check the topic")
	if len(lines) == 0 || !strings.Contains(lines[0], `"gives_up_after_s":1.5`) {
		t.Errorf("the retries' log lines say otherwise: %q", lines)
	}
}

// TestCreateTopicsFollowAnExistingInput: `topics create` on an input topic that exists with 2
// partitions creates the outputs with as many (sink.create_partitions 0: "as many as the input
// topic") and, under key_by: key, the model topic with the input's + 1; they took --partitions
// (default 3) instead whenever it was larger: 3 outputs and a model topic of 4.
func TestCreateTopicsFollowAnExistingInput(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	in := testsupport.UniqueName("fi-in")
	testsupport.CreateTopics(t, br, map[string]int{in: 2})
	cfg := roleConfig(br, in, testsupport.UniqueName("fi-out"), testsupport.UniqueName("fi-dlq"), "g", testsupport.UniqueName("fi-models"))
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	res, err := CreateTopics(context.Background(), cfg, 3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"ingest.topic": 2, "sink.topic": 2, "sink.dead_letter_topic": 2, "run.model_topic": 3}
	for _, r := range res {
		if r.Partitions != want[r.Key] {
			t.Errorf("%s %s: %d partitions, want %d (the existing input's 2)", r.Key, r.Topic, r.Partitions, want[r.Key])
		}
	}
}
