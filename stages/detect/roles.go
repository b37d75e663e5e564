package detect

import (
	"fmt"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/outlierd/outlierd/internal/algo/hypercube"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
)

// Role is the stage's part in a deployment of several processes (run.role; docs/OPERATIONS.md
// "Builder and scorers"): one builder makes the models of the whole stream, many scorers score
// their partitions with them. The words are run.role's, decoded once when the YAML is loaded;
// Deps.Role left empty is RoleAll.
type Role string

const (
	// RoleAll keeps a window, builds models from it and scores with them: one process does
	// everything (the default).
	RoleAll Role = "all"
	// RoleBuilder keeps the window and builds models but scores nothing: Process returns each
	// batch unscored at once, and the models are published by whoever watches Deps.OnModel.
	RoleBuilder Role = "builder"
	// RoleScorer keeps no window and builds nothing: models arrive through InstallModel, and
	// Process scores with the newest (holding or passing records before the first, as
	// before_model says).
	RoleScorer Role = "scorer"
)

// UnmarshalYAML decodes run.role; an empty word is all (as the key left out).
func (r *Role) UnmarshalYAML(n *yaml.Node) error {
	if err := config.DecodeEnum(n, r); err != nil {
		return err
	}
	if *r == "" {
		*r = RoleAll
	}
	return nil
}

// Valid says whether r is one of the words.
func (r Role) Valid() bool { return r == RoleAll || r == RoleBuilder || r == RoleScorer }

// ContinueVersions makes the next model the stage builds at least version v+1 (a builder that
// follows another keeps the published sequence going, above every version the scorers may
// serve), also when a model from a snapshot (state_dir) serves: versions never go back.
func (s *Stage) ContinueVersions(v uint64) {
	if v > s.builds.version {
		s.builds.version = v
	}
}

// NextVersion is the version the next model built will have at least (a builder's is its
// clock in milliseconds at the build when that is more: buildVersion).
func (s *Stage) NextVersion() uint64 { return s.builds.version + 1 }

// buildVersion is the version of a model built now: one above the newest, and on a builder at
// least the clock in milliseconds. A builder's versions so follow its clock: a version a
// scorer took as within its bound of the clock (pipeline/modelversion.go), a hostile one
// included, is passed by the builder's own within that bound (one counted up by one from it
// stayed ahead of every build to come).
func (s *Stage) buildVersion() uint64 {
	v := s.builds.version + 1
	if s.deps.Role == RoleBuilder {
		v = max(v, uint64(max(time.Now().UnixMilli(), 0)))
	}
	return v
}

// HeldRecords is how many records wait for the first model (before_model: hold): a scorer's
// pipeline stops fetching once they reach its bound, so that memory stays bounded however long
// the builder takes.
func (s *Stage) HeldRecords() int { return s.heldRecords }

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
// now scored. hypercubeCells are the builder's hypercube counts published with m
// (PublishedHypercube; nil when it had the detector off); a scorer's hypercube detector scores
// with them. A model for other features is refused; an older or equal version is ignored
// (ok false), so a replayed model topic never moves a scorer back.
func (s *Stage) InstallModel(m *Model, hypercubeCells []byte) (ready []*batch.Batch, ok bool, err error) {
	if !slices.Equal(m.Features, s.features) {
		return nil, false, fmt.Errorf("%w: built for features %v, the stream has %v", ErrSnapshotMismatch, m.Features, s.features)
	}
	if s.model != nil && m.Version <= s.model.Version {
		return nil, false, nil
	}
	var cells *hypercube.Cells
	if hypercubeCells != nil {
		if cells, err = hypercube.ReadCells(hypercubeCells); err != nil {
			return nil, false, fmt.Errorf("%w: model %d: %w", ErrSnapshotMismatch, m.Version, err)
		}
	}
	for _, f := range s.followers {
		if hc, ok := f.(*hypercubeDetector); ok {
			hc.published = cells
		}
	}
	if err := s.install(m); err != nil {
		return nil, false, err
	}
	ready = s.held
	s.held, s.heldRecords = nil, 0
	for _, b := range ready {
		if err := s.score(b); err != nil {
			return nil, true, err
		}
	}
	return ready, true, nil
}
