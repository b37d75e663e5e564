package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestSinkTopicOnAnotherCluster: sink.topic (or sink.dead_letter_topic) named as ingest.topic
// was refused whatever the sink's brokers: a sink that writes to another cluster (a mirror's
// topic of the same name: the usual way to carry a stream's results to another site) is no
// loop. The config refuses the name only on the input's brokers (sink.brokers left out, or
// sharing one with ingest.brokers: the same cluster as far as the file tells); other brokers are
// accepted, and the start, which reaches both, refuses them when they answer with the input's
// cluster id (two bootstrap lists of one cluster).
func TestSinkTopicOnAnotherCluster(t *testing.T) {
	base := "ingest:\n  brokers: [\"kafka-a:9092\"]\n  topic: in\n  group_id: g\n  features: [a, b]\nsink:\n"
	for _, tc := range []struct {
		name, sink, want string // want "": accepted
	}{
		{"another cluster's brokers", "  brokers: [\"kafka-b:9092\"]\n  topic: in\n  dead_letter_topic: dl\n", ""},
		{"dead letters to another cluster's topic of the input's name", "  brokers: [\"kafka-b:9092\"]\n  topic: out\n  dead_letter_topic: in\n", ""},
		{"the input's brokers, left out", "  topic: in\n  dead_letter_topic: dl\n", `sink.topic: "in" is the input topic`},
		{"one broker shared (its host in capitals)", "  brokers: [\"kafka-b:9092\", \"KAFKA-A:9092\"]\n  topic: in\n  dead_letter_topic: dl\n", `sink.topic: "in" is the input topic`},
	} {
		_, err := LoadConfigBytes("c.yaml", []byte(base+tc.sink))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	// At the start: one cluster reached by two bootstrap lists is refused, naming its id; two
	// clusters are not.
	one, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.ClusterID("cluster-one"), kfake.SeedTopics(1, "in", "dl"))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	other, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("cluster-other"), kfake.SeedTopics(1, "in", "dl"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cfg := wideConfig(testsupport.Broker{Addrs: one.ListenAddrs()[:1]}, "in", "in", "dl", "g")
	cfg.Sink.Brokers = one.ListenAddrs()[1:]
	if err := cfg.Validate(); err != nil {
		t.Fatalf("two bootstrap lists without a shared broker refused by the config: %v", err)
	}
	err = checkTopics(context.Background(), cfg, zerolog.Nop(), nil)
	if err == nil || !strings.Contains(err.Error(), `sink.topic: "in" is the input topic`) || !strings.Contains(err.Error(), "cluster-one") {
		t.Errorf("sink.topic the input topic on the input's cluster through other brokers: %v, want it refused naming the cluster id cluster-one", err)
	}
	cfg.Sink.Brokers = other.ListenAddrs()
	if err := checkTopics(context.Background(), cfg, zerolog.Nop(), nil); err != nil {
		t.Errorf("sink.topic the input topic's name on another cluster: %v, want accepted", err)
	}
}
