package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/stages/detect"
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
	if c.Run.StaleModelAfter < 0 {
		errs = append(errs, config.Fieldf("run.stale_model_after", "must be >= 0, got %s", c.Run.StaleModelAfter))
	}
	return errs
}

// modelTopic is where this pipeline's model topic is.
func (c *Config) modelTopic() modelTopicConfig {
	return modelTopicConfig{brokers: c.Sink.Brokers, topic: c.Run.ModelTopic, security: c.Sink.Security, maxMessageBytes: c.Sink.MaxMessageBytes}
}

// setUpRole prepares the builder's publisher or the scorer's follower (New).
func (p *Pipeline) setUpRole() error {
	var err error
	switch p.role {
	case detect.RoleBuilder:
		if p.pub, err = newModelPublisher(p.cfg.modelTopic(), p.log); err != nil {
			return err
		}
		fallthrough // a builder reads the topic to continue its version sequence
	case detect.RoleScorer:
		if p.follow, err = newModelFollower(p.cfg.modelTopic(), p.cfg.Ingest.Columns(), p.log); err != nil {
			return err
		}
		p.models = make(chan *detect.Model, 1)
	}
	return nil
}

// startRole runs before the stages start (Run): a builder learns the last published version
// (its models continue the sequence, so the scorers take them as newer); a scorer installs the
// newest model at once and then follows the topic on its own goroutine (awaited through done).
func (p *Pipeline) startRole(ctx, work context.Context) (done <-chan struct{}, err error) {
	closed := make(chan struct{})
	if p.role == detect.RoleAll {
		close(closed)
		return closed, nil
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Run.ShutdownTimeout)
	newest, err := p.follow.newest(rctx)
	cancel()
	if err != nil {
		close(closed)
		return closed, fmt.Errorf("pipeline: reading the model topic %q (run.model_topic): %w", p.cfg.Run.ModelTopic, err)
	}
	if p.role == detect.RoleBuilder {
		if newest != nil {
			p.det.ContinueVersions(newest.Version)
			p.log.Info().Uint64("published_version", newest.Version).Msg("builder: the next model continues the published sequence")
		}
		go func() {
			defer close(closed)
			p.pub.run(work)
		}()
		return closed, nil
	}
	if newest != nil {
		if _, _, err := p.det.InstallModel(newest); err != nil {
			close(closed)
			return closed, err
		}
		p.stats.ModelVersion.Store(newest.Version)
		p.log.Info().Uint64("model_version", newest.Version).Time("built_at", newest.BuiltAt).Msg("scorer: serving the newest published model")
	} else {
		p.log.Info().Msg("scorer: no model published yet; records wait for the first (before_model)")
	}
	go func() { // follow: hands every newer model to the detect goroutine
		defer close(closed)
		after := uint64(0)
		if newest != nil {
			after = newest.Version
		}
		for {
			m, _, err := p.follow.next(work, after, -1)
			if err != nil {
				if work.Err() == nil {
					p.log.Warn().Err(err).Msg("model topic read failed; retrying")
					if !backoff(work, 1) {
						return
					}
					continue
				}
				return
			}
			after = m.Version
			select { // a newer model replaces one the detect goroutine has not taken yet
			case <-p.models:
			default:
			}
			p.models <- m
		}
	}()
	return closed, nil
}

// installFollowed installs a model from the topic on the detect goroutine and returns the
// batches held for the first model, now scored.
func (p *Pipeline) installFollowed(m *detect.Model) ([]*batch.Batch, error) {
	ready, ok, err := p.det.InstallModel(m)
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

// closeRole closes the role's clients.
func (p *Pipeline) closeRole() error {
	var errs []error
	if p.pub != nil {
		errs = append(errs, p.pub.Close())
	}
	if p.follow != nil {
		errs = append(errs, p.follow.Close())
	}
	return errors.Join(errs...)
}
