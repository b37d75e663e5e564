package pipeline

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// The scan's record moved on through the builder's own messages (detect.state_dir;
// keyscanstate.go).
//
// A record holding the scan's offsets alone made every start read what was published since the
// previous start's scan: after a builder's day of republishing its keys, about the whole
// compacted topic. But a key model message this builder wrote is one the scan judges without
// reading it: its model is of the builder's configuration, or it is a tombstone, so the key is
// not stale there. The key publisher's writer reports the offsets of what it wrote
// (kafka.Writer.Completion: a produced batch takes consecutive offsets); where they continue a
// model partition's record offset with no gap, the record moves on past them, each key written
// dropped from the record's stale keys. A gap is a message of another writer (another builder
// of the group, one of the old configuration, a write whose answer was lost and retried): the
// record stops there for the rest of the run, and the next start reads on from it. On a topic
// of one partition the global model's chunks (another writer's, to this one) stop it at the
// first publication after the scan. The record moved on is written at most once per
// scanSaveEvery after a publication, and at the publisher's end (the graceful stop's last
// publication), so a restart reads what others wrote since and what the builder wrote in its
// last minute at most (TestScanRecordFollowsOwnWrites).
const (
	scanSaveEvery = time.Minute
	// scanPendingKeys bounds the keys of the batches written before the scan ended that are held
	// for it (a scan that takes long, or does not end): past it the record is not moved on this run.
	scanPendingKeys = 1 << 20
)

// scanAdvance is the record as the builder's own writes move it on.
type scanAdvance struct {
	mu      sync.Mutex
	ready   bool                  // the scan's record is in (begin)
	m       int                   // the model topic's partitions
	ends    map[int]int64         // the record's offsets
	found   map[staleRef]staleKey // the record's stale keys at ends
	pending map[int][]writtenRun  // written before the scan ended, by model partition
	stuck   map[int]bool          // a gap seen: not moved on for the rest of the run
	dirty   bool                  // moved on since the last write of the record
	saved   time.Time             // the last write of the record
	// held is pending's keys; over: more were written before the scan ended than scanPendingKeys.
	held int
	over bool
}

// writtenRun is one produced batch of the key publisher: its first offset and its messages'
// keys (the key model's key, not the message's).
type writtenRun struct {
	base int64
	keys []string
}

// noteWritten is the key publisher's writer's Completion: the batches written, by partition.
func (p *keyPublisher) noteWritten(msgs []kafka.Message, err error) {
	if err != nil || len(msgs) == 0 || p.stale.dir == "" {
		return // (an offset it took, if any, is a gap for the record: it stops there)
	}
	run := writtenRun{base: msgs[0].Offset, keys: make([]string, len(msgs))}
	for i, m := range msgs {
		if isKeyModel(m) {
			run.keys[i] = string(m.Key[len(keyModelPrefix):])
		}
	}
	a := &p.advance
	a.mu.Lock()
	defer a.mu.Unlock()
	mp := msgs[0].Partition
	if !a.ready {
		if a.held += len(run.keys); a.held > scanPendingKeys {
			a.over, a.pending = true, nil
		}
		if a.over {
			return
		}
		if a.pending == nil {
			a.pending = map[int][]writtenRun{}
		}
		a.pending[mp] = append(a.pending[mp], run)
		return
	}
	a.moveOn(mp, run)
}

// moveOn moves model partition mp's record past run where run continues it (a.mu held).
func (a *scanAdvance) moveOn(mp int, run writtenRun) {
	end, ok := a.ends[mp]
	if !ok || a.stuck[mp] {
		return // (a partition the scan does not read, or stopped)
	}
	last := run.base + int64(len(run.keys))
	switch {
	case last <= end:
		return // (judged by the scan)
	case run.base > end:
		a.stuck[mp] = true // another writer's message in between
		return
	}
	for _, k := range run.keys[end-run.base:] {
		delete(a.found, staleRef{mp, k})
	}
	a.ends[mp], a.dirty = last, true
}

// begin takes the scan's record (ends and found are copied) and moves it on through what the
// publisher wrote meanwhile.
func (a *scanAdvance) begin(m int, ends map[int]int64, found map[staleRef]staleKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ready, a.m, a.ends, a.found, a.stuck = true, m, maps.Clone(ends), maps.Clone(found), map[int]bool{}
	if a.over {
		for mp := range ends {
			a.stuck[mp] = true
		}
	}
	for mp, runs := range a.pending {
		slices.SortFunc(runs, func(x, y writtenRun) int { return int(x.base - y.base) })
		for _, run := range runs {
			a.moveOn(mp, run)
		}
	}
	a.pending, a.saved = nil, time.Now()
}

// saveAdvance writes the record as the builder's writes moved it on, if it moved and either
// scanSaveEvery passed since the last write or now is the publisher's end (final).
func (p *keyPublisher) saveAdvance(ctx context.Context, final bool) {
	a := &p.advance
	a.mu.Lock()
	if !a.ready || !a.dirty || !final && time.Since(a.saved) < scanSaveEvery {
		a.mu.Unlock()
		return
	}
	m, ends, found := a.m, maps.Clone(a.ends), maps.Clone(a.found)
	a.dirty, a.saved = false, time.Now()
	a.mu.Unlock()
	p.saveScanRecord(ctx, m, ends, found)
}
