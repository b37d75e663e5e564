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
			sent, err := p.src.Commit(work)
			if err == nil && len(sent) == 0 {
				continue // nothing done since the last commit: none was sent, none is counted
			}
			if work.Err() == nil {
				p.metrics.CommitDone(err)
			}
			switch {
			case err == nil:
				p.stats.Commits.Add(1)
			case work.Err() == nil:
				p.log.Warn().Err(err).Msg("offset commit failed; retrying at the next interval")
			} // (else cut by the stop: no commit, and nothing to retry)
		}
	}
}

// finalCommit commits, once the stages drained cleanly, every offset acknowledged, and then
// confirms the alert groups. The hard stop bounds it (work ends then: shutdown_timeout bounds
// the whole stop, the drain and this commit; TestLoopsFinalCommitEndsAtHardStop), and so does
// shutdown_timeout of its own.
func (p *Pipeline) finalCommit(work context.Context) error {
	final, cancel := context.WithTimeout(work, p.cfg.Run.ShutdownTimeout)
	defer cancel()
	c, err := p.src.Commit(final)
	if err != nil {
		if cause := context.Cause(work); cause != nil {
			err = cause // the hard stop cut it
		}
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
