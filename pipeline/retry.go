package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/outlierd/outlierd/pipeline/batch"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// Riding out broker outages. A broker restart, a leader election or a network blip makes
// fetches, produces and commits fail for a while; the pipeline keeps running through it:
// a failed sink write is retried (the batch stays unacknowledged, so its offsets are not
// committed, and a retry may duplicate outputs, which carry deterministic ids), a failed fetch
// is retried (kafka-go's reader reconnects and, after a rejoin, re-reads from the committed
// offsets), and commits are retried at the next interval. Errors that no retry can cure (a
// message the broker will never accept, a batch that breaks the contract) still stop the
// pipeline, as does the hard stop.

// Backoff between attempts: from retryMin, doubling, capped at retryMax, so that an outage
// of a few seconds costs little latency and a long one costs a warning every retryMax.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
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
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) // a request's own timeout (the stop is checked apart)
}

// backoff waits before attempt+1 (attempt counts from 1); it returns false when ctx ended.
func backoff(ctx context.Context, attempt int) bool {
	d := retryMin << min(attempt-1, 10)
	t := time.NewTimer(min(d, retryMax))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retry runs op until it succeeds, fails with an error that is not transient, or work ends
// (the hard stop or another stage's failure); it returns op's last error in the latter cases.
func (p *Pipeline) retry(work context.Context, what string, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			if attempt > 1 {
				p.log.Info().Int("attempts", attempt).Msgf("%s succeeded again", what)
			}
			return nil
		}
		if work.Err() != nil || !transient(err) {
			return err
		}
		p.log.Warn().Err(err).Int("attempt", attempt).Msgf("%s failed (broker unavailable?); retrying", what)
		if !backoff(work, attempt) {
			return err
		}
	}
}

// sinkLoop writes every scored batch until in is closed or work ends. A batch whose write
// fails transiently is written again until it succeeds (retry); only then are its offsets
// marked done. Every batch taken from in is released here.
func (p *Pipeline) sinkLoop(work context.Context, in <-chan *batch.Batch) error {
	for {
		select {
		case <-work.Done():
			return nil
		case b, ok := <-in:
			if !ok {
				return nil
			}
			start := time.Now()
			err := p.retry(work, "sink write", func() error { return p.snk.Write(work, b) })
			if err == nil {
				// Encoding and producing until acknowledged, retries included.
				p.metrics.ObserveBatch(metrics.StageSink, time.Since(start))
				p.markDone(b)
			}
			b.Record.Release()
			if err != nil && work.Err() == nil {
				return fmt.Errorf("pipeline: sink: %w", err)
			}
		}
	}
}
