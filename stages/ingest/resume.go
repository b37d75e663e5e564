package ingest

import (
	"context"
	"sync"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// Where a partition without a committed offset starts when the process restored what it had
// read of it (detect.state_dir's window: each record's partition and offset).
//
// ingest.start_offset earliest reads such a partition from its first retained record. A
// builder's first start on the state_dir of the role-all run it replaces (docs/OPERATIONS.md,
// roles) has a group of its own (GROUP.builder) with no commits: it read the whole topic again
// into the window it had just restored, behind that window's newer records, and published models
// of the old records until it caught up (newuser31, BENCHMARKS §12.87: 150,000 records, about 70
// models, the first with window_span 0). The restored window holds what was read: such a
// partition starts after the window's newest record of it instead. Nothing the window lacks is
// skipped: after a crash the records read after the window's last save are newer than its
// newest, and are read again. A committed offset, where there is one, decides as before (the
// window may be older or newer than it: detect's reread guard, the warning of older records).
// The start after the window is committed as the partition's fetch begins (resumeAt), so the
// group's lag and a restart see it before a new record is done (catchup31b: until then the
// builder's lag read as the whole partition). A partition the restored window holds no record
// of (another member's under role all, or all its records fell out of the window: the window
// file keeps no offset beyond its records) starts at start_offset's, warned once (catchup31b).

// Resume is the restored window's newest offset per partition, given once the detect stage
// loaded its state (Set), which the Source's partitions without a committed offset wait for
// before their first fetch. Make it with NewResume, pass it to NewSource (WithResume), and Set
// it exactly once, also when nothing was restored (Set with nil): until then those partitions
// are not fetched. Closing the Source ends the wait.
type Resume struct {
	once   sync.Once
	set    chan struct{}
	topic  string // the window's
	newest map[int32]int64
	// group, source and log are the Source's (WithResume).
	group, source string
	log           zerolog.Logger

	mu     sync.Mutex
	logged map[int32]bool // partitions said to start after the window, or not to be in it (once a partition a process)
}

// NewResume is a Resume not yet Set.
func NewResume() *Resume {
	return &Resume{set: make(chan struct{}), logged: map[int32]bool{}}
}

// Set gives the newest offset read of each partition of topic that the restored window holds
// (nil: none restored). Calls after the first are ignored.
func (r *Resume) Set(topic string, newest map[int32]int64) {
	r.once.Do(func() {
		r.topic, r.newest = topic, newest
		close(r.set)
	})
}

// SourceOption is an option of NewSource.
type SourceOption func(*Source)

// WithResume makes a partition without a committed offset start after r's newest offset of it
// (under ingest.start_offset earliest; latest reads from the end as before), waiting for r.Set
// first. nil: no effect.
func WithResume(r *Resume) SourceOption {
	return func(s *Source) {
		if r != nil && s.cfg.StartOffset == StartEarliest {
			r.group, r.source, r.log = s.cfg.GroupID, s.cfg.Topic, s.log
			s.resume = r
		}
	}
}

// from is where partition starts when offset is the group's (kafka-go's: the committed
// offset, or kafka.FirstOffset for none under earliest): offset itself unless no offset was
// committed and the restored window holds records of the partition, then the offset after the
// window's newest, logged once a partition. A partition without a committed offset that a
// restored window of the topic does not hold starts at offset as before, warned once: its
// records this state read, if any, fell out of the window (they are read again), or another
// member read it. It waits for Set; ok false when ctx ended first.
func (r *Resume) from(ctx context.Context, partition int, offset int64) (_ int64, ok bool) {
	if r == nil || offset != kafka.FirstOffset {
		return offset, true
	}
	select {
	case <-r.set:
	case <-ctx.Done():
		return offset, false
	}
	hi, held := r.newest[int32(partition)]
	if r.newest == nil || r.topic != r.source {
		return offset, true // (nothing restored of this topic: a first start reads from start_offset)
	}
	r.mu.Lock()
	first := !r.logged[int32(partition)]
	r.logged[int32(partition)] = true
	r.mu.Unlock()
	if !held || hi < 0 {
		if first {
			r.log.Warn().Int("partition", partition).
				Msgf("partition with no committed offset for group %q is not in the restored window (detect.state_dir): read from its first retained record (ingest.start_offset earliest); records this state read of it before, if any, all fell out of the window and are read again, another member's partitions (role all) were never read by it", r.group)
		}
		return offset, true
	}
	if first {
		r.log.Info().Int("partition", partition).Int64("window_newest_offset", hi).Int64("from_offset", hi+1).
			Msgf("partition with no committed offset for group %q starts after the restored window's newest record of it (detect.state_dir), not at its first retained record (ingest.start_offset earliest): the window holds what was read before; a record after it is read (a crash's records after the window's last save too)", r.group)
	}
	return hi + 1, true
}

// resumeAt is where the fetch of partition starts (Resume.from, seq the generation's number):
// when that is after the restored window rather than the group's offset (none committed), it
// commits that start to the group with the generation first, once, so that the group's lag
// (metrics' poller: a group without a commit lags by the whole partition) and a restart before
// the partition's first record is done see it. Nothing else commits the partition until a
// record of it is done, and none is fetched before this returns: the commit moves nothing
// back. A failed commit is logged; the fetch starts there all the same (the next record's commit
// follows, or a restart starts after the window again).
func (f *groupFetcher) resumeAt(ctx context.Context, seq int64, partition int, offset int64) (int64, bool) {
	from, ok := f.resume.from(ctx, partition, offset)
	if !ok || from == offset {
		return from, ok
	}
	f.mu.Lock()
	gen := f.gen
	if f.live.Load() != seq {
		gen = nil // (the generation ended: so did ctx)
	}
	f.mu.Unlock()
	if gen == nil {
		return from, ctx.Err() == nil
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{f.topic: {partition: from}}); err != nil {
		f.errf("committing partition %d of %s's start after the restored window (offset %d) for group %s: %v; the fetch starts there, the commit follows with its first record's", partition, f.topic, from, gen.GroupID, err)
	}
	return from, true
}
