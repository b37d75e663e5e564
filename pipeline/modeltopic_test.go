package pipeline

import (
	"bytes"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/stages/detect"
)

// testModel builds a small model of the sensor features.
func testModel(t *testing.T, version uint64, rows int) *detect.Model {
	t.Helper()
	cfg := detect.Default()
	cfg.Window, cfg.MinRecords = rows, rows
	cfg.Density.Clusters, cfg.Distance.K, cfg.Distance.N = 20, 10, 10
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims, p.Seed = rows, len(synth.SensorFeatures), version
	d := synth.One(p)
	m, err := detect.Build(d.Cols, d.SD, synth.SensorFeatures, cfg, version)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestModelChunksReassemble: a model split into chunks reassembles to the same snapshot bytes;
// stale chunks of an older, larger model (what compaction keeps), chunks out of sequence, a
// digest that does not match and a message that is no model are skipped with a reason, and a
// publication after them still reassembles.
func TestModelChunksReassemble(t *testing.T) {
	m1, m2 := testModel(t, 1, 1500), testModel(t, 2, 600)
	big, err := modelMessages(m1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	small, err := modelMessages(m2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(big) <= len(small) || len(small) < 2 {
		t.Fatalf("chunks: %d and %d, want the first model in more chunks than the second, both > 1", len(big), len(small))
	}
	for _, x := range big {
		if len(x.Value)+modelChunkOverhead > 4096 {
			t.Fatalf("a chunk of %d bytes exceeds the limit with its overhead", len(x.Value))
		}
	}
	var want bytes.Buffer
	if err := detect.WriteSnapshot(&want, m2); err != nil {
		t.Fatal(err)
	}
	corrupt := append([]kafka.Message(nil), small...)
	corrupt[1].Value = append([]byte("x"), corrupt[1].Value[1:]...)
	// The log a compacted topic can hold, in offset order: the last chunks of model 1 (whose
	// earlier keys model 2 overwrote), a stray message, a corrupt publication, then model 2.
	log := append([]kafka.Message{}, big[len(small):]...)
	log = append(log, kafka.Message{Key: []byte("x"), Value: []byte("y")})
	log = append(log, corrupt...)
	log = append(log, small...)
	var a modelAssembler
	var reasons []string
	var got []byte
	for _, x := range log {
		data, v, err := a.add(x)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		if data != nil {
			if v != 2 || got != nil {
				t.Fatalf("completed version %d (already had one: %v)", v, got != nil)
			}
			got = data
		}
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("reassembled %d bytes, want model 2's %d", len(got), want.Len())
	}
	joined := strings.Join(reasons, "\n")
	for _, w := range []string{"out of sequence", "not a model chunk", "SHA-256"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no skip reason mentions %q:\n%s", w, joined)
		}
	}
	if len(reasons) != len(big)-len(small)+2 {
		t.Errorf("%d messages skipped, want %d (stale chunks, the stray, the corrupt publication):\n%s", len(reasons), len(big)-len(small)+2, joined)
	}
	m, err := decodeModel(got)
	if err != nil || m.Version != 2 {
		t.Fatalf("decoded version %v, %v", m, err)
	}
}

// TestRoleConfig: run.role needs a model topic apart from the stream's topics.
func TestRoleConfig(t *testing.T) {
	c := Default()
	c.Ingest.Brokers, c.Ingest.Topic, c.Ingest.GroupID, c.Ingest.Features = []string{"b:9092"}, "in", "g", []string{"x"}
	c.Sink.Brokers, c.Sink.Topic, c.Sink.DeadLetterTopic = []string{"b:9092"}, "out", "dlq"
	if err := c.Validate(); err != nil {
		t.Fatalf("role all without a model topic: %v", err)
	}
	for _, tc := range []struct{ role, topic, want string }{
		{"scorer", "", "run.model_topic: required with run.role scorer"},
		{"builder", "in", "is also the input"},
		{"leader", "m", "run.role: must be all, builder or scorer"},
	} {
		c.Run.Role, c.Run.ModelTopic = detect.Role(tc.role), tc.topic
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("role %s, model topic %q: %v, want %q", tc.role, tc.topic, err, tc.want)
		}
	}
	c.Run.Role, c.Run.ModelTopic = "scorer", "models"
	if err := c.Validate(); err != nil {
		t.Errorf("scorer with a model topic: %v", err)
	}
	if BuilderGroup("g") != "g.builder" {
		t.Error("builder group")
	}
}
