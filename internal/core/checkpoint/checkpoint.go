// Package checkpoint tracks which fetched Kafka records are done, per partition, and says which
// offsets are safe to commit.
//
// Kafka commits one offset per partition: "everything below this is processed". A pipeline
// whose records finish out of order (batches scored in parallel, a sink that retries) must not
// commit an offset while a record below it is still in flight, or a crash loses that record.
// The Checkpointer keeps, per partition, the records in fetch order and reports the highest
// offset+1 below which every registered record is done (the "committable" offset). It does the
// bookkeeping only; committing is the source's job.
//
// One Checkpointer serves one topic. All methods are safe for concurrent use: the source
// registers from its fetch goroutine while the acks of its batches (batch.Batch.Ack) mark
// records done from the sink goroutine.
package checkpoint

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrOffsetRegression is returned by Register when an offset is not above the last offset
// registered for its partition. With Kafka that means the partition is being read again from its
// committed offset, which happens after a rebalance took it away and gave it back: the caller
// should Revoke the partition and register the record again.
var ErrOffsetRegression = errors.New("checkpoint: offset not above the last registered offset")

// Checkpointer tracks in-flight records per partition. The zero value is not usable; call New.
type Checkpointer struct {
	mu    sync.Mutex
	parts map[int]*partitionState
}

// partitionState holds the records of one partition that are registered and not yet committable,
// in fetch (ascending offset) order. The done prefix is popped as soon as it forms, so
// offsets[head] is always the oldest record that is not done.
type partitionState struct {
	offsets []int64 // ascending; entries before head are popped
	done    []bool
	head    int
	// committable is the offset to commit (last record of the done prefix, plus one); -1 when no
	// record has been completed since the partition was (re)assigned.
	committable int64
	// last is the highest offset registered; -1 when none.
	last int64
}

// New returns an empty Checkpointer.
func New() *Checkpointer {
	return &Checkpointer{parts: make(map[int]*partitionState)}
}

// Register records that the record at (partition, offset) was fetched and is now in flight.
// Offsets of one partition must be registered in increasing order (fetch order; gaps, from
// compaction or transaction markers, are fine). A non-increasing offset returns an error that
// wraps ErrOffsetRegression and changes nothing. A negative partition or offset is an error.
func (c *Checkpointer) Register(partition int, offset int64) error {
	if partition < 0 || offset < 0 {
		return fmt.Errorf("checkpoint: register partition %d offset %d: negative", partition, offset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parts[partition]
	if p == nil {
		p = &partitionState{committable: -1, last: -1}
		c.parts[partition] = p
	}
	if offset <= p.last {
		return fmt.Errorf("partition %d: offset %d after %d: %w", partition, offset, p.last, ErrOffsetRegression)
	}
	p.last = offset
	p.offsets = append(p.offsets, offset)
	p.done = append(p.done, false)
	return nil
}

// Done marks the record at (partition, offset) as processed. Acks may arrive in any order. It
// reports whether the ack changed anything: false for a partition that is not tracked (never
// registered, or revoked since), an offset that is not registered, or a record already done.
// Ignoring such acks is what makes revocation safe: records fetched under an old assignment can
// no longer move the commit position.
//
// One case is accepted on purpose: a partition revoked and re-registered from its committed
// offset, then acked by a batch from before the revocation for an offset registered again. That
// ack says the record really went through the pipeline, so counting it done cannot lose it; the
// re-fetched copy's own ack then returns false.
func (c *Checkpointer) Done(partition int, offset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parts[partition]
	if p == nil {
		return false
	}
	live := p.offsets[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i] >= offset })
	if i == len(live) || live[i] != offset || p.done[p.head+i] {
		return false
	}
	p.done[p.head+i] = true
	if i == 0 {
		p.popDone()
	}
	return true
}

// popDone drops the done prefix and moves committable past it.
func (p *partitionState) popDone() {
	h := p.head
	for h < len(p.done) && p.done[h] {
		h++
	}
	if h == p.head {
		return
	}
	p.committable = p.offsets[h-1] + 1
	p.head = h
	// Compact once the popped prefix is at least half the slice: each entry is copied O(1)
	// times on average, and the arrays stay bounded by twice the in-flight count.
	if p.head >= len(p.offsets)-p.head {
		k := copy(p.offsets, p.offsets[p.head:])
		copy(p.done, p.done[p.head:])
		p.offsets = p.offsets[:k]
		p.done = p.done[:k]
		p.head = 0
	}
}

// Committable returns, for every tracked partition where at least one record completed since it
// was (re)assigned, the offset to commit: the highest offset+1 below which every registered
// record is done. This is exactly the value Kafka's OffsetCommit expects (the next offset to
// read). The map is a fresh copy.
func (c *Checkpointer) Committable() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]int64, len(c.parts))
	for id, p := range c.parts {
		if p.committable >= 0 {
			out[id] = p.committable
		}
	}
	return out
}

// Pending returns the number of registered records of partition that are not committable yet
// (in flight, or done but behind one in flight).
func (c *Checkpointer) Pending(partition int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.parts[partition]; p != nil {
		return len(p.offsets) - p.head
	}
	return 0
}

// Revoke drops all state of partition, as after a rebalance took it away: later acks for its
// records are ignored and Committable no longer reports it. Revoking an untracked partition is
// a no-op.
func (c *Checkpointer) Revoke(partition int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parts, partition)
}

// Partitions returns the tracked partitions in increasing order.
func (c *Checkpointer) Partitions() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int, 0, len(c.parts))
	for id := range c.parts {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
