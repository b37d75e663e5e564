package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// What a scorer (or a builder's start-up read) refuses of the model topic beyond a message that
// does not fit the protocol (modeltopic.go): what anyone with Write on the topic could send to
// grow its memory or to outrank every model to come (docs/OPERATIONS.md "Security"). Each is
// counted (outlierd_model_topic_refused_total{reason}) and logged with the topic, partition
// and offset, at most once a minute for each reason (refusalLog).
const (
	// refusedTooLarge: a publication past detect.PublicationBound of the configuration in force
	// (its chunks so far dropped, the rest passed over).
	refusedTooLarge = "too_large"
	// refusedIncomplete: a publication pending when another started (a builder killed mid-
	// publication, or a writer starting publications it never ends): one is held at a time.
	refusedIncomplete = "incomplete"
)

// errPublicationTooLarge is what a publication refused as too large is refused with.
var errPublicationTooLarge = errors.New("larger than any model of this configuration (detect.window, density.clusters, proclus.k, score.sample, hypercube.bins and the features bound it)")

// refuse tells a.refused, if set.
func (a *modelAssembler) refuse(reason string, m kafka.Message, err error) {
	if a.refused != nil {
		a.refused(reason, m, err)
	}
}

// tooLarge refuses the publication m is a chunk of, which would hold size bytes with m: what it
// holds is dropped and its other chunks are passed over. The refusal is told through refused
// (counted and logged there), not as add's error.
func (a *modelAssembler) tooLarge(m kafka.Message, size int) {
	a.refuse(refusedTooLarge, m, fmt.Errorf("model version %d: publication of %d chunks refused at chunk %d, %d bytes or more, over the bound of %d: %w",
		a.version, a.n, a.next, size, a.bound, errPublicationTooLarge))
	a.skipV, a.skipSum = a.version, a.sum
	a.version, a.n, a.next, a.sum, a.data = 0, 0, 0, "", nil
}

// start is the storage of a publication of n chunks starting with first (at most the bound):
// room for n chunks of first's size (the last one is shorter) when that fits the bound; else
// (n is the writer's word: n times first's size may be past any int, and a builder's chunks
// but the last are all of one size, so such a count is no builder's) room for two, grown by
// doubling up to the bound as chunks come (grow): a message of a few bytes does not cost the
// whole bound (TestModelAssemblerStartsSmall).
func (a *modelAssembler) start(first []byte, n int) []byte {
	if a.bound <= 0 {
		return append([]byte(nil), first...)
	}
	c := min(2*len(first), a.bound)
	if len(first) > 0 && n <= a.bound/len(first) {
		c = max(n, 1) * len(first)
	}
	data := make([]byte, len(first), c)
	copy(data, first)
	return data
}

// grow appends v to the publication held, growing its storage to the bound at most.
func (a *modelAssembler) grow(v []byte) []byte {
	if a.bound <= 0 || len(a.data)+len(v) <= cap(a.data) {
		return append(a.data, v...)
	}
	data := make([]byte, len(a.data), min(max(2*cap(a.data), len(a.data)+len(v)), a.bound))
	copy(data, a.data)
	return append(data, v...)
}

// refusalLog logs refusals at most once per refusalLogEvery for each reason, saying how many
// were not logged since.
type refusalLog struct {
	last   map[string]time.Time
	unsaid map[string]int
	now    func() time.Time // (tests)
}

// refusalLogEvery is the least time between two logs of one reason's refusals.
const refusalLogEvery = time.Minute

// say logs a refusal for reason of message m, unless one was logged within refusalLogEvery.
func (l *refusalLog) say(log zerolog.Logger, reason string, m kafka.Message, err error) bool {
	unsaid, ok := l.due(reason)
	if !ok {
		return false
	}
	log.Warn().Err(err).Str("reason", reason).Str("topic", m.Topic).Int("partition", m.Partition).Int64("offset", m.Offset).
		Int("refused_unlogged", unsaid).
		Msg("model topic: refused (outlierd_model_topic_refused_total; at most one such line a minute per reason, refused_unlogged the others since)")
	return true
}

// due says whether a line for reason is due now (none was within refusalLogEvery), and how
// many of its reason were not logged since the last line; one not due is counted.
func (l *refusalLog) due(reason string) (unsaid int, ok bool) {
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	if l.last == nil {
		l.last, l.unsaid = map[string]time.Time{}, map[string]int{}
	}
	t := now()
	if last, ok := l.last[reason]; ok && t.Sub(last) < refusalLogEvery {
		l.unsaid[reason]++
		return 0, false
	}
	unsaid, l.last[reason], l.unsaid[reason] = l.unsaid[reason], t, 0
	return unsaid, true
}

// skippedLine is the reason under which refusalLog paces the lines of messages skipped as not
// fitting the protocol (corrupt, out of sequence, for another stream): anyone with Write on the
// model topic can send them as fast as the brokers take them, and a line each (with the key, as
// long as its writer made it) grew the reader's log as fast.
const skippedLine = "skipped"

// maxLoggedKey is how much of a skipped message's key a line shows.
const maxLoggedKey = 256

// loggedKey is a message key as a log line shows it: at most maxLoggedKey bytes.
func loggedKey(k []byte) string {
	if len(k) > maxLoggedKey {
		return string(k[:maxLoggedKey]) + "…"
	}
	return string(k)
}
