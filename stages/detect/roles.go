package detect

import (
	"fmt"
	"slices"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// Role is the stage's part in a deployment of several processes (run.role; docs/OPERATIONS.md
// "Builder and scorers"): one builder makes the models of the whole stream, many scorers score
// their partitions with them.
type Role int

const (
	// RoleAll keeps a window, builds models from it and scores with them: one process does
	// everything (the default).
	RoleAll Role = iota
	// RoleBuilder keeps the window and builds models but scores nothing: Process returns each
	// batch unscored at once, and the models are published by whoever watches Deps.OnModel.
	RoleBuilder
	// RoleScorer keeps no window and builds nothing: models arrive through InstallModel, and
	// Process scores with the newest (holding or passing records before the first, as
	// before_model says).
	RoleScorer
)

// ParseRole reads run.role.
func ParseRole(s string) (Role, error) {
	switch s {
	case "all", "":
		return RoleAll, nil
	case "builder":
		return RoleBuilder, nil
	case "scorer":
		return RoleScorer, nil
	}
	return RoleAll, fmt.Errorf("role must be all, builder or scorer, got %q", s)
}

func (r Role) String() string {
	return [...]string{"all", "builder", "scorer"}[r]
}

// ContinueVersions makes the next model the stage builds version v+1 (a builder that follows
// another keeps the published sequence going). It has no effect once a model serves.
func (s *Stage) ContinueVersions(v uint64) {
	if s.model == nil && v > s.builds.version {
		s.builds.version = v
	}
}

// processScorer scores b with the installed model, or holds/passes it before the first one.
func (s *Stage) processScorer(b *batch.Batch) ([]*batch.Batch, error) {
	if s.model == nil {
		return s.beforeModel(b), nil
	}
	if err := s.score(b); err != nil {
		return nil, err
	}
	return []*batch.Batch{b}, nil
}

// InstallModel makes m, a model built elsewhere (a builder's), serve from the next record on,
// when it is newer than the one serving, and returns the batches held for the first model,
// now scored. A model for other features is refused; an older or equal version is ignored
// (ok false), so a replayed model topic never moves a scorer back.
func (s *Stage) InstallModel(m *Model) (ready []*batch.Batch, ok bool, err error) {
	if !slices.Equal(m.Features, s.features) {
		return nil, false, fmt.Errorf("%w: built for features %v, the stream has %v", ErrSnapshotMismatch, m.Features, s.features)
	}
	if s.model != nil && m.Version <= s.model.Version {
		return nil, false, nil
	}
	if err := s.install(m); err != nil {
		return nil, false, err
	}
	ready = s.held
	s.held = nil
	for _, b := range ready {
		if err := s.score(b); err != nil {
			return nil, true, err
		}
	}
	return ready, true, nil
}
