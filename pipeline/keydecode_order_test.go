package pipeline

import (
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
