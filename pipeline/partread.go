package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
)

// followWait is how long a live follower's fetch waits at the partition's end for a message
// (the broker's long poll; kafka-go's Reader's MaxWait as the followers had it).
const followWait = 500 * time.Millisecond

// partitionReader reads one partition of the model topic from an offset on, for ever: a
// scorer's model follower (partition 0) and its keys' followers. It replaces kafka-go's Reader,
// whose own goroutine dialed the leader with no bound but the Reader's close (Dialer.DialLeader's
// metadata request: a broker that lost it held the follower until a restart, the scorer serving
// its model of then; TestModelFollowerPastALostRequest). Here every exchange with a broker is
// bounded: the dial by dialPartition (brokerAttemptWait a broker), the partition's offsets by
// readOffsets, a fetch's answer and each of its messages by brokerAttemptWait (answerWatch,
// over the fetch's long poll of followWait), and each is ended by the caller's context. It
// runs on its caller's goroutine alone (none of its own): a failure ends ReadMessage with the
// error, the connection closed, and the caller's next call dials again from where it was.
// Not safe for concurrent use; Close after the reads.
type partitionReader struct {
	cfg      modelTopicConfig
	dialer   *kafka.Dialer
	mp       int
	maxBytes int

	conn  *kafka.Conn
	watch *answerWatch // conn's
	// batch is what the last fetch read and ReadMessage has not handed out; offset is the next
	// offset to hand out (kafka.FirstOffset: the partition's first), past the offsets a fetch
	// found none at (compacted away) once batch is empty.
	batch  []kafka.Message
	offset int64
	closed bool
	// failed counts the reads failed in a row (0 once a fetch is answered): its caller's backoff.
	failed int
}

// newPartitionReader is a reader of the model topic's partition mp from offset on (below the
// partition's first, kafka.FirstOffset included: from its first); it dials at its first read.
func newPartitionReader(cfg modelTopicConfig, dialer *kafka.Dialer, mp int, offset int64) *partitionReader {
	return &partitionReader{cfg: cfg, dialer: dialer, mp: mp, maxBytes: max(cfg.maxMessageBytes, 1<<20) * 2, offset: offset}
}

// Offset is the offset of the next message ReadMessage hands out, or at or below which none
// is (kafka.FirstOffset before the first read from the partition's first).
func (r *partitionReader) Offset() int64 { return r.offset }

// SetOffset makes the next read start at offset (kafka.FirstOffset: the partition's first).
func (r *partitionReader) SetOffset(offset int64) {
	r.batch, r.offset = nil, offset
}

// ReadMessage is the partition's next message at or after Offset, waiting for one to be
// written as long as ctx lasts (ctx's error once it has ended); io.EOF once closed. A failure
// (a broker that does not answer within its bound, a connection lost, a leader moved) returns
// its error and closes the connection; the next call dials again.
func (r *partitionReader) ReadMessage(ctx context.Context) (kafka.Message, error) {
	if err := ctx.Err(); err != nil { // (a stop ends the reads, what was fetched handed out or not)
		return kafka.Message{}, r.at(err)
	}
	for len(r.batch) == 0 {
		if r.closed {
			return kafka.Message{}, io.EOF
		}
		if err := r.fetch(ctx); err != nil {
			r.failed++
			r.hangUp()
			if ctx.Err() != nil {
				err = r.at(ctx.Err())
			}
			return kafka.Message{}, err
		}
	}
	m := r.batch[0]
	r.batch = r.batch[1:]
	r.offset = m.Offset + 1
	return m, nil
}

// Close closes the connection; reads after it return io.EOF.
func (r *partitionReader) Close() error {
	r.closed = true
	r.hangUp()
	return nil
}

// at names the partition and the offset read in err.
func (r *partitionReader) at(err error) error {
	if r.offset < 0 {
		return fmt.Errorf("model topic %q partition %d from its first offset: %w", r.cfg.topic, r.mp, err)
	}
	return fmt.Errorf("model topic %q partition %d at offset %d: %w", r.cfg.topic, r.mp, r.offset, err)
}

// hangUp closes the connection (the next fetch dials again).
func (r *partitionReader) hangUp() {
	if r.conn != nil {
		r.watch.stop()
		r.conn.Close()
		r.conn, r.watch = nil, nil
	}
}

// fetch reads the messages at and after r.offset that one fetch answers into r.batch (none:
// the broker waited followWait and none came, or the offset is past the partition's end,
// waited on as kafka-go's Reader did: a new leader's end may lag what was read a moment ago),
// dialing the leader first where there is no connection.
func (r *partitionReader) fetch(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.conn == nil {
		if err := r.dial(ctx); err != nil {
			return err // (naming the partition)
		}
	}
	conn, watch := r.conn, r.watch
	// No deadline left by an earlier request (readOffsets'): a fetch's batch ends in
	// RequestTimedOut past it. Cleared before ctx is looked at, so that the deadline its end
	// sets is not undone unseen.
	_ = conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := ctx.Err(); err != nil {
		return r.at(err)
	}
	// (SeekDontCheck: the offset is asked in the fetch; a checked seek asks the leader's offsets
	// first, two requests no watch bounds)
	if _, err := conn.Seek(r.offset, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
		return r.at(err)
	}
	watch.arm()
	b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: r.maxBytes, MaxWait: followWait})
	watch.disarm(ctx, b.Err())
	next := r.offset
	for {
		watch.arm()
		m, err := b.ReadMessage()
		watch.disarm(ctx, err)
		if err != nil {
			break
		}
		if m.Offset < r.offset { // (a compressed batch's messages before the one asked)
			continue
		}
		r.batch = append(r.batch, m)
		next = m.Offset + 1
	}
	next = max(next, b.Offset()) // (past records compacted away at a batch's end)
	err := b.Close()
	// (On a failure the messages read before it are handed out first: whole, in order.)
	switch {
	case watch.fired(): // (the connection's deadline is past)
		return r.at(fmt.Errorf("leader %s: %w", conn.RemoteAddr(), watch.explain(os.ErrDeadlineExceeded)))
	case errors.Is(err, kafka.OffsetOutOfRange): // (refused: none read)
		return r.outOfRange(ctx)
	case err != nil && !errors.Is(err, kafka.RequestTimedOut): // (kafka-go's word for a long poll that ended with none)
		return r.at(fmt.Errorf("leader %s: %w", conn.RemoteAddr(), err))
	}
	if len(r.batch) == 0 {
		r.offset = next
	}
	r.failed = 0
	return nil
}

// dial connects to the partition's leader and moves an offset below its first (compacted or
// expired meanwhile, or kafka.FirstOffset) to its first.
func (r *partitionReader) dial(ctx context.Context) error {
	conn, err := dialPartition(ctx, r.cfg, r.dialer, r.mp) // (its errors name the partition)
	if err != nil {
		return err
	}
	r.conn, r.watch = conn, newAnswerWatch(conn)
	first, _, err := readOffsets(ctx, conn, conn.RemoteAddr().String())
	if err != nil {
		return r.at(err)
	}
	r.offset = max(r.offset, first)
	return nil
}

// outOfRange handles a fetch refused with OffsetOutOfRange: below the partition's first
// (compaction or retention removed it) it reads on from the first; past its end it waits
// followWait (or until ctx ends) and is read again.
func (r *partitionReader) outOfRange(ctx context.Context) error {
	first, end, err := readOffsets(ctx, r.conn, r.conn.RemoteAddr().String())
	if err != nil {
		return r.at(err)
	}
	if r.offset < first {
		r.offset = first
		return nil
	}
	if r.offset < end { // (written meanwhile)
		return nil
	}
	t := time.NewTimer(followWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return r.at(ctx.Err())
	case <-t.C:
		return nil
	}
}
