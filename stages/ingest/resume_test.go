package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestResumeFrom: where a partition starts with a restored window (resume.go). A committed
// offset decides, older or newer than the window; a partition with none starts after the
// window's newest record of it, logged once (both offsets named); a partition the window does
// not hold, or a window of another topic, starts where start_offset says; latest is left as it
// is; the wait for Set ends with the context.
func TestResumeFrom(t *testing.T) {
	var logs testsupport.LogBuffer
	s := &Source{cfg: Config{Topic: "in", GroupID: "g.builder", StartOffset: StartEarliest}, log: zerolog.New(&logs)}
	r := NewResume()
	WithResume(r)(s)
	if s.resume != r {
		t.Fatal("WithResume under earliest: not taken")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, ok := r.from(ctx, 0, kafka.FirstOffset); ok {
		t.Error("from before Set returned, want it to wait until its context ended")
	}
	r.Set("in", map[int32]int64{0: 1499, 1: 7})
	r.Set("in", nil) // (ignored)
	for _, c := range []struct {
		part      int
		off, want int64
	}{
		{0, kafka.FirstOffset, 1500},              // none committed: after the window's newest
		{0, kafka.FirstOffset, 1500},              // (logged once)
		{0, 20, 20},                               // committed, older than the window: the commit's
		{1, 3000, 3000},                           // committed, newer
		{2, kafka.FirstOffset, kafka.FirstOffset}, // not in the window
	} {
		if got, ok := r.from(context.Background(), c.part, c.off); !ok || got != c.want {
			t.Errorf("partition %d from %d: %d (ok %v), want %d", c.part, c.off, got, ok, c.want)
		}
	}
	lines := logs.Lines("starts after the restored window")
	if len(lines) != 1 || !strings.Contains(lines[0], `"partition":0`) || !strings.Contains(lines[0], `"window_newest_offset":1499`) ||
		!strings.Contains(lines[0], `"from_offset":1500`) || !strings.Contains(lines[0], `g.builder`) {
		t.Errorf("log lines %q, want one naming partition 0, the group, offsets 1499 and 1500", lines)
	}

	other := NewResume()
	WithResume(other)(&Source{cfg: Config{Topic: "in2", StartOffset: StartEarliest}})
	other.Set("in", map[int32]int64{0: 1499})
	if got, _ := other.from(context.Background(), 0, kafka.FirstOffset); got != kafka.FirstOffset {
		t.Errorf("a window of topic in, the source's in2: from %d, want %d (start_offset's)", got, kafka.FirstOffset)
	}
	latest := &Source{cfg: Config{Topic: "in", StartOffset: StartLatest}}
	WithResume(NewResume())(latest)
	if latest.resume != nil {
		t.Error("WithResume under latest: taken, want start_offset latest as it is (the end)")
	}
}

// TestResumeWarnsOfAPartitionTheWindowLacks (catchup31's leftover 1, BENCHMARKS §12.87): a
// partition without a committed offset that the restored window does not hold (another member's
// under role all, or one whose records all fell out of the window) started at its first
// retained record with nothing said. It still does (the window file keeps no offset of it), and
// now warns once a partition; nothing restored (a first start) or a window of another topic says
// nothing.
func TestResumeWarnsOfAPartitionTheWindowLacks(t *testing.T) {
	var logs testsupport.LogBuffer
	s := &Source{cfg: Config{Topic: "in", GroupID: "g.builder", StartOffset: StartEarliest}, log: zerolog.New(&logs)}
	r := NewResume()
	WithResume(r)(s)
	r.Set("in", map[int32]int64{0: 1499})
	for range 2 {
		for p, want := range []int64{1500, kafka.FirstOffset} {
			if got, ok := r.from(context.Background(), p, kafka.FirstOffset); !ok || got != want {
				t.Errorf("partition %d: from %d (ok %v), want %d", p, got, ok, want)
			}
		}
	}
	if got, _ := r.from(context.Background(), 2, 40); got != 40 { // (committed: not warned)
		t.Errorf("partition 2 committed at 40: from %d, want 40", got)
	}
	lines := logs.Lines("not in the restored window")
	if len(lines) != 1 || !strings.Contains(lines[0], `"partition":1`) || !strings.Contains(lines[0], `"level":"warn"`) ||
		!strings.Contains(lines[0], `g.builder`) || !strings.Contains(lines[0], "first retained record") {
		t.Errorf("warnings %q, want one, of partition 1, naming the group and where it is read from", lines)
	}

	for _, c := range []struct {
		name   string
		topic  string
		newest map[int32]int64
	}{{"nothing restored", "", nil}, {"a window of another topic", "in2", map[int32]int64{0: 9}}} {
		var logs testsupport.LogBuffer
		r := NewResume()
		WithResume(r)(&Source{cfg: Config{Topic: "in", StartOffset: StartEarliest}, log: zerolog.New(&logs)})
		r.Set(c.topic, c.newest)
		if got, _ := r.from(context.Background(), 1, kafka.FirstOffset); got != kafka.FirstOffset {
			t.Errorf("%s: from %d, want %d", c.name, got, kafka.FirstOffset)
		}
		if l := logs.Lines("not in the restored window"); len(l) != 0 {
			t.Errorf("%s: warned %q, want nothing", c.name, l)
		}
	}
}
