package pipeline

import (
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// failureLineEvery is the least time between two warnings of one reader's failed reads
// (failureRun), doubling with the lines of a run up to failureLineMax: while the brokers cannot
// be read a reader warns at 0, 30 s, 1.5, 3.5 and 7.5 min, then every 5 min, where a line at
// every attempt made about 150 a minute over 13 partitions (the followers' backoff reaches
// retryMax, 5 s; 238 lines in a minute's outage of 14 followers, 28 paced: BENCHMARKS §13.2.8).
const (
	failureLineEvery = 30 * time.Second
	failureLineMax   = 5 * time.Minute
)

// failureRun is one reader's failed reads in a row (a run: from a failure to the next answer)
// and the pacing of their warnings. A failure warns at once where none of the reader's
// failures was warned within failureLineEvery (a run's first, after a quiet spell), or, later in
// a run, within that doubled for each line of the run past its first (at most failureLineMax);
// else it is counted and the next line says it (failed_since_last_line, beside that line's own
// error); the answer that ends a run whose failures were warned logs once (info) how many reads
// failed and for how long. A reader that fails and recovers by turns (a broker that answers one
// request in two) logs at most a warning and a recovery every failureLineEvery.
// outlierd_model_topic_read_failures_total counts every failure of the scorer's followers.
type failureRun struct {
	n      int       // reads failed in a row (0: none): the backoff's attempt
	began  time.Time // the run's first failure
	said   time.Time // the last warning's (zero: none yet)
	unsaid int       // failures not warned since that warning
	lines  int       // warnings of this run (0: none, and then it was not warned)
}

// fail counts a failed read at now.
func (f *failureRun) fail(now time.Time) {
	if f.n == 0 {
		f.began, f.lines = now, 0
	}
	f.n++
	f.unsaid++
}

// warning is the event to log the failed read just counted (fail) on, at now: warn, with err,
// the reads failed in a row (failed_reads), those since the last line, this one included
// (failed_since_last_line) and how long the run has lasted; nil where a failure of the reader
// was warned within the gap (failureLineEvery, doubled for each line of the run past its
// first, at most failureLineMax): the next line says this one.
func (f *failureRun) warning(log *zerolog.Logger, err error, now time.Time) *zerolog.Event {
	gap := min(failureLineEvery<<min(max(f.lines-1, 0), 8), failureLineMax)
	if !f.said.IsZero() && now.Sub(f.said) < gap {
		return nil
	}
	e := log.Warn().Err(err).Int("failed_reads", f.n).Int("failed_since_last_line", f.unsaid).Dur("failing_for", now.Sub(f.began))
	f.said, f.unsaid = now, 0
	f.lines++
	return e
}

// answered ends the run, a read answered at now: the event to log that on (info, the run's
// failed reads and how long they lasted) where a failure of the run was warned; else nil (no
// run, or its failures said by the next warning).
func (f *failureRun) answered(log *zerolog.Logger, now time.Time) *zerolog.Event {
	n, began, warned := f.n, f.began, f.lines > 0
	f.n, f.lines = 0, 0
	if n == 0 || !warned {
		return nil
	}
	return log.Info().Int("failed_reads", n).Dur("failing_for", now.Sub(began))
}

// brokerHint is the index in a topic's brokers (modelTopicConfig.brokers) of the broker that
// answered last (a partition's leader found through it, the topic's partitions read): the
// readers that share it ask that one first. A scorer's model follower and keys' followers share
// one (modelFollower's), so that a silent broker before the one that answers (a host
// blackholed) costs brokerAttemptWait once, where each follower's first attempt, and each
// exchange of it (the partition count, the offsets, the dial), paid it again
// (TestFollowersRedialPastASilentFirstBroker). Safe for concurrent use; a nil hint starts at
// the first broker and remembers nothing.
type brokerHint struct{ at atomic.Int64 }

// first is the index to ask first.
func (h *brokerHint) first() int {
	if h == nil {
		return 0
	}
	return int(h.at.Load())
}

// answered remembers that the broker of index i answered.
func (h *brokerHint) answered(i int) {
	if h != nil {
		h.at.Store(int64(i))
	}
}
