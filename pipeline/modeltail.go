package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// tailWait is how long one fetch of a partition's tail waits for records the broker does not
// have (none at or after the offset asked, below the end read before: compacted away).
const tailWait = 100 * time.Millisecond

// lastKeyVersion is the version of the last key model message of the model topic's partition mp
// (0 when it holds none). Its last offset is usually one, but need not be: a transaction's
// commit marker (a control record, which kafka-go hands out as a message without headers), a
// message of another writer, or (compaction) no message at all. Reading exactly that offset
// took the marker's "version" 0 as the partition's, and waited for a message that never came
// where none was left. So the tail [end-n, end) is read, n = 1, 16, 256, ... back to the first
// offset, until a message with a key model version is in it (not a stale model's tombstone,
// tailKeyVersion), each read ending at end: nothing is waited for that is not already there.
func lastKeyVersion(ctx context.Context, cfg modelTopicConfig, dialer *kafka.Dialer, mp int) (uint64, error) {
	conn, err := dialPartition(ctx, cfg, dialer, mp)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) }) // (ctx ends the reads)
	defer stop()
	first, end, err := readOffsets(ctx, conn, conn.RemoteAddr().String())
	if err != nil {
		return 0, err
	}
	for back := int64(1); ; back *= 16 {
		from := max(first, end-back)
		v, found, err := tailKeyVersion(ctx, conn, from, end, max(cfg.maxMessageBytes, 1<<20)*2)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return 0, err
		}
		if found || from <= first {
			return v, nil
		}
	}
}

// tailKeyVersion reads the messages of [from, end) on conn and returns the highest key model
// version among them (found false: none has one). A builder's tombstone of a model of another
// configuration (headerKeyStale) carries that model's older version: passed over.
func tailKeyVersion(ctx context.Context, conn *kafka.Conn, from, end int64, maxBytes int) (v uint64, found bool, err error) {
	err = readRange(ctx, conn, from, end, maxBytes, func(m kafka.Message) {
		if _, stale := headerValue(m, headerKeyStale); stale {
			return
		}
		if mv, ok := keyModelVersionOf(m); ok && !versionAhead(mv, time.Now()) { // (refused: modelversion.go)
			v, found = max(v, mv), true
		}
	})
	return v, found, err
}

// readRange hands each message of [from, end) on conn to each, in offset order, and returns
// once none is left below end: offsets compaction removed (at a batch's end too) are passed
// over, and nothing is waited for that is not already there. Each exchange with the leader (a
// fetch's answer, each of its messages as it arrives) is bounded by brokerAttemptWait
// (answerWatch), none is started once ctx has ended. each's own time is not bounded: a fetch
// that is answered is read whole however slowly it is handed over (a 16 MB stale scan's fetch
// on a slow link), where a deadline on the connection failed it at its end.
func readRange(ctx context.Context, conn *kafka.Conn, from, end int64, maxBytes int, each func(kafka.Message)) error {
	watch := newAnswerWatch(conn)
	defer watch.stop()
	// No deadline left on the connection by an earlier request (readOffsets'): the batches would
	// end in RequestTimedOut past it. Cleared before ctx is looked at, so that the deadline its end
	// sets (the callers' context.AfterFunc) is not undone unseen.
	_ = conn.SetDeadline(time.Time{})
	for off := from; off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := conn.Seek(off, kafka.SeekAbsolute); err != nil {
			return err
		}
		watch.arm()
		b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: maxBytes, MaxWait: tailWait})
		watch.disarm(ctx, b.Err())
		next := off
		for {
			watch.arm()
			m, err := b.ReadMessage()
			watch.disarm(ctx, err)
			if err != nil || m.Offset >= end {
				break
			}
			next = m.Offset + 1
			each(m)
		}
		next = max(next, b.Offset()) // (past records compacted away at a batch's end)
		if err := b.Close(); err != nil {
			return fmt.Errorf("leader %s: reading offsets %d..%d: %w", conn.RemoteAddr(), off, end, watch.explain(err))
		}
		if watch.fired() { // (an answer cut as it came: the connection's deadline is past)
			return fmt.Errorf("leader %s: reading offsets %d..%d: no answer within %s", conn.RemoteAddr(), off, end, brokerAttemptWait)
		}
		if next == off { // nothing left at or after off below end
			break
		}
		off = next
	}
	return nil
}

// dialPartition is a connection to the leader of the model topic's partition mp (the first
// broker of cfg's that answers, from the one that answered last where cfg.answered is set, each
// asked within brokerAttemptWait); its requests are bounded by the caller (boundConn).
func dialPartition(ctx context.Context, cfg modelTopicConfig, dialer *kafka.Dialer, mp int) (*kafka.Conn, error) {
	return dialPartitionFrom(ctx, cfg, dialer, mp)
}

// dialPartitionFrom is dialPartition asking cfg's brokers from the one that answered last on
// (cfg.answered, round), and remembering the one that answers: a reader that dials again, and
// the other readers sharing cfg.answered, start at it, where each dial that began at the first
// paid brokerAttemptWait for every silent broker before it (a host blackholed:
// TestFollowersRedialPastASilentFirstBroker).
func dialPartitionFrom(ctx context.Context, cfg modelTopicConfig, dialer *kafka.Dialer, mp int) (*kafka.Conn, error) {
	var last error
	from, n := cfg.answered.first(), len(cfg.brokers)
	for i := range n {
		at := (from + i) % n
		conn, err := dialLeader(ctx, dialer, cfg.brokers[at], cfg.topic, mp)
		if err == nil {
			cfg.answered.answered(at)
			return conn, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%s %q partition %d: %w", cfg.what(), cfg.topic, mp, last)
}
