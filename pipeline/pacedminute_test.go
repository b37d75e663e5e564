package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestPacedLinesPassAMinute: the keys evicted cold (noteColdEvictions) and the keys' models of
// another configuration (keySkips) are logged a line a minute at most while they go on; their
// tests (TestKeysEvictedColdAreLoggedKfake, TestKeyModelsOfAnotherConfigLogOnce) run within a
// minute and saw the first line only. Here a clock of the test's passes the minute without
// sleeping: nothing within it, one line after it counting what came since, nothing when
// nothing more came.
func TestPacedLinesPassAMinute(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	lines := func(buf *testsupport.LogBuffer, of string) []string {
		var out []string
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.Contains(l, of) {
				out = append(out, l)
			}
		}
		return out
	}

	var cold testsupport.LogBuffer
	p := &Pipeline{log: zerolog.New(&cold)}
	p.cfg.Detect.Keys.MaxKeys = 100
	p.paced.now = clock
	const of = "evicted before their own model"
	for _, step := range []struct {
		after     time.Duration
		total     uint64
		wantLines int
		want      string
	}{
		{0, 5, 1, `"evicted_cold":5,"evicted_cold_total":5`},
		{30 * time.Second, 9, 1, ""},
		{59 * time.Second, 12, 1, ""},
		{61 * time.Second, 13, 2, `"evicted_cold":8,"evicted_cold_total":13`},
		{3 * time.Minute, 13, 2, ""}, // (none since)
		{4 * time.Minute, 14, 3, `"evicted_cold":1,"evicted_cold_total":14`},
	} {
		at = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).Add(step.after)
		p.noteColdEvictions(detect.KeyStats{Warming: 100, Evictions: step.total, ColdEvictions: step.total})
		got := lines(&cold, of)
		if len(got) != step.wantLines || step.want != "" && !strings.Contains(got[len(got)-1], step.want) {
			t.Errorf("cold evictions at +%s (%d in all): %d lines, want %d, the last with %s: %q", step.after, step.total, len(got), step.wantLines, step.want, got)
		}
	}

	var skipped testsupport.LogBuffer
	s := &keySkips{log: zerolog.New(&skipped), now: clock}
	mismatch := fmt.Errorf("%w: built for features [b a], the stream has [a b]", detect.ErrSnapshotMismatch)
	const counted = "keys' models on the model topic skipped"
	start := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	for i := range 10 { // the first in full, then counted: 9 within the minute
		at = start.Add(time.Duration(i) * time.Second)
		s.skip(kafka.Message{Offset: int64(i)}, mismatch)
	}
	if n := len(lines(&skipped, "model topic message skipped")); n != 1 {
		t.Errorf("%d lines for 10 skips within a minute, want the first one", n)
	}
	at = start.Add(61 * time.Second)
	s.skip(kafka.Message{Offset: 10}, mismatch)
	if got := lines(&skipped, counted); len(got) != 1 || !strings.Contains(got[0], `"skipped":10,"skipped_total":11`) {
		t.Errorf("a skip past the minute: %q, want one line counting the 9 within it and itself, 11 in all", got)
	}
	at = start.Add(90 * time.Second)
	s.skip(kafka.Message{Offset: 11}, mismatch)
	s.skip(kafka.Message{Offset: 12}, errors.New("not a model")) // (logged each, not counted)
	s.flush()
	if got := lines(&skipped, counted); len(got) != 2 || !strings.Contains(got[1], `"skipped":1,"skipped_total":12`) {
		t.Errorf("the flush: %q, want a second line counting 1, 12 in all", got)
	}
	s.flush()
	if got := lines(&skipped, counted); len(got) != 2 {
		t.Errorf("a flush with nothing counted logged: %q", got)
	}
}
