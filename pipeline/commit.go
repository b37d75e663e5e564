package pipeline

import (
	"context"
	"fmt"
	"time"
)

// The offset commits: Run's commit goroutine commits the acked offsets every run.commit_interval
// until work ends, and after a drain that no failure or hard stop cut short, what the last
// batches acked is committed once more before Run returns.

// commitLoop commits the acked offsets every run.commit_interval until work ends; a failed
// commit is logged and tried again at the next tick.
func (p *Pipeline) commitLoop(work context.Context) {
	t := time.NewTicker(p.cfg.Run.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-work.Done():
			return
		case <-t.C:
			_, err := p.src.Commit(work)
			if work.Err() == nil {
				p.metrics.CommitDone(err)
			}
			if err != nil && work.Err() == nil {
				p.log.Warn().Err(err).Msg("offset commit failed; retrying at the next interval")
			} else {
				p.stats.Commits.Add(1)
			}
		}
	}
}

// finalCommit commits what every stage has finished with (everything written was acknowledged)
// before Run leaves, bounded by run.shutdown_timeout as the hard stop is; once committed, the
// alerts are confirmed (confirmAlerts). Run calls it only while work has not ended (no stage
// failed, no hard stop).
func (p *Pipeline) finalCommit() error {
	final, cancel := context.WithTimeout(context.Background(), p.cfg.Run.ShutdownTimeout)
	defer cancel()
	c, err := p.src.Commit(final)
	if err != nil {
		return fmt.Errorf("pipeline: final commit: %w", err)
	}
	if len(c) == 0 {
		p.log.Info().Msg("final commit: nothing new (every done offset was committed before)")
	} else {
		p.log.Info().Interface("committed", c).Msg("final offsets committed (partition: next offset)")
	}
	p.confirmAlerts() // (no stage failed: work would have ended)
	return nil
}
