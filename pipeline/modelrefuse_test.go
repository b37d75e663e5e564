package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// TestRefusalLogOncePerMinutePerReason (reread26): the model topic's refusals are logged at
// most once per refusalLogEvery for each reason, with the topic, partition and offset of the
// one logged and the count of those of its reason not logged since (refused_unlogged); another
// reason has its own minute. So a writer flooding the topic with refused messages writes a line
// a minute a reason, and the line after a quiet stretch says how many were passed over.
func TestRefusalLogOncePerMinutePerReason(t *testing.T) {
	var out bytes.Buffer
	log := zerolog.New(&out)
	at := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	l := refusalLog{now: func() time.Time { return at }}
	msg := func(off int64) kafka.Message { return kafka.Message{Topic: "models", Partition: 0, Offset: off} }
	refuse := func(reason string, off int64) bool { return l.say(log, reason, msg(off), errors.New("refused")) }
	type line struct {
		Reason   string `json:"reason"`
		Topic    string `json:"topic"`
		Offset   int64  `json:"offset"`
		Unlogged int    `json:"refused_unlogged"`
	}
	lines := func() []line {
		var ls []line
		dec := json.NewDecoder(&out)
		for dec.More() {
			var x line
			if err := dec.Decode(&x); err != nil {
				t.Fatal(err)
			}
			ls = append(ls, x)
		}
		return ls
	}
	if !refuse(refusedTooLarge, 1) {
		t.Fatal("the first refusal was not logged")
	}
	for off := int64(2); off <= 4; off++ { // within the minute: counted, not logged
		at = at.Add(10 * time.Second)
		if refuse(refusedTooLarge, off) {
			t.Fatalf("refusal at offset %d logged within a minute of the last", off)
		}
	}
	if !refuse(refusedVersionAhead, 5) { // another reason: its own minute
		t.Fatal("the first refusal of another reason was not logged")
	}
	at = at.Add(refusalLogEvery - 30*time.Second) // a minute after the first line
	if !refuse(refusedTooLarge, 6) {
		t.Fatal("a refusal a minute after the last line was not logged")
	}
	if refuse(refusedVersionAhead, 7) { // (30 s after its reason's line)
		t.Fatal("version_ahead logged within a minute of its last line")
	}
	got := lines()
	want := []line{{refusedTooLarge, "models", 1, 0}, {refusedVersionAhead, "models", 5, 0}, {refusedTooLarge, "models", 6, 3}}
	if len(got) != len(want) {
		t.Fatalf("%d lines %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestModelTopicSkipsLoggedOncePerMinute (reread26): a message on the model topic that does not
// fit the protocol (not a model chunk, out of sequence, corrupt: anyone with Write on the topic
// sends them as fast as the brokers take them) was logged a line each, its key whole: a writer
// grew every reader's log as fast as it wrote (1,000 messages of a 64 KB key: 1,000 lines of
// 64 KB). Now the first of each minute is logged, with how many were not since
// (skipped_unlogged) and the key's first 256 bytes; the global model's follower and a key
// partition's reader alike.
func TestModelTopicSkipsLoggedOncePerMinute(t *testing.T) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	key := bytes.Repeat([]byte("k"), 64<<10)
	for _, reader := range []string{"global", "keys"} {
		t.Run(reader, func(t *testing.T) {
			at = time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
			var out bytes.Buffer
			var skip func(kafka.Message, error)
			if reader == "global" {
				f := &modelFollower{log: zerolog.New(&out)}
				f.refusals.now = clock
				skip = f.skip
			} else {
				s := &keySkips{log: zerolog.New(&out), now: clock}
				s.refusals.now = clock
				skip = s.skip
			}
			for off := range int64(1000) {
				at = at.Add(time.Millisecond)
				skip(kafka.Message{Topic: "models", Offset: off, Key: key}, errors.New("not a model chunk"))
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 || len(lines[0]) > 2048 {
				t.Fatalf("1,000 skipped messages of a 64 KB key within a second: %d lines, the first of %d bytes; want one line, not the whole key",
					len(lines), len(lines[0]))
			}
			at = at.Add(time.Minute)
			skip(kafka.Message{Topic: "models", Offset: 1000, Key: []byte("k")}, errors.New("not a model chunk"))
			lines = strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 2 || !strings.Contains(lines[1], `"skipped_unlogged":999`) {
				t.Fatalf("a skip a minute later: %d lines, the last %q; want a second line counting the 999 not logged", len(lines), lines[len(lines)-1])
			}
		})
	}
}
