package pipeline

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestKeyModelsOfAnotherConfigLogOnce: after ingest.features changes (a feature added, removed
// or reordered), the model topic holds every key's model built for the old features until the
// builder publishes the key again, and a key that never comes back (a sensor renamed, retired)
// keeps its old model there for good. A scorer skips each of them, rightly (never scored against
// the wrong columns), but logged a warning per message: 5,000 keys, 5,000 lines at each
// scorer's start, and during a rollout (the builder already on the new features) a line per key
// per publication, thousands a second for a large fleet. Now the first such skip of a reader is
// logged in full (the features it was built for and the stream's) and the others are counted
// into one line a minute at most; a message that does not decode at all (corrupt, another
// format) is logged the first of each minute with the others' count (reread26: a line each let
// a writer to the topic grow the log as fast as it wrote, TestModelTopicSkipsLoggedOncePerMinute),
// and none of them reaches the inbox. The end of a restore logs the count.
func TestKeyModelsOfAnotherConfigLogOnce(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	cfg := roleConfig(br, "in", "out", "dlq", "g", "models")
	cfg.Detect.FlagBy, cfg.Detect.KeyBy = detect.FlagBySignificance, detect.KeyByKey
	old := cfg
	old.Ingest.Features = slices.Clone(cfg.Ingest.Features)
	slices.Reverse(old.Ingest.Features)
	model := warmKeyModel(t, old)
	var buf bytes.Buffer
	p := &Pipeline{cfg: cfg, keys: newKeyInbox()}
	read, skips := p.keyReaderSkips(func(int32) bool { return true }, zerolog.New(&buf))
	const keys = 5000
	for i := range keys {
		k := "sensor-" + strconv.Itoa(i)
		enc, err := detect.EncodeKeyModel(old.Ingest.Columns(), &old.Detect, k, 1, model)
		if err != nil {
			t.Fatal(err)
		}
		read(kafka.Message{Key: []byte(keyModelPrefix + k), Value: enc, Offset: int64(i), Headers: []kafka.Header{
			{Key: headerKeyModelVersion, Value: []byte("1")}, {Key: headerKeyPartition, Value: []byte("0")}}})
	}
	for i := range 2 { // corrupt
		read(kafka.Message{Key: []byte(keyModelPrefix + "bad"), Value: []byte("not a model"), Offset: int64(keys + i), Headers: []kafka.Header{
			{Key: headerKeyModelVersion, Value: []byte("2")}, {Key: headerKeyPartition, Value: []byte("0")}}})
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var mismatch, corrupt int
	for _, l := range lines {
		switch {
		case strings.Contains(l, "snapshot does not fit the configuration"):
			mismatch++
			if !strings.Contains(l, strings.Join(old.Ingest.Columns(), " ")) || !strings.Contains(l, strings.Join(cfg.Ingest.Columns(), " ")) {
				t.Errorf("the skip's line does not name the old and new features: %s", l)
			}
		case strings.Contains(l, "model topic message skipped"):
			corrupt++
		}
	}
	if mismatch != 1 || corrupt != 1 {
		t.Errorf("%d lines for %d keys' models of other features (want 1), %d for 2 corrupt messages within a minute (want 1); %d lines in all, the first: %s",
			mismatch, keys, corrupt, len(lines), lines[0])
	}
	// The end of a restore (keyFollowers.follow) logs the count not logged yet: one line.
	buf.Reset()
	skips.flush()
	if l := buf.String(); strings.Count(l, "\n") != 1 || !strings.Contains(l, `"skipped":4999,"skipped_total":5000`) {
		t.Errorf("the flush after the restore logged %q, want one line counting 4999 of 5000", l)
	}
	if got := p.keys.take(func(int32) bool { return true }); len(got) != 0 {
		t.Errorf("%d skipped models reached the inbox", len(got))
	}
}
