package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// followWait is how long a live follower's fetch waits at the partition's end for a message
// (the broker's long poll; kafka-go's Reader's MaxWait as the followers had it).
const followWait = 500 * time.Millisecond

// pastEndWait is how long a reader's offset may stay past its partition's end (fetches refused
// with OffsetOutOfRange, the partition's end below the offset) before the reader takes the
// partition for a new one (the topic deleted and created again, or its log truncated by an
// unclean leader election) and reads it again from its first offset. A broker refuses a fetch
// past its log's end, and a clean election's new leader holds every offset below the old one's
// high watermark, which is all a reader reads: only a leader's state moving as it is elected is
// waited out, which takes a replica fetch or two (replica.fetch.wait.max.ms: 500 ms). Reading
// again from the first costs a reread of the partition (the model follower passes over the
// versions it has; a key's newest message is read last); waiting for ever served the models
// of then (kafka-go's Reader did; TestModelFollowerReadsARecreatedTopic).
const pastEndWait = 5 * time.Second

// partitionReader reads one partition of the model topic from an offset on, for ever: a
// scorer's model follower (partition 0) and its keys' followers; and each partition of
// sink.topic for outlierd tail (TopicRef.Follower). It replaces kafka-go's Reader,
// whose own goroutine dialed the leader with no bound but the Reader's close (Dialer.DialLeader's
// metadata request: a broker that lost it held the follower until a restart, the scorer serving
// its model of then; TestModelFollowerPastALostRequest). Here every exchange with a broker is
// bounded: the dial by dialPartition (brokerAttemptWait a broker), the partition's offsets by
// readOffsets, a fetch's answer and each of its messages by brokerAttemptWait (answerWatch,
// over the fetch's long poll of followWait), and each is ended by the caller's context. It
// runs on its caller's goroutine alone (none of its own): a failure ends ReadMessage with the
// error, the connection closed, and the caller's next call dials again from where it was,
// asking first the broker that answered last (cfg.answered, shared by the readers of one
// scorer). It counts its failures in a row (run: the caller's backoff, and the pacing of the
// caller's warnings, warning) and logs once the answer that ends a run its caller warned of.
// Not safe for concurrent use; Close after the reads.
type partitionReader struct {
	cfg      modelTopicConfig
	dialer   *kafka.Dialer
	mp       int
	maxBytes int
	log      zerolog.Logger // (its reads again from the first offset: outOfRange)

	conn  *kafka.Conn
	watch *answerWatch // conn's
	// batch is what the last fetch read and ReadMessage has not handed out; offset is the next
	// offset to hand out (kafka.FirstOffset: the partition's first), past the offsets a fetch
	// found none at (compacted away) once batch is empty.
	batch  []kafka.Message
	offset int64
	closed bool
	// run counts the reads failed in a row (n, 0 once a read is answered: its caller's backoff)
	// and paces their warnings (failpace.go).
	run failureRun
	// pastEnd is when fetches began to be refused past the partition's end (zero: they are not).
	pastEnd time.Time
	// sending, if set, is called before each fetch is sent (outlierd tail: its --idle-exit
	// counts from every partition's first).
	sending func()
}

// newPartitionReader is a reader of cfg's partition mp from offset on (below the partition's
// first, kafka.FirstOffset included: from its first; kafka.LastOffset: from its end when the
// reader first reaches its leader), logging to log; it dials at its first read. Where
// cfg.answered is nil the reader remembers the broker that answered it on its own.
func newPartitionReader(cfg modelTopicConfig, dialer *kafka.Dialer, mp int, offset int64, log zerolog.Logger) *partitionReader {
	if cfg.answered == nil {
		cfg.answered = &brokerHint{}
	}
	return &partitionReader{cfg: cfg, dialer: dialer, mp: mp, maxBytes: max(cfg.maxMessageBytes, 1<<20) * 2, offset: offset, log: log}
}

// Offset is the offset of the next message ReadMessage hands out, or at or below which none
// is (kafka.FirstOffset or kafka.LastOffset before the first dial).
func (r *partitionReader) Offset() int64 { return r.offset }

// SetOffset makes the next read start at offset (kafka.FirstOffset: the partition's first;
// kafka.LastOffset: its end at the next dial).
func (r *partitionReader) SetOffset(offset int64) {
	r.batch, r.offset, r.pastEnd = nil, offset, time.Time{}
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
			return kafka.Message{}, r.failed(ctx, err)
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

// Ends are the partition's first and end offsets now, asked of its leader on the reader's
// connection (dialed where there is none); a failure is a failed read as ReadMessage's is.
func (r *partitionReader) Ends(ctx context.Context) (first, end int64, err error) {
	if r.closed {
		return 0, 0, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, r.at(err)
	}
	if r.conn == nil {
		first, end, err = r.dial(ctx)
	} else if first, end, err = readOffsets(ctx, r.conn, r.conn.RemoteAddr().String()); err == nil {
		r.offset = max(r.offset, first)
	} else {
		err = r.at(err)
	}
	if err != nil {
		return 0, 0, r.failed(ctx, err)
	}
	r.answered()
	return first, end, nil
}

// failed counts err, a failed read (fetch or Ends), and hangs up: the next read dials again.
// It returns err, or ctx's end where that ended it.
func (r *partitionReader) failed(ctx context.Context, err error) error {
	r.run.fail(time.Now())
	r.hangUp()
	if ctx.Err() != nil {
		err = r.at(ctx.Err())
	}
	return err
}

// failures is how many reads failed in a row (0: the last was answered).
func (r *partitionReader) failures() int { return r.run.n }

// warning is the event for the caller to log its failed read err on (failureRun.warning: nil
// where the reader's last warning is more recent than the run's gap, failureLineEvery or more).
func (r *partitionReader) warning(log *zerolog.Logger, err error) *zerolog.Event {
	return r.run.warning(log, err, time.Now())
}

// answered ends a run of failed reads: once, where the caller warned of it, an info line.
func (r *partitionReader) answered() {
	if e := r.run.answered(&r.log, time.Now()); e != nil {
		r.fields(e).Msg(r.cfg.what() + ": read again after failed reads (failed_reads in a row, over failing_for)")
	}
}

// fields names the topic and partition on e: model_topic and model_partition (the scorer's
// lines), topic and partition (another topic's).
func (r *partitionReader) fields(e *zerolog.Event) *zerolog.Event {
	if r.cfg.key == "" {
		return e.Str("model_topic", r.cfg.topic).Int("model_partition", r.mp)
	}
	return e.Str("topic", r.cfg.topic).Int("partition", r.mp)
}

// at names the partition and the offset read in err.
func (r *partitionReader) at(err error) error {
	switch r.offset {
	case kafka.FirstOffset:
		return fmt.Errorf("%s %q partition %d from its first offset: %w", r.cfg.what(), r.cfg.topic, r.mp, err)
	case kafka.LastOffset:
		return fmt.Errorf("%s %q partition %d from its end: %w", r.cfg.what(), r.cfg.topic, r.mp, err)
	}
	return fmt.Errorf("%s %q partition %d at offset %d: %w", r.cfg.what(), r.cfg.topic, r.mp, r.offset, err)
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
// the broker waited followWait and none came, or the offset is not in the partition:
// outOfRange), dialing the leader first where there is no connection.
func (r *partitionReader) fetch(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.conn == nil {
		if _, _, err := r.dial(ctx); err != nil {
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
	if r.sending != nil {
		r.sending()
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
	r.pastEnd = time.Time{}
	if len(r.batch) == 0 {
		r.offset = next
	}
	r.answered()
	return nil
}

// dial connects to the partition's leader and moves an offset below its first (compacted or
// expired meanwhile, or kafka.FirstOffset) to its first, kafka.LastOffset to its end; first
// and end are the partition's.
func (r *partitionReader) dial(ctx context.Context) (first, end int64, err error) {
	conn, err := dialPartitionFrom(ctx, r.cfg, r.dialer, r.mp) // (its errors name the partition)
	if err != nil {
		return 0, 0, err
	}
	r.conn, r.watch = conn, newAnswerWatch(conn)
	first, end, err = readOffsets(ctx, conn, conn.RemoteAddr().String())
	if err != nil {
		return 0, 0, r.at(err)
	}
	if r.offset == kafka.LastOffset {
		r.offset = end
	}
	r.offset = max(r.offset, first)
	return first, end, nil
}

// outOfRange handles a fetch refused with OffsetOutOfRange: below the partition's first
// (compaction or retention removed it) it reads on from the first; past its end it waits
// followWait (or until ctx ends) and is read again, and, once the end has stayed below it for
// pastEndWait (the topic recreated, its log truncated), reads the partition again from its
// first, with a warning. The connection is dialed again first: kafka-go's Conn stops reading a
// fetch's answer at a partition's error code, and the rest of it, left on the connection, is
// what its next request would read as its own answer (io.ErrNoProgress;
// TestPartitionReaderPastRetention).
func (r *partitionReader) outOfRange(ctx context.Context) error {
	r.hangUp()
	first, end, err := r.dial(ctx) // (an offset below first moved to first)
	if err != nil {
		return err
	}
	r.answered()
	// Below the first (moved to it by dial), or written meanwhile:
	if r.offset < end {
		r.pastEnd = time.Time{}
		return nil
	}
	now := time.Now()
	if r.pastEnd.IsZero() {
		r.pastEnd = now
	}
	if past := now.Sub(r.pastEnd); past >= pastEndWait {
		r.fields(r.log.Warn()).Int64("offset", r.offset).Int64("end_offset", end).Int64("first_offset", first).Dur("past_end_for", past).
			Msg(r.cfg.what() + ": the partition's end is below the offset read (the topic deleted and created again, or its log truncated); reading it again from its first offset")
		r.offset, r.pastEnd = first, time.Time{}
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
