package pipeline

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

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
	big, err := modelMessages(publication{model: m1}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	small, err := modelMessages(publication{model: m2}, 4096)
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
	// A log a reader can meet, in offset order: the last chunks of model 1 (its start deleted
	// by retention), a stray message, a corrupt publication, then model 2.
	log := append([]kafka.Message{}, big[len(small):]...)
	log = append(log, kafka.Message{Key: []byte("x"), Value: []byte("y")})
	log = append(log, corrupt...)
	log = append(log, small...)
	var a modelAssembler
	var reasons []string
	var got []byte
	for _, x := range log {
		pub, err := a.add(x)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		if pub != nil {
			if pub.version != 2 || got != nil || pub.hypercube != nil {
				t.Fatalf("completed version %d (already had one: %v; hypercube %d bytes)", pub.version, got != nil, len(pub.hypercube))
			}
			got = pub.snapshot
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

// compact is what a compacted topic's log becomes once the cleaner has run over all of it:
// the newest message of each key, in offset order, with tombstoned keys gone.
func compact(log []kafka.Message) []kafka.Message {
	last := map[string]int{}
	for i, m := range log {
		last[string(m.Key)] = i
	}
	var out []kafka.Message
	for i, m := range log {
		if last[string(m.Key)] == i && m.Value != nil {
			out = append(out, m)
		}
	}
	return out
}

// newestIn reads log as a scorer's start-up read does and returns the newest complete version
// (0: none) and the assembler (its highest version and live keys).
func newestIn(t *testing.T, log []kafka.Message) (uint64, *modelAssembler) {
	t.Helper()
	a := &modelAssembler{live: map[string]uint64{}}
	newest := uint64(0)
	for _, m := range log {
		if pub, err := a.add(m); err == nil && pub != nil {
			if _, err := decodeModel(pub.snapshot); err != nil {
				t.Fatalf("version %d does not decode: %v", pub.version, err)
			}
			newest = max(newest, pub.version)
		}
	}
	return newest, a
}

// TestModelTopicCompactionKeepsLastCompleteModel (issue 21, issue 25): a publication cut short
// (a builder killed after chunk 0 of version 2) must not let compaction remove the last
// complete model (version 1): with chunk keys shared by every version, chunk 0 of version 2
// replaced version 1's and a scorer started after compaction found no model. Keys are per
// version, so version 1 survives; once version 3 is published completely, the publisher's
// tombstones for every older key (1, the cut-short 2, and a chunk of the old key format) make
// compaction leave version 3 alone.
func TestModelTopicCompactionKeepsLastCompleteModel(t *testing.T) {
	m1, m2, m3 := testModel(t, 1, 1500), testModel(t, 2, 1500), testModel(t, 3, 1500)
	msgs := func(m *detect.Model) []kafka.Message {
		x, err := modelMessages(publication{model: m}, 4096)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	v1, v2, v3 := msgs(m1), msgs(m2), msgs(m3)
	if len(v1) < 3 {
		t.Fatalf("%d chunks, want several", len(v1))
	}
	legacy := kafka.Message{Key: []byte(modelKeyPrefix + "0"), Value: []byte("a chunk of the old key format"),
		Headers: v1[0].Headers}
	log := append([]kafka.Message{legacy}, v1...)
	log = append(log, v2[0]) // version 2 cut short after its first chunk
	got, a := newestIn(t, compact(log))
	if got != 1 {
		t.Fatalf("after compaction the newest complete model is version %d, want 1 (the cut-short version 2 displaced it)", got)
	}
	if a.highest != 2 {
		t.Errorf("highest version seen %d, want 2 (the cut-short publication counts: its number is never reused)", a.highest)
	}

	// A builder restarts, reads the topic (live keys), publishes version 3, then tombstones.
	p := &modelPublisher{live: map[string]uint64{}}
	p.setLive(a.live)
	log = append(log, v3...)
	for _, x := range v3 {
		p.live[string(x.Key)] = 3
	}
	stones := p.tombstones(3)
	if len(stones) != len(v1)+2 {
		t.Errorf("%d tombstones, want %d (version 1's chunks, version 2's chunk 0, the legacy key)", len(stones), len(v1)+2)
	}
	log = append(log, stones...)
	after := compact(log)
	got, _ = newestIn(t, after)
	if got != 3 || len(after) != len(v3) {
		t.Fatalf("after the tombstones and compaction: newest %d in %d messages, want version 3 alone (%d chunks)", got, len(after), len(v3))
	}
	// A builder reading the log before compaction finds only version 3's keys live.
	if _, a := newestIn(t, log); len(a.live) != len(v3) {
		t.Errorf("%d live keys before compaction, want version 3's %d (tombstones passed over)", len(a.live), len(v3))
	}
}

// TestModelVersionFloor: a builder's first version is above the topic's highest, its own
// snapshot's and the clock in ms, so that versions grow across restarts with or without
// state_dir and after the topic was emptied.
func TestModelVersionFloor(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct{ topic, own, want uint64 }{
		{0, 0, 1_800_000_000_000},                 // an empty topic, no state: the clock
		{4, 1, 1_800_000_000_000},                 // a standby with v1 in state_dir, the topic at v4
		{1_800_000_000_123, 0, 1_800_000_000_123}, // the topic ahead of the clock (many models in one ms)
		{7, 1_800_000_000_999, 1_800_000_000_999}, // the snapshot ahead (topic emptied)
	} {
		if got := modelVersionFloor(tc.topic, tc.own, now); got != tc.want {
			t.Errorf("topic %d, own %d: floor %d, want %d", tc.topic, tc.own, got, tc.want)
		}
	}
}

// TestModelChunkLimit (issue 25 item 1): sink.max_message_bytes 1024 left a chunk of 0 bytes
// and the builder divided by zero on its first publication. Lint refuses, with the key's line
// and column, every value that leaves less than minModelChunk with a model topic (role all
// keeps 1024: it has no model topic), and the smallest value it accepts publishes and
// reassembles a model.
func TestModelChunkLimit(t *testing.T) {
	yaml := func(role string, maxBytes int) string {
		return fmt.Sprintf(`ingest:
  brokers: [b:9092]
  topic: in
  group_id: g
  features: [x, y, z]
sink:
  brokers: [b:9092]
  topic: out
  dead_letter_topic: dlq
  max_message_bytes: %d
run:
  role: %s
  model_topic: models
`, maxBytes, role)
	}
	for _, role := range []string{"builder", "scorer"} {
		for _, b := range []int{1024, 1500, minModelChunk + modelChunkOverhead - 1} {
			_, err := LoadConfigBytes("roles.yaml", []byte(yaml(role, b)))
			if err == nil || !strings.Contains(err.Error(), "roles.yaml:10:") || !strings.Contains(err.Error(), "sink.max_message_bytes") ||
				!strings.Contains(err.Error(), "model chunk") {
				t.Errorf("role %s, max_message_bytes %d: %v, want an error at roles.yaml:10 naming sink.max_message_bytes", role, b, err)
			}
		}
		if _, err := LoadConfigBytes("roles.yaml", []byte(yaml(role, minModelChunk+modelChunkOverhead))); err != nil {
			t.Errorf("role %s at the smallest limit: %v", role, err)
		}
	}
	if _, err := LoadConfigBytes("roles.yaml", []byte(strings.Replace(yaml("all", 1024), "  model_topic: models\n", "", 1))); err != nil {
		t.Errorf("role all with max_message_bytes 1024: %v", err)
	}
	m := testModel(t, 1, 600)
	limit := minModelChunk + modelChunkOverhead
	msgs, err := modelMessages(publication{model: m, hypercube: []byte{1, 2, 3}}, limit)
	if err != nil {
		t.Fatal(err)
	}
	var a modelAssembler
	var pub *assembled
	for _, x := range msgs {
		if len(x.Value) > minModelChunk {
			t.Fatalf("a chunk of %d bytes at max_message_bytes %d", len(x.Value), limit)
		}
		if pub, err = a.add(x); err != nil {
			t.Fatal(err)
		}
	}
	if pub == nil || !bytes.Equal(pub.hypercube, []byte{1, 2, 3}) {
		t.Fatalf("publication of %d chunks reassembled to %+v", len(msgs), pub)
	}
	if _, err := modelMessages(publication{model: m}, 1024); err == nil {
		t.Error("modelMessages at 1024 (no room for a chunk): no error")
	}
}
