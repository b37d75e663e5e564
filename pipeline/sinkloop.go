package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// The sink goroutine: the last owner of every batch and the only writer of outputs and dead
// letters. An item is acked (batch.Batch.Ack, batch.DeadLetters.Ack: its offsets may then be
// committed) only after the broker acknowledged what it wrote, then released; an item whose
// write failed, or that the hard stop abandoned, is released without its ack, so it is read
// again after a restart (at-least-once).

// sinkLoop writes every item until in is closed or work ends, run.sink_writers items at once
// (each write waits for the broker's acknowledgement; the checkpoint takes acks in any order). A
// write that fails transiently is tried again until it succeeds (retry.go); only then is the
// item acked. The first write that fails for good stops the other writers (what they hold is
// abandoned, never acked) and is returned.
func (p *Pipeline) sinkLoop(work context.Context, in <-chan item) error {
	writers := max(1, p.cfg.Run.SinkWriters)
	ctx, stop := context.WithCancel(work)
	defer stop()
	errs := make(chan error, writers)
	for range writers {
		go func() {
			err := p.sinkWrites(ctx, in)
			if err != nil {
				stop()
			}
			errs <- err
		}()
	}
	var first error
	for range writers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// sinkWrites is one writer of sinkLoop.
func (p *Pipeline) sinkWrites(work context.Context, in <-chan item) error {
	for {
		select {
		case <-work.Done():
			return nil
		case it, ok := <-in:
			if !ok {
				return nil
			}
			if err := p.sinkItem(work, it); err != nil {
				return err
			}
		}
	}
}

// sinkItem writes one item, acks it when the broker acknowledged it, and releases it.
func (p *Pipeline) sinkItem(work context.Context, it item) error {
	defer it.release()
	if dl := it.dl; dl != nil {
		err := p.retry(work, writeDeadLetters, func() error { return p.snk.WriteDeadLetters(work, dl.Letters) })
		if err != nil {
			if work.Err() != nil {
				return nil // the hard stop: abandoned, never acked
			}
			return fmt.Errorf("pipeline: dead-letter topic: %w", err)
		}
		dl.Ack()
		p.stats.DeadLetters.Add(int64(dl.Len()))
		p.metrics.AddDeadLetters(dl.Len())
		p.noteDeadLetters(dl.Letters)
		return nil
	}
	b := it.b
	start := time.Now()
	err := p.retry(work, writeOutputs, func() error { return p.snk.Write(work, b) })
	if err != nil {
		if work.Err() != nil {
			return nil
		}
		return fmt.Errorf("pipeline: sink: %w", err)
	}
	// Encoding and producing until acknowledged, retries included.
	p.metrics.ObserveBatch(metrics.StageSink, time.Since(start))
	p.acked(b)
	return nil
}

// builderAckLoop is a builder's sink goroutine: it writes nothing, so a batch is done once it
// is in the window (it left the detect stage) and dead letters at once (the scorers, which read
// the same messages, write them). It runs until in is closed.
func (p *Pipeline) builderAckLoop(in <-chan item) {
	for it := range in {
		if it.dl != nil {
			it.dl.Ack()
		} else {
			// No output was written: the batch counts in the run's stats (the stop's log
			// line), not in outlierd_records_out_total, which the alert OutlierdStalled and
			// the dashboard's shares sum over every process (before operator29 a builder
			// counted the whole stream there: TestBuilderCountsNoOutputs).
			it.b.Ack()
			p.stats.RecordsOut.Add(int64(it.b.Len()))
		}
		it.release()
	}
}

// acked acks b and counts it.
func (p *Pipeline) acked(b *batch.Batch) {
	b.Ack()
	var flagged, density, distance, hypercube int
	for i := range b.Scores {
		s := &b.Scores[i]
		if s.Outlier {
			flagged++
		}
		if s.DensityOutlier {
			density++
		}
		if s.DistanceOutlier {
			distance++
		}
		if s.Hypercube != nil && s.Hypercube.Outlier {
			hypercube++
		}
	}
	p.stats.RecordsOut.Add(int64(b.Len()))
	p.stats.Flagged.Add(int64(flagged))
	p.metrics.AddRecordsOut(b.Len(), flagged)
	p.metrics.AddDetectorOutliers(density, distance, hypercube)
	if p.cfg.HTTP.Enabled() { // the live view at / (pipeline/metrics/live.go)
		p.metrics.OfferBatch(b, flagged)
	}
}

// pacedLogs spaces log lines that would otherwise come with every batch.
type pacedLogs struct {
	// waitLogged is when noteWaiting last logged, waitLogs how often (detect goroutine only).
	waitLogged time.Time
	waitLogs   int
	// The dead letters' line (noteDeadLetters, from every sink writer): when it was last
	// written, and the dead letters written since.
	deadMu     sync.Mutex
	deadLogged time.Time
	deadSince  int
	// The keys evicted cold (noteKeys, detect goroutine only): when the line was last written,
	// and the count it was written at.
	coldLogged time.Time
	coldAt     uint64
	// now is the cold evictions' clock (nil: time.Now; the tests' own, to pass a minute).
	now func() time.Time
}

// deadLetterLogEvery spaces the dead letters' log lines.
const deadLetterLogEvery = 10 * time.Second

// noteDeadLetters logs dead letters the sink wrote: at the first, then at most once per
// deadLetterLogEvery, with how many were written since the last line and the latest one's
// source and reason (each one's reason is on the dead-letter topic). Without it a stream of
// nothing but dead letters (a producer whose field names are not ingest.features) left the log
// at "holding 0 of detect.min_records" with no word of why.
func (p *Pipeline) noteDeadLetters(dls []batch.DeadLetter) {
	if len(dls) == 0 {
		return
	}
	w := &p.paced
	w.deadMu.Lock()
	defer w.deadMu.Unlock()
	w.deadSince += len(dls)
	now := time.Now()
	if !w.deadLogged.IsZero() && now.Sub(w.deadLogged) < deadLetterLogEvery {
		return
	}
	d := &dls[len(dls)-1]
	p.log.Warn().Int("dead_letters", w.deadSince).Str("topic", p.cfg.Sink.DeadLetterTopic).
		Str("latest", fmt.Sprintf("%s/%d/%d", d.Topic, d.Partition, d.Offset)).Str("reason", d.Reason).
		Msg("input records that cannot be decoded went to the dead-letter topic")
	w.deadLogged, w.deadSince = now, 0
}
