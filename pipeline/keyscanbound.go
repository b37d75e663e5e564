package pipeline

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// The bound on the keys a builder's scan holds as stale (keystale.go).
//
// The scan holds each key whose newest message is a model of another configuration until its
// tombstone is written: about 140 bytes and the key each, as many as writers to the model topic
// put there (a hostile writer, or a huge topic of a configuration changed). Bounded now at
// detect.keys.max_keys keys held (the builder's own bound on the keys it keeps; before
// 2026-11-29 every one, and in model-topic-scan.state too). Past the bound the scan reads on,
// judging the keys it holds (a newer message of one may free its place) and noting, per model
// partition, where the first stale key it could not hold lay (over). Every stale key below that
// offset is held, so the scan's record (keyscanstate.go) says that offset for the partition, not
// its end: a restart reads on from there. Once the keys held are tombstoned (or have left
// otherwise), a pass reads each such partition again from its offset with the keys still held,
// finding the next ones, and so on until a pass reaches the ends with every stale key held:
// nothing stale stays on the topic for good, at the cost of a read from that offset a pass,
// each logged (warn: keys held, messages not held, the offsets) and counted
// (outlierd_model_topic_stale_passes_total). A pass starts when the round of tombstones before
// it freed room (TestStaleScanBounded). With two builders in the group, the keys held of the
// partitions the other owns are not this one's to tombstone: when they fill the bound, no pass
// frees room, and the next pass waits for an assignment (or the next start, whose reading from
// the record sees the other builder's tombstones and frees them).

// staleFull says whether the stale keys held (n) are at the bound (detect.keys.max_keys; none
// when it is not set: tests' publishers).
func (p *keyPublisher) staleFull(n int) bool {
	return p.detect.Keys.MaxKeys > 0 && n >= p.detect.Keys.MaxKeys
}

// judgedTo is the offset below which every message of each model partition was judged with its
// stale keys held: its end read to, or where the first stale key not held lay.
func judgedTo(ends, over map[int]int64) map[int]int64 {
	judged := maps.Clone(ends)
	maps.Copy(judged, over)
	return judged
}

// logOver warns, when a scan or pass (pass 0: the scan) was cut at the bound, of the keys held
// and where the next pass reads from.
func (p *keyPublisher) logOver(over map[int]int64, notHeld, held, pass int) {
	if len(over) == 0 {
		return
	}
	offs := make([]int64, 0, len(over))
	for _, mp := range slices.Sorted(maps.Keys(over)) {
		offs = append(offs, int64(mp), over[mp])
	}
	p.log.Warn().Int("keys_held", held).Int("keys_max", p.detect.Keys.MaxKeys).Int("messages_not_held", notHeld).
		Ints64("model_partition_offsets", offs).Int("pass", pass).
		Msg("more keys' models of another configuration on the model topic than detect.keys.max_keys: those held are tombstoned first, then the model partitions are read again from the offset of the first key not held, for the others")
}

// nextPass wakes the scan's goroutine for a pass when the scan was cut at the bound and the
// round of tombstones before freed room (progress), or the assignment changed since the last
// pass (p.stale.mu held). The found keys are the pass's until it hands them back (scanned).
func (p *keyPublisher) nextPass(progress bool) {
	s := &p.stale
	if len(s.over) == 0 || !progress && s.assigns == s.passAssigns {
		return
	}
	s.scanned, s.passAssigns = false, s.assigns
	select {
	case s.pass <- struct{}{}:
	default:
	}
}

// passes runs the scan's passes past the bound (nextPass wakes each) until one reaches every
// model partition's end with its stale keys held, or ctx ends.
func (p *keyPublisher) passes(ctx context.Context, dialer *kafka.Dialer, m int, reasons map[string]string) {
	for {
		p.stale.mu.Lock()
		cut, wake := len(p.stale.over) > 0, p.stale.pass
		p.stale.mu.Unlock()
		if !cut {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		if !p.pass(ctx, dialer, m, reasons) {
			return
		}
	}
}

// pass reads each model partition the last reading was cut on again from its offset (over),
// judging every key, with the keys still held (found): false when ctx ended first.
func (p *keyPublisher) pass(ctx context.Context, dialer *kafka.Dialer, m int, reasons map[string]string) bool {
	p.stale.mu.Lock()
	found, ends, over := p.stale.found, maps.Clone(p.stale.ends), p.stale.over
	p.stale.passes++
	n, onPass := p.stale.passes, p.stale.onPass
	p.stale.mu.Unlock()
	if onPass != nil {
		onPass()
	}
	start, next, notHeld, read := time.Now(), map[int]int64{}, 0, 0
	for _, mp := range slices.Sorted(maps.Keys(over)) {
		for attempt := 1; ; attempt++ {
			sr, err := p.scanPartition(ctx, dialer, mp, scanFrom{offset: over[mp]}, true, found, reasons)
			if err == nil { // (a failed attempt's keys are judged again by the next: read from the same offset)
				read += sr.read
				ends[mp] = sr.end
				if sr.over >= 0 {
					next[mp], notHeld = sr.over, notHeld+sr.notHeld
				}
				break
			}
			if ctx.Err() != nil {
				return false
			}
			p.log.Warn().Err(err).Int("model_partition", mp).Int("attempt", attempt).Int("pass", n).
				Msg("builder: reading the model topic again for the keys' models of another configuration past detect.keys.max_keys failed; retrying")
			if !backoff(ctx, attempt) {
				return false
			}
		}
	}
	p.stale.mu.Lock()
	judged := maps.Clone(p.stale.judged)
	p.stale.mu.Unlock()
	for mp := range over {
		judged[mp] = ends[mp]
	}
	maps.Copy(judged, next)
	if p.stale.dir != "" {
		p.saveScanRecord(ctx, m, judged, found)
		p.advance.begin(m, judged, found) // (the partitions read again stop at the builder's next write: conservative)
	}
	p.log.Info().Int("pass", n).Int("messages_read", read).Int("other_configuration", len(found)).Dur("took", time.Since(start)).
		Msg("builder: the model topic read again for the keys' models of another configuration past detect.keys.max_keys")
	p.logOver(next, notHeld, len(found), n)
	p.stale.mu.Lock()
	p.stale.scanned, p.stale.due = true, true
	p.stale.ends, p.stale.judged, p.stale.over = ends, judged, next
	p.stale.mu.Unlock()
	p.signal()
	return true
}
