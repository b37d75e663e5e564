package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// The stages as the pipeline's goroutines see them: the loops of Run (fetch, detect, sink,
// commit) talk to these interfaces only, so that drain, commit and retry are tested with fakes,
// without Kafka (loops_test.go). ingest.Source, detect.Stage and sink.Sink implement them.

// Source is the input: batches with the acks to their records, dead letters with theirs, and
// the commit of what was acked (ingest.Source).
type Source interface {
	// Next blocks for the next batch and the dead letters met while filling it (either may be
	// nil, not both, when err is nil).
	Next(ctx context.Context) (*batch.Batch, *batch.DeadLetters, error)
	// Commit commits, per partition, the offset below which every record was acked.
	Commit(ctx context.Context) (map[int]int64, error)
	Close() error
}

// Assigning is a Source that reports its consumer group's assignment at every generation
// (ingest.Source.OnAssigned): a scorer's keys and the alert groups follow its partitions
// (followAssignments, alertScope); a Source without it leaves them every key and an unknown
// scope.
type Assigning interface {
	OnAssigned(func(ingest.Assignment))
}

// Stage is the detect stage as the detect goroutine sees it (detect.Stage).
type Stage interface {
	// Process scores b and returns the batches ready to go on (none while held for a model).
	Process(ctx context.Context, b *batch.Batch) ([]*batch.Batch, error)
	// FlushContext returns the batches still held, at the end of the input: those held for the
	// first model wait for its build until ctx (the hard stop) ends at most; a rebuild in
	// progress is not waited for (CloseContext is, after the final commit).
	FlushContext(ctx context.Context) ([]*batch.Batch, error)
	// Model is the model now serving (nil before the first), Window the stage's window: both
	// for the metrics.
	Model() *detect.Model
	Window() *microcluster.Window
	// KeyStats are the models per key's figures (zero without detect.key_by), for the metrics.
	KeyStats() detect.KeyStats
	// AlertGroupEvictions counts the alert groups evicted within their cooldown (a running
	// total), for the metrics.
	AlertGroupEvictions() uint64
	// AlertFoldedLost counts the flagged records folded into alerts whose count no later alert
	// tells (a running total), for the metrics.
	AlertFoldedLost() uint64
	// AbandonContext releases what the stage still holds when the run ends without Flush (a
	// failure or the hard stop): never acknowledged, read again after a restart; what is still
	// being worked on is waited for until ctx ends at most (the stop's deadline), then left to
	// end alone.
	AbandonContext(ctx context.Context)
	// CloseContext waits for the stage's own goroutines (snapshot writes; a model build until ctx
	// ends at most: the stop's deadline).
	CloseContext(ctx context.Context)
}

// Overlapped is a Stage that keeps batches in flight while the device scores them
// (detect.Deps.Overlap, on a GPU: detect.Stage). The detect loop waits for Landing or the next
// batch, whichever comes first, and passes on what LandScored returns; Drain finishes every
// batch in flight (before a live reconfiguration).
type Overlapped interface {
	Landing() <-chan struct{}
	LandScored() ([]*batch.Batch, error)
	Drain() ([]*batch.Batch, error)
}

// Sink is the output (sink.Sink): both writes return nil only once the broker acknowledged
// every message (acks=all).
type Sink interface {
	Write(ctx context.Context, b *batch.Batch) error
	WriteDeadLetters(ctx context.Context, dls []batch.DeadLetter) error
	Close() error
}

// item is what travels on the pipeline's channels, fetch -> detect -> sink: a batch of
// records, or the dead letters met while fetching one (exactly one is set). Dead letters pass
// the detect goroutine untouched, so the sink goroutine is the only writer.
type item struct {
	b  *batch.Batch
	dl *batch.DeadLetters
}

// release drops the item unwritten (a failure or the hard stop): its records are never acked,
// so they are read again after a restart.
func (it item) release() { it.b.Release() }

// closeGrace bounds the closing of the Kafka clients (source, sink, a role's model topic
// clients) at Run's end past the stop's deadline. kafka-go's Writer.Close waits for every
// produce it is still trying: after the hard stop or a failure those are abandoned writes,
// retried up to sink.max_attempts times (each up to sink.write_timeout, backoff up to 1 s), and
// with write_timeout 1ns the process exited 57 s past run.shutdown_timeout, which bounds the
// whole stop. Their records were never acknowledged, so never committed: they are read again
// after a restart. Before the deadline the close is waited for: a clean stop whose clients take
// a few seconds to close (a reader's fetch in flight) is a clean stop.
const closeGrace = 2 * time.Second

// closeOpened closes what New opened, the stage before the device it runs on: at Run's end,
// and when New fails after opening some of it (what is not open yet is skipped). The stage waits
// for a model build in progress until ctx ends at most (Run: the stop's deadline), the device
// for its GPU calls in flight (a build the stop abandoned) as long. The device's error is not
// returned (the CPU has none; a GPU's is logged by accel). The Kafka clients' close
// is waited for until ctx ends and closeGrace more, then left to end alone.
func (p *Pipeline) closeOpened(ctx context.Context) error {
	defer p.stateLock.Release() // (last: the stage's saves to state_dir are done or abandoned)
	if p.stage != nil {
		p.stage.CloseContext(ctx)
	}
	if p.dev != nil { // (GPU calls of a build the stop abandoned are waited for until ctx ends: accel's close.go)
		p.dev.CloseContext(ctx)
	}
	done := make(chan error, 1)
	go func() {
		var errs []error
		if p.src != nil {
			errs = append(errs, p.src.Close())
		}
		if p.snk != nil {
			errs = append(errs, p.snk.Close())
		}
		done <- errors.Join(append(errs, p.closeRole())...)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		p.log.Warn().Dur("close_grace", closeGrace).Msg("closing the Kafka clients cut past the stop's deadline: writes still being tried are abandoned, not committed (read again after a restart)")
		return fmt.Errorf("pipeline: closing the Kafka clients took over %s past the stop's deadline: abandoned (writes still being tried are not acknowledged, so not committed: read again after a restart)", closeGrace)
	}
}

// confirmAlerts tells the stage, after a clean stop's final commit, the offsets the source
// committed: every batch taken was written and acknowledged, so the alert groups saved at the
// close stand for the records below them (keyScope.stayed). A rebalance the detect goroutine
// did not take (its loop ended with the assignment heard) is taken first (the detect goroutine
// is done): the groups of a partition that was another member's meanwhile would otherwise be
// saved as standing for the offset that member committed.
func (p *Pipeline) confirmAlerts() {
	src, ok := p.src.(interface{ Committed() map[int32]int64 })
	if !ok || p.det == nil {
		return
	}
	if p.scope != nil && p.scope.pending() {
		p.rebalanced()
	}
	p.det.ConfirmAlertsCommitted(src.Committed())
}

// noteJoining makes /readyz say, while the source's consumer group has not assigned it
// anything yet, that it waits for the group (metrics.SetJoining): after a kill -9 the join waits
// for the killed member's session to expire (newuser31).
func (p *Pipeline) noteJoining(in ingest.Config) {
	src, ok := p.src.(interface{ AssignmentHeard() bool })
	if !ok {
		return
	}
	p.metrics.SetJoining(func() string {
		if src.AssignmentHeard() {
			return ""
		}
		return fmt.Sprintf("no partitions assigned yet by consumer group %q: a member that stopped without leaving it (killed, crashed) holds its partitions until its session expires (ingest.session_timeout %s), and this member's join waits for that", in.GroupID, in.SessionTimeout)
	})
}
