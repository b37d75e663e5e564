package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/outlierd/outlierd/stages/sink"
)

// Riding out broker outages, and saying so. A broker restart, a leader election or a network
// blip makes fetches, produces and commits fail for a while; the pipeline keeps running
// through it: a failed sink write is retried (the batch stays unacknowledged, so its offsets
// are not committed, and a retry may duplicate outputs, which carry deterministic ids), a
// failed fetch is retried (kafka-go's reader reconnects and, after a rejoin, re-reads from the
// committed offsets), and commits are retried at the next interval. While a write fails,
// /readyz is 503 naming the topic and the config key, and every attempt logs a warning naming
// them. A write the broker refuses (a deleted topic, no leader for long) is tried
// sink.max_attempts times, then the pipeline stops with an error naming the topic, the key
// and the attempts; attempts that do not reach the broker at all are not counted, so an
// outage is waited out however long. Errors that no retry can cure (a message the broker
// will never accept, a batch that breaks the contract) stop the pipeline at once, as does
// the hard stop.

// Backoff between attempts: from retryMin, doubling, capped at retryMax, so that an outage
// of a few seconds costs little latency and a long one costs a warning every retryMax. A
// write that could not reach the broker waits at most retryUnreachableMax: the writer has
// already spent seconds on its own tries (100 ms to 1 s apart), and the write must go out as
// soon as the broker is back.
const (
	retryMin            = 100 * time.Millisecond
	retryMax            = 5 * time.Second
	retryUnreachableMax = time.Second
)

// transient reports whether err is one that a later attempt may not meet: the broker or the
// network being unavailable (refused or reset connections, timeouts, closed connections), a
// Kafka error code that the protocol marks retriable (leader elections, coordinator loading,
// unknown partitions while metadata propagates), or a partition without a leader yet. Cancellation is never transient: it is the
// pipeline stopping.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if unreachable(err) {
		return true
	}
	// One error per message of a write (kafka-go's WriteErrors, not unwrapped by errors.As):
	// transient when every failed message's error is.
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		failed := false
		for _, e := range we {
			if e != nil {
				if !transient(e) {
					return false
				}
				failed = true
			}
		}
		return failed
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// kafka-go's client-side "no leader" (metadata right after a broker restart lists the
	// partitions before their leaders are elected).
	return errors.Is(err, protocol.ErrNoLeader) || errors.Is(err, protocol.ErrNoPartition) ||
		// kafka-go's client-side "topic not found" (metadata does not list it: deleted, or
		// created a moment ago); counted against sink.max_attempts, as the broker answered.
		errors.Is(err, protocol.ErrNoTopic) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) // a request's own timeout (the stop is checked apart)
}

// unreachable reports whether err means the brokers could not be reached at all: a dial
// that failed, a connection refused, reset or closed, a request that timed out, or kafka-go's
// transport answering BROKER_NOT_AVAILABLE for want of a connection. Such an attempt says
// nothing about the topic, so it is not counted against sink.max_attempts.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ke kafka.Error
	if errors.As(err, &ke) { // kafka.Error is a net.Error too: an answer of the broker
		return ke == kafka.BrokerNotAvailable
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded)
}

// plaintextToTLS reports whether err is kafka-go's sign of a plaintext client talking to a TLS
// listener: the answer's first bytes are a TLS alert record (protocol.ReadResponse wraps its
// io.ErrUnexpectedEOF with these words, its only mark). A misconfiguration, not an outage: no
// retry fixes it.
func plaintextToTLS(err error) bool {
	return err != nil && errors.Is(err, io.ErrUnexpectedEOF) && strings.Contains(err.Error(), "broker appears to be expecting TLS")
}

// backoff waits before attempt+1 (attempt counts from 1); it returns false when ctx ended.
func backoff(ctx context.Context, attempt int) bool { return backoffMax(ctx, attempt, retryMax) }

// backoffMax is backoff capped at limit.
func backoffMax(ctx context.Context, attempt int, limit time.Duration) bool {
	d := retryMin << min(attempt-1, 10)
	t := time.NewTimer(min(d, limit))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retry runs op, a write to the sink named what ("sink write", "dead-letter write"), until it
// succeeds, fails with an error that is not transient, is refused by the broker
// sink.max_attempts times (attempts that do not reach it are not counted), or work ends (the
// hard stop or another stage's failure); it returns op's last error in the other cases. While
// op fails, the metrics report the sink not ready with the topic op could not write.
func (p *Pipeline) retry(work context.Context, what string, op func() error) error {
	refused := 0
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			if attempt > 1 {
				p.log.Info().Int("attempts", attempt).Msgf("%s succeeded again", what)
				p.metrics.SetSinkFailing(what, "")
			}
			return nil
		}
		if work.Err() != nil {
			return err
		}
		key, topic := sink.KeyTopic, p.cfg.Sink.Topic
		if what == writeDeadLetters {
			key, topic = sink.KeyDeadLetterTopic, p.cfg.Sink.DeadLetterTopic
		}
		tries := 1
		var te *sink.TopicError
		if errors.As(err, &te) {
			key, topic, tries = te.Key, te.Topic, max(te.Tries, 1)
		}
		p.metrics.SetSinkFailing(what, fmt.Sprintf("sink cannot write to %s %q: %v", key, topic, err))
		if !transient(err) {
			return err
		}
		away := unreachable(err)
		if !away {
			refused += tries
		}
		if refused >= p.cfg.Sink.MaxAttempts {
			return fmt.Errorf("%w (gave up after %d attempts the broker refused, sink.max_attempts)", err, refused)
		}
		p.log.Warn().Err(err).Str("key", key).Str("topic", topic).Int("attempt", attempt).
			Int("refused", refused).Int("max_attempts", p.cfg.Sink.MaxAttempts).
			Msgf("%s to %s %q failed; retrying (tries that could not reach the broker are not counted)", what, key, topic)
		limit := retryMax
		if away {
			limit = retryUnreachableMax
		}
		if !backoffMax(work, attempt, limit) {
			return err
		}
	}
}

// What retry writes: the names in its log lines and the slots of the sink's readiness.
const (
	writeOutputs     = "sink write"
	writeDeadLetters = "dead-letter write"
)

// unwritten is what of msgs a failed write did not write: the messages whose own error is set
// when err is kafka-go's per-message WriteErrors for them, else all of them. Writing again only
// those keeps a retry from duplicating the partitions the write reached (a scorer restoring keys
// read them twice until compaction: TestKeyRestoreReadsItsPartitionsRealBroker, 90 messages for
// 60 keys after a leader election).
func unwritten(msgs []kafka.Message, err error) []kafka.Message {
	var we kafka.WriteErrors
	if !errors.As(err, &we) || len(we) != len(msgs) {
		return msgs
	}
	var left []kafka.Message
	for i, e := range we {
		if e != nil {
			left = append(left, msgs[i])
		}
	}
	return left
}
