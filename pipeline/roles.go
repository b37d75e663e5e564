package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
)

// Roles (run.role): a builder makes the models of the whole stream and publishes them to the
// model topic (modeltopic.go); scorers follow that topic and score their partitions with the
// newest model. "all" is one process doing both, without a model topic.

// BuilderGroup is the consumer group a builder reads the input topic in: its own, so that it
// reads every partition whatever the scorers hold.
func BuilderGroup(scoringGroup string) string { return scoringGroup + ".builder" }

// validateRole checks run.role and what it needs.
func (c *Config) validateRole() []error {
	role := c.Run.Role
	if !role.Valid() {
		return []error{config.Fieldf("run.role", "must be all, builder or scorer, got %q", role)}
	}
	var errs []error
	if role != detect.RoleAll {
		switch c.Run.ModelTopic {
		case "":
			errs = append(errs, config.Fieldf("run.model_topic", "required with run.role %s", role))
		case c.Ingest.Topic, c.Sink.Topic, c.Sink.DeadLetterTopic:
			errs = append(errs, config.Fieldf("run.model_topic", "%q is also the input, output or dead-letter topic", c.Run.ModelTopic))
		}
	}
	// The derived columns' definitions travel in a header of each message (headerColumns).
	overhead := modelChunkOverhead + columnsHeaderBytes(derivedDefs(c.Ingest))
	if role != detect.RoleAll && c.Sink.MaxMessageBytes-overhead < minModelChunk {
		// The model topic's chunks are max_message_bytes less their framing: leave room for one.
		errs = append(errs, config.Fieldf("sink.max_message_bytes", "%d leaves %d bytes for a model chunk with run.role %s, want at least %d (a chunk of %d plus %d of key, headers and framing)",
			c.Sink.MaxMessageBytes, c.Sink.MaxMessageBytes-overhead, role, minModelChunk+overhead, minModelChunk, overhead))
	}
	if role != detect.RoleAll && c.Detect.KeyBy == detect.KeyByKey {
		// A key's model is one message (modelkeys.go): the largest, of a key of assumedKeyBytes.
		if need := detect.KeyModelBound(c.Ingest.Columns(), &c.Detect, len(keyModelPrefix)+assumedKeyBytes) + overhead; c.Sink.MaxMessageBytes < need {
			errs = append(errs, config.Fieldf("sink.max_message_bytes", "%d cannot carry a key's model with detect.key_by and run.role %s: want at least %d (detect.keys.window %d of %d features, a key of %d bytes)",
				c.Sink.MaxMessageBytes, role, need, c.Detect.Keys.Window, len(c.Ingest.Columns()), assumedKeyBytes))
		}
	}
	if c.Run.KeyPublishInterval < 0 {
		errs = append(errs, config.Fieldf("run.key_publish_interval", "must be >= 0, got %s", c.Run.KeyPublishInterval))
	}
	if c.Run.StaleModelAfter < 0 || c.Run.StaleModelAfter > 0 && c.Run.StaleModelAfter < minStaleModelAfter {
		errs = append(errs, config.Fieldf("run.stale_model_after", "must be 0 (off) or >= %s (shorter than a rebuild, its publication and the scorers' read of it made the scorers unready at every rebuild), got %s",
			minStaleModelAfter, c.Run.StaleModelAfter))
	}
	return errs
}

// modelTopic is where this pipeline's model topic is.
func (c *Config) modelTopic() modelTopicConfig {
	return modelTopicConfig{brokers: c.Sink.Brokers, topic: c.Run.ModelTopic, security: c.Sink.Security, maxMessageBytes: c.Sink.MaxMessageBytes,
		derived: derivedDefs(c.Ingest), publicationBound: detect.PublicationBound(c.Ingest.Columns(), &c.Detect)}
}

// setUpRole prepares the builder's publisher or the scorer's follower (New).
func (p *Pipeline) setUpRole() error {
	var err error
	switch p.role {
	case detect.RoleBuilder:
		if p.pub, err = newModelPublisher(p.cfg.modelTopic(), p.log); err != nil {
			return err
		}
		p.flushModels = make(chan struct{})
		fallthrough // a builder reads the topic to continue its version sequence
	case detect.RoleScorer:
		if p.follow, err = newModelFollower(p.cfg.modelTopic(), p.cfg.Ingest.Columns(), p.log); err != nil {
			return err
		}
		p.models = make(chan *followed, 1)
		if p.metrics != nil {
			p.follow.onRefused = p.metrics.AddModelTopicRefused
		}
	}
	if p.role == detect.RoleAll || p.cfg.Detect.KeyBy != detect.KeyByKey {
		return nil
	}
	// The keys' models (modelkeys.go).
	if p.role == detect.RoleBuilder {
		if p.keyPub, err = newKeyPublisher(p.cfg.modelTopic(), p.cfg.Ingest.Columns(), p.cfg.Detect, p.log); err != nil {
			return err
		}
		p.keyPub.every = p.cfg.Run.KeyPublishInterval
		if p.metrics != nil {
			p.keyPub.onTooLarge = p.metrics.AddKeyModelsTooLarge
			p.keyPub.stale.onPass = p.metrics.AddStalePass
		}
		p.keyPub.stale.dir = p.cfg.Detect.StateDir // (the scan's record: keyscanstate.go)
		p.keysOn0 = newPartition0Keys(p.cfg.Detect.Keys.MaxKeys)
		p.follow.onKey = keyVersionFloor(&p.keyHighest, p.keysOn0)
		return nil
	}
	// A scorer's keys' models are read by their partitions' followers (keyfollow.go), from its
	// first assignment on; the global model's follower passes over them.
	p.keys, p.scope, p.keyQuery = newKeyInbox(), newKeyScope(), make(chan chan map[string]uint64)
	return nil
}

// modelVersionFloor is the version a builder's first model must exceed: the highest version
// of any chunk on the model topic (a publication cut short included), its own serving model's
// (a state_dir snapshot), and the Unix time of now in milliseconds. The clock keeps versions
// growing after the topic was emptied (records deleted, the topic recreated), where nothing
// else remembers them: every earlier version was below the clock of its own start plus the
// models published since, and a builder publishes far fewer than 1,000 models a second (one
// per refresh, each a build of min_records or more). A builder whose clock is behind the
// previous one's by more than that, on an emptied topic, is the case this cannot cover.
func modelVersionFloor(topicHighest, own uint64, now time.Time) uint64 {
	return max(topicHighest, own, uint64(max(now.UnixMilli(), 0)))
}

// readModelTopic is the start-up read of the model topic (the newest usable model, nil when
// none), retried through startRetry.
func (p *Pipeline) readModelTopic(ctx context.Context) (*followed, error) {
	var newest *followed
	err := startRetry(ctx, p.log.With().Str("key", "run.model_topic").Str("topic", p.cfg.Run.ModelTopic).Logger(), topicCheckWait,
		"waiting for the model topic to be readable (its partition's leader, metadata or coordinator not ready yet); retrying",
		func(ctx context.Context) (err error) {
			if newest, err = p.follow.newest(ctx); err != nil {
				p.follow.reset()
			}
			return err
		})
	return newest, err
}

// startRetry runs op, a start-up request, again after what a broker says while it settles
// (a topic created a moment ago: not leader for partition, unknown topic while metadata
// propagates, the coordinator loading; the broker not reachable yet) for at most limit, with
// backoff, logging what it waits for (waiting) at each failure; anything else fails at once.
func startRetry(ctx context.Context, log zerolog.Logger, limit time.Duration, waiting string, op func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), time.Second))
		err := op(octx)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %s (transient errors retried): %w", limit, err)
		}
		log.Warn().Err(err).Int("attempt", attempt).Dur("gives_up_in", time.Until(deadline).Round(time.Second)).Msg(waiting)
		if !backoff(ctx, attempt) {
			return ctx.Err()
		}
	}
}

// startRole runs before the stages start (Run): a builder learns the versions on the topic
// (its models continue above them, so the scorers take them as newer) and the keys to
// tombstone later; a scorer installs the newest model at once and then follows the topic on
// its own goroutine (awaited through done).
func (p *Pipeline) startRole(ctx, work context.Context) (done <-chan struct{}, err error) {
	closed := make(chan struct{})
	if p.role == detect.RoleAll {
		close(closed)
		return closed, nil
	}
	if p.role == detect.RoleBuilder {
		p.follow.asm.live = map[string]uint64{}
	}
	var keysHighest uint64 // the keys' models on the other partitions (keyfollow.go)
	modelParts := 1
	if p.keyPub != nil { // (first: partition 0's read notes its keys only on a topic of several partitions)
		err = startRetry(ctx, p.log.With().Str("key", "run.model_topic").Str("topic", p.cfg.Run.ModelTopic).Logger(), topicCheckWait,
			"waiting for the model topic's partitions to be readable; retrying",
			func(ctx context.Context) (err error) {
				keysHighest, modelParts, err = highestKeyVersion(ctx, p.cfg.modelTopic(), p.follow.dialer)
				return err
			})
		if err != nil {
			close(closed)
			return closed, fmt.Errorf("pipeline: reading the model topic %q (run.model_topic): %w", p.cfg.Run.ModelTopic, err)
		}
		p.keysOn0.track = modelParts > 1
	}
	newest, err := p.readModelTopic(ctx)
	if err != nil {
		close(closed)
		return closed, fmt.Errorf("pipeline: reading the model topic %q (run.model_topic): %w", p.cfg.Run.ModelTopic, err)
	}
	if p.role == detect.RoleBuilder {
		own := p.det.NextVersion() - 1
		floor := modelVersionFloor(p.follow.asm.highest, own, time.Now())
		p.det.ContinueVersions(floor)
		p.pub.setLive(p.follow.asm.live)
		ev := p.log.Info().Uint64("topic_highest_version", p.follow.asm.highest).Uint64("state_version", own).
			Uint64("next_version", p.det.NextVersion()).Int("live_keys", len(p.follow.asm.live))
		if newest != nil {
			ev = ev.Uint64("published_version", newest.model.Version)
		}
		ev.Msg("builder: the next model's version is above every version on the model topic, in state_dir and the clock (ms)")
		var wg sync.WaitGroup
		if p.keyPub != nil {
			p.pub.onPublished = p.keyPub.modelServing
		}
		wg.Go(func() { p.pub.run(work, p.flushModels) })
		if p.keyPub != nil {
			p.keyPub.version = max(p.keyHighest, keysHighest)
			// The keys' models of another configuration (keystale.go): read beside the work,
			// ended by the stop's drain as the publishers are; tombstoned once a global model of
			// this configuration is on the topic.
			if newest != nil {
				p.keyPub.modelServing()
			}
			if src, ok := p.src.(Assigning); ok { // (a builder's own group: it hears nothing else)
				src.OnAssigned(func(a ingest.Assignment) { p.keyPub.assigned(a.Partitions, false) })
			} else {
				p.keyPub.assigned(nil, true)
			}
			scan, endScan := context.WithCancel(work)
			go func() {
				defer endScan()
				select {
				case <-p.flushModels:
				case <-scan.Done():
				}
			}()
			wg.Go(func() { p.keyPub.scanStale(scan, p.follow.dialer, modelParts) })
			if modelParts > 1 { // (beside the publications: those lie on the other partitions)
				v := p.keyPub.version
				wg.Go(func() { p.keyPub.tombstonePartition0(scan, p.follow.dialer, p.keysOn0, v) })
			}
			wg.Go(func() { p.keyPub.run(work, p.flushModels) })
		}
		go func() {
			defer close(closed)
			wg.Wait()
		}()
		return closed, nil
	}
	if newest != nil {
		if _, _, err := p.det.InstallModel(newest.model, newest.hypercube); err != nil {
			close(closed)
			return closed, err
		}
		p.stats.ModelVersion.Store(newest.model.Version)
		p.log.Info().Uint64("model_version", newest.model.Version).Time("built_at", newest.model.BuiltAt).Msg("scorer: serving the newest published model")
	} else {
		p.log.Info().Msg("scorer: no model published yet; records wait for the first (before_model)")
	}
	if p.keys != nil { // the keys' models of the scorer's partitions, from its first assignment on
		if p.keyFollow, err = p.newKeyFollowers(work); err != nil {
			close(closed)
			return closed, err
		}
		p.followAssignments(ctx.Done())
	}
	go func() { // follow: hands every newer model to the detect goroutine
		defer close(closed)
		if p.keyFollow != nil {
			defer p.keyFollow.close()
		}
		after := uint64(0)
		if newest != nil {
			after = newest.model.Version
		}
		p.followModels(work, after)
	}()
	return closed, nil
}

// followModels hands every model newer than after that the model topic brings to the detect
// goroutine (a newer one replaces one it has not taken yet), until work ends; a failed read is
// counted (readFailed), warned of at its pace (failureRun: the first at once, then a line every
// failureLineEvery at most) and retried, the backoff growing with the reads failed in a row (a
// broker that refuses connections fails each at once).
func (p *Pipeline) followModels(work context.Context, after uint64) {
	for {
		m, err := p.follow.next(work, after, -1)
		if err != nil {
			if work.Err() != nil {
				return
			}
			p.readFailed(followerModel)
			if e := p.follow.r.warning(&p.log, err); e != nil {
				e.Msg("model topic read failed; retrying")
			}
			if !backoff(work, max(p.follow.r.failures(), 1)) {
				return
			}
			continue
		}
		after = m.model.Version
		select { // a newer model replaces one the detect goroutine has not taken yet
		case <-p.models:
		default:
		}
		p.models <- m
	}
}

// The followers as outlierd_model_topic_read_failures_total names them.
const (
	followerModel = "model" // the global model's (partition 0)
	followerKeys  = "keys"  // the keys' models' partitions' (detect.key_by: key)
)

// readFailed counts a failed read of the model topic by follower (followerModel, followerKeys):
// Stats.ModelTopicReadFailures and the metric, which count what the paced warnings leave unsaid.
func (p *Pipeline) readFailed(follower string) {
	p.stats.ModelTopicReadFailures.Add(1)
	if p.metrics != nil {
		p.metrics.AddModelTopicReadFailure(follower)
	}
}

// followedTopic is the model topic as the scorer's followers read it: with the broker its
// model follower learnt answers (brokerHint), so that the keys' followers' first attempt asks
// that one first.
func (p *Pipeline) followedTopic() modelTopicConfig {
	cfg := p.cfg.modelTopic()
	if p.follow != nil {
		cfg.answered = p.follow.cfg.answered
	}
	return cfg
}

// installFollowed installs a model from the topic on the detect goroutine and returns the
// batches held for the first model, now scored.
func (p *Pipeline) installFollowed(f *followed) ([]*batch.Batch, error) {
	m := f.model
	ready, ok, err := p.det.InstallModel(m, f.hypercube)
	if err != nil {
		if errors.Is(err, detect.ErrSnapshotMismatch) {
			p.log.Error().Err(err).Uint64("model_version", m.Version).Msg("published model refused")
			return nil, nil
		}
		return nil, err
	}
	if ok {
		p.log.Info().Uint64("model_version", m.Version).Float64("age_s", time.Since(m.BuiltAt).Seconds()).Msg("scorer: newer model serving")
	}
	return ready, nil
}

// holdLimit pauses a scorer's intake while it holds records for its first model
// (before_model: hold): at most detect.window records (the memory a builder's window takes)
// wait, plus the batches in the queues, instead of every record fetched however long the
// builder takes. The held records are neither lost nor committed: they are scored when the
// model comes, or left uncommitted at a stop and read again.
type holdLimit struct {
	scorer bool // false: never pauses (another role)
	paused bool
}

func (p *Pipeline) holdBound() *holdLimit {
	return &holdLimit{scorer: p.role == detect.RoleScorer}
}

// pause says whether the detect loop must take no batch now, logging when that changes. The
// bound is the stage's configuration in force (before_model and window reload live: taken
// from the start's, a scorer reloaded from pass to hold held every record without bound).
func (h *holdLimit) pause(p *Pipeline) bool {
	full := false
	if h.scorer && p.det.Model() == nil {
		c := p.det.Config()
		full = c.BeforeModel == detect.BeforeModelHold && p.det.HeldRecords() >= c.Window
	}
	if full != h.paused {
		h.paused = full
		if full {
			p.log.Warn().Int("held_records", p.det.HeldRecords()).Int("bound", p.det.Config().Window).Str("model_topic", p.cfg.Run.ModelTopic).
				Msg("scorer: holding detect.window records for the first model (before_model: hold); fetching paused until the builder publishes one on run.model_topic")
		} else {
			p.log.Info().Int("held_records", p.det.HeldRecords()).Msg("scorer: fetching resumed")
		}
	}
	return full
}

// leaveDeadBuilders removes the members a previous builder left in the builder's group before
// this one joins. A builder killed without leaving (kill -9, a crash, a lost host) stays a
// member until its session expires (ingest.session_timeout, 30 s by default), and the new
// builder's join waits for it: half a minute with no model. A builder is alone in its group by
// design (it reads every partition), so any member found at start is a dead predecessor, or a
// second builder run by mistake (which then rejoins at once). LeaveGroup by member id is what
// stages/ingest/rejoin.go sends for the members the reader abandons. When the group cannot be
// read or left, it says that the join may wait for the session to expire, and goes on; when
// ctx ends (a stop during the start) it returns at once, saying nothing.
func leaveDeadBuilders(ctx context.Context, cfg Config, log zerolog.Logger) {
	group := BuilderGroup(cfg.Ingest.GroupID)
	log = log.With().Str("group", group).Logger()
	tr := &kafka.Transport{DialTimeout: 5 * time.Second}
	if cfg.Ingest.Security.Enabled() {
		var err error
		if tr, err = cfg.Ingest.Security.Transport(); err != nil {
			log.Warn().Err(err).Msg("builder: cannot check the group for a previous builder's member")
			return
		}
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(cfg.Ingest.Brokers...), Timeout: 5 * time.Second, Transport: tr}
	stop := ctx
	ctx, cancel := context.WithTimeout(ctx, topicCheckWait)
	defer cancel()
	var members []kafka.DescribeGroupsResponseMember
	for attempt := 1; ; attempt++ {
		res, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(res.Groups) == 1 {
			err = res.Groups[0].Error
			members = res.Groups[0].Members
		}
		if err == nil {
			break
		}
		if !transient(err) || !backoff(ctx, attempt) {
			if stop.Err() != nil {
				return
			}
			log.Warn().Err(err).Dur("session_timeout", cfg.Ingest.SessionTimeout).
				Msg("builder: cannot read its group; if a previous builder was killed, the first assignment waits up to ingest.session_timeout for its session to expire")
			return
		}
	}
	if len(members) == 0 {
		return
	}
	req := &kafka.LeaveGroupRequest{GroupID: group}
	for _, m := range members {
		req.Members = append(req.Members, kafka.LeaveGroupRequestMember{ID: m.MemberID})
		log.Info().Str("member", m.MemberID).Str("client_host", m.ClientHost).
			Msg("builder: its group still has a member, left by a previous builder (killed?); removing it so the join need not wait for its session to expire")
	}
	res, err := cl.LeaveGroup(ctx, req)
	if stop.Err() != nil {
		return
	}
	if err == nil {
		err = res.Error
		for _, mr := range res.Members {
			if !errors.Is(mr.Error, kafka.UnknownMemberId) { // gone already: fine
				err = errors.Join(err, mr.Error)
			}
		}
	}
	if err != nil {
		log.Warn().Err(err).Dur("session_timeout", cfg.Ingest.SessionTimeout).
			Msg("builder: could not remove the previous builder's member; the first assignment waits up to ingest.session_timeout for its session to expire")
	}
}

// closeRole closes the role's clients.
func (p *Pipeline) closeRole() error {
	var errs []error
	if p.pub != nil {
		errs = append(errs, p.pub.Close())
	}
	if p.keyPub != nil {
		errs = append(errs, p.keyPub.Close())
	}
	if p.follow != nil {
		errs = append(errs, p.follow.Close())
	}
	return errors.Join(errs...)
}
