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
	logged map[int32]bool // partitions said to start after the window (once a partition a process)
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
// window's newest, logged once a partition. It waits for Set; ok false when ctx ended first.
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
	if !held || r.topic != r.source || hi < 0 {
		return offset, true
	}
	r.mu.Lock()
	first := !r.logged[int32(partition)]
	r.logged[int32(partition)] = true
	r.mu.Unlock()
	if first {
		r.log.Info().Int("partition", partition).Int64("window_newest_offset", hi).Int64("from_offset", hi+1).
			Msgf("partition with no committed offset for group %q starts after the restored window's newest record of it (detect.state_dir), not at its first retained record (ingest.start_offset earliest): the window holds what was read before; a record after it is read (a crash's records after the window's last save too)", r.group)
	}
	return hi + 1, true
}
