package pipeline

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// Model versions and the clock (sec26; docs/OPERATIONS.md "Security").
//
// A scorer serves the highest version it has read, of the global model and of each key's: a
// version is a promise that nothing before it is newer. So one message of version 2^64-1
// (a hostile writer's, or a corrupted header with a snapshot to match) outranked every model to
// come, for good, and a builder that continued above the topic's highest version wrapped to 0.
//
// The rule: a version is its builder's clock in milliseconds at the build, or one above its
// previous version when that is more (detect's buildVersion for the global model; the keys'
// publications likewise, modelkeys.go), and never below the topic's highest at the builder's
// start (modelVersionFloor). A reader refuses a version more than maxVersionAhead ahead of its
// own clock: a scorer does not serve it (counted as version_ahead), a builder does not continue
// above it and tombstones its chunks after its next publication. A version within the bound
// (a hostile one included) is passed by the builder's own, which follow its clock, within the
// bound: it cannot win for longer. What a builder restarted without its state does: it reads the
// topic's highest version (below the bound) and continues above it and above its clock, as
// before; from a lower number it never starts, so no legitimate sequence is refused. The bound
// is what the hosts' clocks may differ by: a builder whose clock runs more than an hour ahead
// of a scorer's has its models refused there until the scorer's clock reaches them.
const (
	maxVersionAhead = time.Hour
	// refusedVersionAhead is outlierd_model_topic_refused_total's reason for such a version.
	refusedVersionAhead = "version_ahead"
)

// versionAhead says whether version v is further ahead of now than maxVersionAhead.
func versionAhead(v uint64, now time.Time) bool {
	return v > uint64(max(now.Add(maxVersionAhead).UnixMilli(), 0))
}

// errVersionAhead says that v is refused at now.
func errVersionAhead(v uint64, now time.Time) error {
	return fmt.Errorf("model version %d is more than %s ahead of this clock (%d ms): a version is its builder's clock in ms, so none is that far ahead", v, maxVersionAhead, now.UnixMilli())
}

// ahead refuses a key model message msg of version v ahead of now: counted (metrics) and logged
// at most once a minute (keySkips is shared by a reader's decoders).
func (p *Pipeline) keyAhead(skips *keySkips, msg kafka.Message, v uint64, now time.Time) {
	if p.metrics != nil {
		p.metrics.AddModelTopicRefused(refusedVersionAhead)
	}
	skips.mu.Lock()
	defer skips.mu.Unlock()
	skips.refusals.say(skips.log, refusedVersionAhead, msg, errVersionAhead(v, now))
}

// ownVersionAhead warns (once a minute at most) when a builder published version v more than
// maxVersionAhead ahead of its own clock at now: every scorer whose clock agrees with it refuses
// the model. A builder comes to that when its clock was that far ahead and was set back: it
// numbers above the last version it built, in memory and from its state_dir snapshot, until its
// clock reaches it (TestBuilderWarnsOfItsOwnVersionAhead).
func (p *modelPublisher) ownVersionAhead(v uint64, now time.Time) {
	warnOwnVersionAhead(p.log, &p.ahead, "model", v, now)
}

// ownVersionAhead is the keys' publisher's warning of the same: its publications number above
// the previous one as the global model's do (TestKeyPublisherWarnsOfItsOwnVersionAhead).
func (p *keyPublisher) ownVersionAhead(v uint64, now time.Time) {
	warnOwnVersionAhead(p.log, &p.ahead, "keys' models", v, now)
}

// warnOwnVersionAhead is a publisher's warning (paced by ahead) that what it published, version
// v, is more than maxVersionAhead ahead of its clock at now.
func warnOwnVersionAhead(log zerolog.Logger, ahead *refusalLog, what string, v uint64, now time.Time) {
	if !versionAhead(v, now) {
		return
	}
	if unsaid, ok := ahead.due(refusedVersionAhead); ok {
		log.Warn().Uint64("model_version", v).Int64("ahead_ms", int64(v-uint64(max(now.UnixMilli(), 0)))).Int("unlogged", unsaid).
			Msg(what + " published with a version more than an hour ahead of this clock: every scorer whose clock agrees refuses it " +
				"(outlierd_model_topic_refused_total{reason=\"version_ahead\"}) until this clock reaches it. This builder's clock was set back, " +
				"and it numbers above the last version it built: restart it with detect.state_dir's model-*.osnap files removed, and the scorers set back with it (docs/OPERATIONS.md, Builder and scorers)")
	}
}
