package pipeline

import (
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/detect"
)

// keySkipLogEvery bounds how often a reader of the keys' models logs the models it skips as
// built for another configuration (keySkips).
const keySkipLogEvery = time.Minute

// keySkips logs the key model messages a scorer's reader skips. One built for another
// configuration (detect.ErrSnapshotMismatch: other features, their order, or other keys'
// settings) is what every key's model on the topic is after ingest.features changed, until the
// builder publishes the key again (a key it does not see again: until its tombstone, written
// once the builder's first model is out, keystale.go, is compacted): the first of a reader is
// logged in full, the others counted into one line per keySkipLogEvery at most,
// and flush logs what is counted and not logged yet (at the end of a restore). Any other skip
// (a message that does not decode, a key's model under another key) is logged each: those are
// rare, and each one is news. Safe for the reader's decoders' goroutines.
type keySkips struct {
	log zerolog.Logger
	now func() time.Time // nil: time.Now (the tests' own, to pass a minute)

	mu       sync.Mutex
	logged   time.Time  // when the last mismatch line was written (zero: none yet)
	unlogged int        // mismatches since it
	total    int        // mismatches in all
	last     error      // the newest mismatch
	refusals refusalLog // versions ahead of the clock (keyAhead), and the lines of corrupt messages (skip)
}

func (s *keySkips) skip(msg kafka.Message, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !errors.Is(err, detect.ErrSnapshotMismatch) { // (corrupt: the first of each minute, refusalLog)
		if unsaid, ok := s.refusals.due(skippedLine); ok {
			s.log.Warn().Err(err).Int("partition", msg.Partition).Int64("offset", msg.Offset).Str("key", loggedKey(msg.Key)).Int("skipped_unlogged", unsaid).
				Msg("model topic message skipped (at most one such line a minute, skipped_unlogged the others since)")
		}
		return
	}
	s.total++
	s.last = err
	now := s.clock()
	if !s.logged.IsZero() && now.Sub(s.logged) < keySkipLogEvery {
		s.unlogged++
		return
	}
	first, n := s.logged.IsZero(), s.unlogged+1 // (this one and those counted since the last line)
	s.logged, s.unlogged = now, 0
	if first {
		s.log.Warn().Err(err).Int("partition", msg.Partition).Int64("offset", msg.Offset).Str("key", string(msg.Key)).
			Msg("model topic message skipped: a key's model built for another configuration (the key is scored by the global model until the builder publishes it again); the reader's further ones are counted, a line a minute at most")
		return
	}
	s.mismatchLine(n)
}

// flush logs the mismatches counted and not logged yet, if any.
func (s *keySkips) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unlogged > 0 {
		s.mismatchLine(s.unlogged)
		s.logged, s.unlogged = s.clock(), 0
	}
}

func (s *keySkips) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *keySkips) mismatchLine(n int) {
	s.log.Warn().Err(s.last).Int("skipped", n).Int("skipped_total", s.total).
		Msg("keys' models on the model topic skipped: built for another configuration (the keys are scored by the global model until the builder publishes them again)")
}
