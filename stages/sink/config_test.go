package sink

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/core/config"
)

// TestConfigYAML loads a sink section through the strict loader: yaml tags, durations, defaults
// for omitted keys, unknown keys and Validate errors with the file name.
func TestConfigYAML(t *testing.T) {
	t.Setenv("OUTLIERD_TEST_BROKERS", "kafka-1:9092")
	cfg := Default()
	err := config.LoadBytes("sink.yaml", []byte(`
brokers: ["${OUTLIERD_TEST_BROKERS}", "kafka-2:9092"]
topic: outliers
dead_letter_topic: outliers.dlq
format: arrow
batch_timeout: 5ms
compression: zstd
`), &cfg)
	if err != nil {
		t.Fatalf("LoadBytes: %v", err)
	}
	want := Default()
	want.Brokers = []string{"kafka-1:9092", "kafka-2:9092"}
	want.Topic, want.DeadLetterTopic, want.Format = "outliers", "outliers.dlq", FormatArrow
	want.BatchTimeout, want.Compression = 5*time.Millisecond, "zstd"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}

	cfg = Default()
	err = config.LoadBytes("sink.yaml", []byte("brokers: [\"k:9092\"]\ntopic: out\ndead_letter_topic: dlq\nrequired_ack: 1\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "sink.yaml:4:1: unknown key `required_ack` at the top level; did you mean `required_acks`?") {
		t.Errorf("got %v, want the misspelt key at 4:1", err)
	}
	cfg = Default()
	err = config.LoadBytes("sink.yaml", []byte("brokers: [\"k:9092\"]\ntopic: out\ndead_letter_topic: dlq\nrequired_acks: \"1\"\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "sink.yaml: sink.required_acks") {
		t.Errorf("got %v, want the Validate error prefixed with the file", err)
	}
}
