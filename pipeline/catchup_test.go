package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
)

// TestBuilderFirstStartReadsAfterTheWindow (newuser31's split of a role-all deployment, BENCHMARKS
// §12.87): a role-all run with detect.state_dir reads the topic and stops (its window saved);
// more records arrive; a builder starts on that state_dir. Its group (GROUP.builder) has no
// committed offsets, and under ingest.start_offset earliest it read every partition from offset
// 0 into the window it had restored (the 3,000 records already read, then the 600 new ones),
// publishing models of the old records meanwhile. Now a partition without a committed offset
// starts after the restored window's newest record of it: the builder reads exactly the 600
// records the window has not seen (none is left unread: its group's offsets reach the end), and
// says so once per partition, naming both offsets.
func TestBuilderFirstStartReadsAfterTheWindow(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		const parts, n1, n2 = 2, 3000, 600
		in, out, dlq, group, mt := roleTopics(t, br, parts)
		recs := makeSensorRecords(t, n1+n2, parts, 87, 0.005, 0)
		input := newInput(in, parts, recs)
		cl := testsupport.NewProducer(t, br)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := produceRecords(ctx, cl, input, recs[:n1]); err != nil {
			t.Fatal(err)
		}
		cfg := roleConfig(br, in, out, dlq, group, mt)
		cfg.Detect.StateDir = t.TempDir()
		// Role all: its window (2,000 records, the newest of each partition 1499) saved at the stop.
		runUntilOut(t, cfg, n1)
		if err := produceRecords(ctx, cl, input, recs[n1:]); err != nil { // (arrived after the stop)
			t.Fatal(err)
		}
		end := slices.Clone(input.end)

		var logs testsupport.LogBuffer
		log := zerolog.New(zerolog.MultiLevelWriter(&logs, zerolog.NewTestWriter(t))).With().Timestamp().Logger()
		p := startBuilderUntil(t, br, cfg, log, in, parts, end, 60*time.Second, "the builder's committed offsets at the topic's end")
		if got := p.Stats().RecordsIn.Load(); got != n2 {
			t.Errorf("the builder read %d records, want %d: those after the restored window's newest (the topic holds %d)", got, n2, n1+n2)
		}
		lines := logs.Lines("starts after the restored window")
		if len(lines) != parts {
			t.Errorf("%d log lines of a partition started after the restored window, want %d (one a partition): %q", len(lines), parts, lines)
		}
		for _, l := range lines {
			if !strings.Contains(l, `"window_newest_offset":1499`) || !strings.Contains(l, `"from_offset":1500`) {
				t.Errorf("log line %s: want window_newest_offset 1499 and from_offset 1500", l)
			}
		}
	})
}

// TestBuilderFirstStartCommitsItsStart (catchup31's leftover 2, BENCHMARKS §12.87): the split's
// builder starts each partition after its restored window's newest record, but committed nothing
// until a record of it was done: with no new record its group kept no offset, so its lag read
// as the whole partition (metrics' poller) and a restart had only the window to go by. Now the
// start is committed once the partition's fetch starts: the group's offsets are the window's
// newest + 1 (the topic's end here) with no record read.
func TestBuilderFirstStartCommitsItsStart(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		const parts, n1 = 2, 3000
		in, out, dlq, group, mt := roleTopics(t, br, parts)
		recs := makeSensorRecords(t, n1, parts, 88, 0.005, 0)
		input := newInput(in, parts, recs)
		cl := testsupport.NewProducer(t, br)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := produceRecords(ctx, cl, input, recs); err != nil {
			t.Fatal(err)
		}
		cfg := roleConfig(br, in, out, dlq, group, mt)
		cfg.Detect.StateDir = t.TempDir()
		runUntilOut(t, cfg, n1) // role all: its window (the newest of each partition 1499) saved at the stop
		end := slices.Clone(input.end)

		// 30 s: the fetch starts within a few seconds of the group's join (kfake and a broker
		// alike); without the commit nothing is ever committed, however long the wait.
		p := startBuilderUntil(t, br, cfg, zerolog.New(zerolog.NewTestWriter(t)), in, parts, end, 30*time.Second,
			"the builder's committed offsets at the window's newest + 1 with no new record")
		if got := p.Stats().RecordsIn.Load(); got != 0 {
			t.Errorf("the builder read %d records, want 0 (none after the restored window)", got)
		}
	})
}

// startBuilderUntil runs a builder of cfg (role all's config and state_dir) with log until the
// test ends (Run's error then fails it), and waits up to limit for its group's committed offsets
// of in to be want (what names the wait).
func startBuilderUntil(t *testing.T, br testsupport.Broker, cfg Config, log zerolog.Logger, in string, parts int, want []int64, limit time.Duration, what string) *Pipeline {
	t.Helper()
	cfg.Run.Role = detect.RoleBuilder
	p, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("builder's Run: %v", err)
		}
	})
	group := BuilderGroup(cfg.Ingest.GroupID)
	waitFor(t, limit, what, func() bool {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		c, err := testsupport.CommittedOffsets(cctx, br, group, in, parts)
		return err == nil && slices.Equal(c, want)
	})
	return p
}
