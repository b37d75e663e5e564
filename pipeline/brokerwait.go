package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
)

// brokerAttemptWait bounds one exchange with one broker of the model topic: its partition count
// (LookupPartitions: a dial and a metadata request), a connection to a partition's leader
// (DialLeader: a dial, a metadata request, a dial) and each request on that connection (its
// offsets, one fetch). kafka-go bounds these by the caller's context alone (the Dialer's
// Timeout covers the dial, not the answer): a broker that took a request and never answered
// (seen under make test's load: a scorer's start held 48 s in modelTopicPartitions until the
// test ended, TestKeyRestoreReadsItsPartitionsRealBroker) held a start, an assignment's fetch
// (keyFollowers.start runs in the source's assignment callback) or a restore, where the next
// broker, or the callers' next attempt after their backoff, would have answered at once. A
// reachable broker answers in milliseconds; 5 s is the bound this package already gives a
// start's requests to the brokers (kafka.Transport's DialTimeout and the Client's Timeout of
// leaveDeadBuilders), long enough for a broker slowed by load, short enough that a lost request
// costs one retry, not the caller's whole wait (topicCheckWait, keyRestoreWait).
const brokerAttemptWait = 5 * time.Second

// lookupPartitions is topic's partitions as broker b gives them, within brokerAttemptWait.
func lookupPartitions(ctx context.Context, dialer *kafka.Dialer, b, topic string) ([]kafka.Partition, error) {
	actx, cancel := context.WithTimeout(ctx, brokerAttemptWait)
	defer cancel()
	dialer, release := kafkasec.CutAtEnd(actx, dialer)
	defer release() // (before cancel: the deferred run last first)
	ps, err := dialer.LookupPartitions(actx, "tcp", b, topic)
	return ps, attemptError(ctx, actx, b, err)
}

// dialLeader is a connection to the leader of topic's partition mp, found through broker b,
// within brokerAttemptWait; its requests are bounded by the caller (boundConn).
func dialLeader(ctx context.Context, dialer *kafka.Dialer, b, topic string, mp int) (*kafka.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, brokerAttemptWait)
	defer cancel()
	dialer, release := kafkasec.CutAtEnd(actx, dialer)
	defer release() // (before cancel: the connection returned lives on)
	conn, err := dialer.DialLeader(actx, "tcp", b, topic, mp)
	return conn, attemptError(ctx, actx, b, err)
}

// boundConn bounds conn's next requests (until it is called again) by brokerAttemptWait; it
// fails at once where ctx has ended. (A caller that ends conn's requests at ctx's end,
// context.AfterFunc, calls it before each request: a request started as ctx ends waits
// brokerAttemptWait at most, and the next is not started.)
func boundConn(ctx context.Context, conn *kafka.Conn) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return conn.SetDeadline(time.Now().Add(brokerAttemptWait))
}

// answerWatch bounds each wait for a leader's answer on conn by brokerAttemptWait without a
// deadline on the connection while the wait is not on: kafka-go ends a fetch's batch with
// RequestTimedOut once the deadline the connection had at the fetch has passed, however much
// of it arrived (TestReadRangeSlowConsumerNotCut), so a deadline bounds the reading of the
// whole answer and the caller's handling of each message with it. The watch's timer runs while
// a wait is armed alone; when it fires it ends the wait as the callers' context.AfterFunc ends
// it (the connection's deadline set to now), and never sets a later one (that would undo the
// context's) but to undo its own cut of a wait that got its answer (disarm).
type answerWatch struct {
	conn *kafka.Conn
	mu   sync.Mutex
	t    *time.Timer // the armed wait's (nil: none armed)
	gen  uint64      // the armed wait's number: a timer of an earlier wait that fires late does nothing
	done bool
}

// newAnswerWatch is the disarmed watch of conn.
func newAnswerWatch(conn *kafka.Conn) *answerWatch { return &answerWatch{conn: conn} }

// arm starts a wait's bound.
func (w *answerWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	gen := w.gen
	w.t = time.AfterFunc(brokerAttemptWait, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.gen == gen && w.t != nil { // (still this wait's)
			w.done = true
			_ = w.conn.SetDeadline(time.Now())
		}
	})
}

// disarm ends the armed wait's bound; err is how the wait ended. A wait that got its answer
// (err not the deadline's) is not failed by a timer that fired before disarm (an answer that
// came at the bound, or a goroutine descheduled between its answer and disarm): its cut is
// undone (the connection's deadline cleared, then set to now again where ctx has ended, its
// AfterFunc's cut maybe undone with it), and the watch has not fired (review27's spurious
// retry, TestAnswerWatchAnsweredNotCut).
func (w *answerWatch) disarm(ctx context.Context, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.t == nil {
		return
	}
	w.t.Stop()
	w.t, w.gen = nil, w.gen+1
	if w.done && !errors.Is(err, os.ErrDeadlineExceeded) {
		w.done = false
		_ = w.conn.SetDeadline(time.Time{})
		if ctx.Err() != nil { // (ended before the clear: cut again; after it, its AfterFunc cuts after it)
			_ = w.conn.SetDeadline(time.Now())
		}
	}
}

// stop disarms the watch for good.
func (w *answerWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.t != nil {
		w.t.Stop()
		w.t, w.gen = nil, w.gen+1
	}
}

// fired reports whether a wait ran past brokerAttemptWait.
func (w *answerWatch) fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// explain says, where the watch fired, that err came of a wait past brokerAttemptWait.
func (w *answerWatch) explain(err error) error {
	if w.fired() {
		return fmt.Errorf("no answer within %s: %w", brokerAttemptWait, err)
	}
	return err
}

// attemptError names broker b in err, an attempt's error under actx (ctx's with its bound),
// and says so where the bound ended it.
func attemptError(ctx, actx context.Context, b string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && actx.Err() != nil:
		return fmt.Errorf("broker %s: no answer within %s: %w", b, brokerAttemptWait, err)
	default:
		return fmt.Errorf("broker %s: %w", b, err)
	}
}

// readOffsets are the first and end offsets of the partition conn is connected to (b: its
// leader's address, for the error): its two requests within brokerAttemptWait, and ended by
// ctx's end (its error then).
func readOffsets(ctx context.Context, conn *kafka.Conn, b string) (first, end int64, err error) {
	if err := boundConn(ctx, conn); err != nil {
		return 0, 0, err
	}
	// (ctx's end ends the requests too: a caller's context shorter than the bound, a stop;
	// TestModelTopicOffsetsEndWithTheCaller)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	first, end, err = conn.ReadOffsets()
	switch {
	case err == nil:
		return first, end, nil
	case ctx.Err() != nil:
		return 0, 0, fmt.Errorf("leader %s: its offsets: %w", b, ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil:
		return 0, 0, fmt.Errorf("leader %s: its offsets: no answer within %s: %w", b, brokerAttemptWait, err)
	default:
		return 0, 0, fmt.Errorf("leader %s: its offsets: %w", b, err)
	}
}
