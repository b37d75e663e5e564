package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// The Source's commit path: Commit (the pipeline's ticker and final commit), commitRevoked
// (the group fetcher's call at a generation's end, fetch.go), and what both go through: one
// request at a time (sending), with the generation that holds the partitions, of the offsets
// that moved since the last commit.

// Commit commits to the group, for each partition, the offset below which every record is
// done (Checkpointer.Committable), skipping partitions whose offset has not moved since the
// last successful commit. It commits with the generation in progress, waiting for one while
// the group rebalances, tries up to commitAttempts times (as kafka-go's Reader did), blocks
// until the broker acknowledged the commit or ctx ends, and returns what was committed (nil
// when nothing moved, or when another commit path sent it first). Once ctx ends no further
// attempt starts. Safe to call concurrently with Next.
func (s *Source) Commit(ctx context.Context) (map[int]int64, error) {
	s.commitMu.Lock()
	moved := len(s.moved()) > 0
	s.commitMu.Unlock()
	if !moved {
		return nil, nil
	}
	gen, err := s.fetch.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: commit: %w", err)
	}
	type result struct {
		sent map[int]int64
		err  error
	}
	res := make(chan result, 1)
	// The attempts end with ctx or with Close; a request already sent ends by itself (the
	// coordinator's timeout), so ctx need not wait for it.
	actx, stop := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(s.fetch.stctx, stop)
	s.commits.Add(1)
	go func() {
		defer s.commits.Done()
		defer stop()
		defer stopOnClose()
		sent, err := s.commitWith(actx, gen, commitAttempts)
		res <- result{sent, err}
	}()
	select {
	case r := <-res:
		return r.sent, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("ingest: commit: %w", ctx.Err())
	}
}

// commitRevoked commits what is done with a generation that just ended (its partitions may go
// to other members, which start from the committed offsets). One attempt: the next generation
// waits for it, and a failure costs only re-reads.
func (s *Source) commitRevoked(gen *kafka.Generation) {
	if sent, err := s.commitWith(s.fetch.stctx, gen, 1); err != nil {
		s.log.Warn().Err(err).Int32("generation", gen.ID).Msg("commit at the end of a generation failed; the partitions' next owners may read some done records again")
	} else if len(sent) > 0 {
		s.log.Info().Int32("generation", gen.ID).Interface("committed", sent).Msg("generation ended (rebalance): done offsets committed")
	}
}

// commitWith commits the offsets that moved with gen, in up to attempts tries, each sending
// the offsets done at its start; ctx ends the waits (for a request in flight, the back-off).
func (s *Source) commitWith(ctx context.Context, gen *kafka.Generation, attempts int) (map[int]int64, error) {
	var (
		tried map[int]int64
		err   error
	)
	for a := range attempts {
		if a > 0 && !sleepCtx(ctx, backoffDelay(a, commitBackoffMin, commitBackoffMax)) {
			break // the caller gave up, or closing: no more tries
		}
		var sent map[int]int64
		if sent, err = s.commitOnce(ctx, gen); err == nil {
			return sent, nil
		}
		if errors.Is(err, errGenerationEnded) { // the next attempt with the generation now running
			next, cerr := s.fetch.current(ctx)
			if cerr != nil {
				err = cerr
				break
			}
			gen = next
		}
		if sent != nil {
			tried = sent
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("ingest: commit offsets %v: %w", tried, err)
}

// errGenerationEnded is a commit attempt's generation that a later one replaced.
var errGenerationEnded = errors.New("the generation ended and a later one started")

// commitOnce sends one commit request of the offsets that moved, after the request in flight
// (if any) was answered; nil offsets when nothing is left to commit.
func (s *Source) commitOnce(ctx context.Context, gen *kafka.Generation) (map[int]int64, error) {
	select {
	case s.sending <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sending }()
	s.commitMu.Lock()
	// gen judges which partitions are this member's only until a later generation starts (the
	// lock keeps one from starting meanwhile): a Commit that took gen before a rebalance would
	// otherwise revoke the partitions the next generation added, with records of theirs in
	// flight, and a later commit would go past those
	// (TestCommitWithEndedGenerationKeepsNewPartitions).
	s.fetch.mu.Lock()
	later := s.fetch.gen != nil && s.fetch.gen != gen
	var sent map[int]int64
	if !later {
		sent = s.moved()
		s.keepAssigned(gen, sent)
	}
	s.fetch.mu.Unlock()
	epoch := s.commitEpoch
	s.commitMu.Unlock()
	if later {
		return nil, fmt.Errorf("generation %d: %w", gen.ID, errGenerationEnded)
	}
	if len(sent) == 0 {
		return nil, nil
	}
	// Committable is the next offset to read: what the group stores.
	if err := gen.CommitOffsets(map[string]map[int]int64{s.cfg.Topic: sent}); err != nil {
		return sent, err
	}
	s.commitMu.Lock()
	if s.commitEpoch == epoch { // else what it reflects was dropped meanwhile (newGeneration)
		for p, off := range sent {
			s.committed[p] = off
		}
	}
	s.commitMu.Unlock()
	return sent, nil
}

// keepAssigned leaves out of sent the partitions gen does not hold, and stops tracking them.
// Batches taken before a rebalance finish after it, those of partitions now another member's
// too: committing them would move the group's offset back behind the new owner's (it read on
// from the offset committed at the generation's end), and on an idle partition it would stay
// there (TestSourceNoBackwardCommit; seen in CI as TestBuilderAndScorersRealBroker's group
// never committing its last records). Their late acks are ignored; the new owner has read, or
// will read again, everything past the committed offset. commitMu must be held.
func (s *Source) keepAssigned(gen *kafka.Generation, sent map[int]int64) {
	held := map[int]bool{}
	for _, a := range gen.Assignments[s.cfg.Topic] {
		held[a.ID] = true
	}
	for p := range sent {
		if !held[p] {
			delete(sent, p)
			s.cp.Revoke(p)
			delete(s.committed, p)
			s.log.Info().Int("partition", p).Int32("generation", gen.ID).
				Msg("partition moved to another member: its records still in flight here will not be committed by this member")
		}
	}
}

// moved is the committable offset of each partition that moved since its last commit; nil if
// none did. commitMu must be held.
func (s *Source) moved() map[int]int64 {
	var sent map[int]int64
	for p, off := range s.cp.Committable() {
		if last, ok := s.committed[p]; ok && last == off {
			continue
		}
		if sent == nil {
			sent = map[int]int64{}
		}
		sent[p] = off
	}
	return sent
}
