package pipeline

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// A builder's graceful stop publishes what it built (docs/OPERATIONS.md "Shutdown"): its
// publishers ended with work, at Run's end, so a model still being written when the drain ended
// was cut short and the keys' models held back by run.key_publish_interval were dropped; the
// scorers kept older models until the restarted builder's next build. Both tests failed before
// the fix.

// TestBuilderStopPublishesLastModelRealBroker: a builder stopped right after its build (the stop
// comes as the model is handed to the publisher) leaves that model complete on the model topic.
// Chunks of 1 KiB (sink.max_message_bytes 2048) make the publication ~130 writes: it was cut
// short by the end of the drain, which takes a few ms.
func TestBuilderStopPublishesLastModelRealBroker(t *testing.T) {
	br, mt, cfg, r, v := builderWithAModel(t, nil)
	t0 := time.Now()
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("builder stop: %v", err)
	}
	stopped := time.Since(t0)
	wantPublished(t, cfg, v, "the builder's graceful stop")
	chunks := 0
	for _, msg := range modelTopicMessages(t, br, mt) {
		if bytes.HasPrefix(msg.Key, []byte(modelKeyPrefix)) {
			chunks++
		}
	}
	t.Logf("model %d published in %d chunks; the stop took %v", v, chunks, stopped.Round(time.Millisecond))
}

// TestBuilderStopPublishesHeldKeyModelsRealBroker: with detect.key_by: key and a
// key_publish_interval of an hour, the keys rebuilt after their first publication wait for
// the interval; a graceful stop publishes them: each key's newest message on the model topic
// is the model the builder held for it at the stop.
func TestBuilderStopPublishesHeldKeyModelsRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	const parts = 2
	in, out, dlq, group, _ := roleTopics(t, br, parts)
	mt := testsupport.UniqueName("rf-kmodels") // a partition per input partition, and 0
	createCompactedTopic(t, br, mt, parts+1)
	cfg := roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = detect.RoleBuilder
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Run.KeyPublishInterval = time.Hour
	recs := keyedRecords(t, 24_000, parts, 83)
	input := newInput(in, parts, recs)
	produceSome(t, br, input, recs[:12000])
	var pub *keyPublisher
	r := startPipeline(t, cfg, func(p *Pipeline) { pub = p.keyPub })
	waitFor(t, 60*time.Second, "the builder publishing the first models of all 64 keys", func() bool {
		return len(keyModelsOnTopic(t, br, cfg)) == 64
	})
	produceSome(t, br, input, recs[12000:])
	waitCommittedBelow(t, br, BuilderGroup(group), input, len(recs), 60*time.Second)
	// Every batch is done (committed), so every rebuilt key's model is pending (added after
	// its batch's pass, before its ack) and stays so: the interval holds it back.
	pub.mu.Lock()
	held := map[string]*detect.Ranker{}
	for k, m := range pub.pending {
		held[k] = m.Model
	}
	pub.mu.Unlock()
	if len(held) == 0 {
		t.Fatal("no key's model held back by key_publish_interval: the test shows nothing")
	}
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("builder stop: %v", err)
	}
	newest := map[string][]byte{}
	for _, m := range modelTopicMessages(t, br, mt) {
		if isKeyModel(m) {
			newest[string(m.Key[len(keyModelPrefix):])] = m.Value
		}
	}
	stale := 0
	for k, model := range held {
		got := newest[k]
		_, v, _, err := detect.DecodeKeyModel(got, cfg.Ingest.Columns(), &cfg.Detect)
		if err != nil {
			t.Fatalf("key %q: its newest message: %v", k, err)
		}
		want, err := detect.EncodeKeyModel(cfg.Ingest.Columns(), &cfg.Detect, k, v, model)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			stale++
		}
	}
	if stale > 0 {
		t.Fatalf("%d of the %d keys' models held back at the stop are not on the model topic (their older models are)", stale, len(held))
	}
	t.Logf("%d keys' models held back at the stop, all published by it", len(held))
}

// TestPublishersFlushEndAtHardStop: the flush at a graceful stop is bounded by the hard stop
// (work's end): publishers whose brokers cannot be reached, told to flush, return when ctx ends.
func TestPublishersFlushEndAtHardStop(t *testing.T) {
	cfg := modelTopicConfig{brokers: []string{"127.0.0.1:1"}, topic: "models", maxMessageBytes: 1_000_000}
	log := zerolog.New(zerolog.NewTestWriter(t))
	mp, err := newModelPublisher(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	kp, err := newKeyPublisher(cfg, []string{"a"}, detect.Config{}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer kp.Close()
	mp.Publish(publication{model: testModel(t, 5, 50)})
	kp.add([]detect.KeyModel{{Key: "gone"}}) // a tombstone: nothing to encode
	drain := make(chan struct{})
	close(drain)
	for name, run := range map[string]func(context.Context){"model": func(ctx context.Context) { mp.run(ctx, drain) },
		"keys": func(ctx context.Context) { kp.run(ctx, drain) }} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		done := make(chan struct{})
		go func() { defer close(done); run(ctx) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s publisher: the flush did not end with ctx", name)
		}
		if d := time.Since(t0); d > 5*time.Second || d < 400*time.Millisecond {
			t.Errorf("%s publisher: the flush ended %v after its start, want at ctx's end, 500 ms (it retries until then)", name, d)
		}
	}
}

// TestBuilderFailedFinalCommitStillPublishesRealBroker: a builder's graceful stop whose final
// commit fails (here every commit is refused) published nothing of what it had queued: the
// failure ended the publishers with the rest of the work. The model was built from records the
// builder processed; the next owner reads those records again (at least once) and builds from
// them too, but until then the scorers would serve an older model: the stop publishes it all
// the same (docs/OPERATIONS.md "Shutdown"), and Run still returns the commit's failure.
func TestBuilderFailedFinalCommitStillPublishesRealBroker(t *testing.T) {
	_, _, cfg, r, v := builderWithAModel(t, func(p *Pipeline) { p.src = refusingCommits{p.src} })
	err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "final commit") {
		t.Fatalf("builder stop: %v, want the final commit's failure", err)
	}
	wantPublished(t, cfg, v, "the builder's stop with a failed final commit")
}

// builderWithAModel starts a builder (hook applied to its pipeline first, when not nil) on 3,000
// records of 2 partitions with 1 KiB model chunks (sink.max_message_bytes 2048: ~130 writes, still
// being written at a stop right after the build) and returns once its first model is built,
// with that model's version.
func builderWithAModel(t *testing.T, hook func(*Pipeline)) (br testsupport.Broker, modelTopic string, cfg Config, r *running, version uint64) {
	t.Helper()
	br = testsupport.RealBroker(t)
	in, out, dlq, group, mt := roleTopics(t, br, 2)
	cfg = roleConfig(br, in, out, dlq, group, mt)
	cfg.Run.Role = detect.RoleBuilder
	cfg.Sink.MaxMessageBytes = 2048
	produceSensors(t, br, newInput(in, 2, makeSensorRecords(t, 3000, 2, 7, 0.01, 0)))
	built := make(chan uint64, 1)
	r = startPipeline(t, cfg, func(p *Pipeline) {
		if hook != nil {
			hook(p)
		}
		p.watchModels = func(m *detect.Model) {
			select {
			case built <- m.Version:
			default:
			}
		}
	})
	select {
	case version = <-built:
	case <-time.After(60 * time.Second):
		t.Fatal("no model built within 60 s")
	}
	return br, mt, cfg, r, version
}

// wantPublished fails the test unless, after (what happened), the newest complete model on cfg's
// model topic is version v, built before the stop.
func wantPublished(t *testing.T, cfg Config, v uint64, after string) {
	t.Helper()
	m := publishedModel(t, cfg)
	switch {
	case m == nil:
		t.Fatalf("after %s the model topic holds no complete model; want version %d, built before the stop", after, v)
	case m.Version != v:
		t.Fatalf("after %s the newest complete model is version %d, want %d", after, m.Version, v)
	}
}

// refusingCommits is a source whose commits all fail.
type refusingCommits struct{ Source }

func (refusingCommits) Commit(context.Context) (map[int]int64, error) {
	return nil, errors.New("commit refused by the coordinator (test)")
}
