package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestKeyDecodersKeepAKeysOrder: a follower's parallel decoders hand a key's messages to the
// inbox in the partition's order, so a key evicted at the builder (its model, then a tombstone
// of a newer version, the log before compaction) stays dropped at the scorer however the detect
// goroutine's takes fall between them. The delay stands in for a model's decode (a tombstone
// is not decoded). Before: the tombstone, put first, was taken while the key was not held (a
// no-op that the inbox then forgot), and the older model decoded after it was installed: an
// evicted key's stale model served (version 1 held).
func TestKeyDecodersKeepAKeysOrder(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	cfg := roleConfig(br, "in", "out", "dlq", "g", "models")
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	enc, err := detect.EncodeKeyModel(cfg.Ingest.Columns(), &cfg.Detect, "k", 1, warmKeyModel(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(v uint64, value []byte) kafka.Message {
		return kafka.Message{Key: []byte(keyModelPrefix + "k"), Value: value, Headers: []kafka.Header{
			{Key: headerKeyModelVersion, Value: []byte(strconv.FormatUint(v, 10))}, {Key: headerKeyPartition, Value: []byte("0")}}}
	}
	scorer, err := detect.NewStage(cfg.Detect, cfg.Ingest.Columns(), cfg.Ingest.Uncertainty != nil, detect.Deps{Log: zerolog.Nop(), Role: detect.RoleScorer})
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	p := &Pipeline{cfg: cfg, keys: newKeyInbox()}
	read := p.keyReader(func(int32) bool { return true }, zerolog.Nop())
	dec := newDecoders(func(m kafka.Message) {
		if m.Value != nil {
			time.Sleep(200 * time.Millisecond)
		}
		read(m)
	}, 2)
	defer dec.close()
	dec.do(msg(1, enc))
	dec.do(msg(2, nil))
	decoded := make(chan struct{})
	go func() {
		dec.wait()
		close(decoded)
	}()
	for done := false; !done; { // the detect goroutine: installs whatever is ready
		select {
		case <-p.keys.ready:
		case <-decoded:
			done = true
		}
		scorer.InstallKeyModels(p.keys.take(func(int32) bool { return true }))
	}
	if v, ok := scorer.KeyVersions()["k"]; ok {
		t.Fatalf("key k held at version %d after its model of version 1 and its tombstone of version 2: want it dropped", v)
	}
}

// TestKeyEvictedAfterMoveTombstonedAtOldPlace: a key whose records moved to another input
// partition and which the builder evicts before publishing a model at the new place gets a
// tombstone at its old place too, so the last message of the key there is a tombstone: the
// old place's model is not restored by its partition's scorers, nor installed by a scorer of
// both partitions after the new place's tombstone (the inbox keeps no version of a key it does
// not hold). Before: the eviction's tombstone went to the new place only, and the model of
// version 1 stayed the key's last message at the old place.
func TestKeyEvictedAfterMoveTombstonedAtOldPlace(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	mt := testsupport.UniqueName("ke-models")
	createCompactedTopic(t, br, mt, 7)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	kp := publishKeyModels(t, cfg, map[string]int32{"k": 1}, warmKeyModel(t, cfg), 1)
	kp.version = 2
	if _, err := kp.publish(context.Background(), map[string]detect.KeyModel{"k": {Key: "k", Partition: 4}}); err != nil {
		t.Fatal(err)
	}
	old := modelPartitionMessages(t, br, mt, keyModelPartition(1, 7))
	if last := old[len(old)-1]; last.Value != nil || keyModelVersion(last) != 2 {
		t.Fatalf("old place (model partition %d): the key's last message is version %d of %d bytes, want a tombstone of version 2", keyModelPartition(1, 7), keyModelVersion(last), len(last.Value))
	}
	if _, ok := kp.placed["k"]; ok {
		t.Fatalf("the evicted key still placed at %d", kp.placed["k"])
	}
}

// TestKeyModelTooLargeCountedOnce: a publication that fails is written again with the next one;
// its keys' models too large for max_message_bytes are counted once, when a publication is
// written (outlierd_key_models_too_large_total counts keys' models, not attempts). Before: 2
// after a failed publication and its retry.
func TestKeyModelTooLargeCountedOnce(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	mt := testsupport.UniqueName("kc-models")
	createCompactedTopic(t, br, mt, 2)
	cfg := roleConfig(br, "in", "out", "dlq", "g", mt)
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	cfg.Sink.MaxMessageBytes = 2000 // (a key's model here is larger)
	kp := publishKeyModels(t, cfg, map[string]int32{}, nil, 1)
	heard := 0
	kp.onTooLarge = func(n int) { heard += n }
	todo := map[string]detect.KeyModel{"k": {Key: "k", Partition: 0, Model: warmKeyModel(t, cfg)}}
	failed, cancel := context.WithCancel(context.Background())
	cancel() // the write fails: as run does, the keys go again with the next publication
	if _, err := kp.publish(failed, todo); err == nil {
		t.Fatal("a publication with its context cancelled succeeded")
	}
	if _, err := kp.publish(context.Background(), todo); err != nil {
		t.Fatal(err)
	}
	if n := kp.tooLarge.Load(); n != 1 || heard != 1 {
		t.Fatalf("%d keys' models counted too large (%d told), want 1: one key's, published once", n, heard)
	}
}
