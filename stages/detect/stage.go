package detect

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// Stage is the detect stage: it is owned by one goroutine (the pipeline's detect loop) and
// has no locks. Model rebuilds run on one extra goroutine at a time, started by Process and
// working on their own snapshot; their result is picked up by a later Process call.
type Stage struct {
	cfg      Config
	features []string
	withSD   bool
	log      zerolog.Logger

	win *microcluster.Window
	// ids are the identities (partition, offset) of the window's records, in step with it:
	// a model's Members come from them (members.go).
	ids *idRing

	model     *Model
	version   uint64
	sinceLast int       // records pushed since the last build started
	lastBuild time.Time // when the last build started
	building  bool
	done      chan buildResult // capacity 1: the running build's result

	held []*batch.Batch // batches waiting for the first model (before_model: hold)

	scratch scoreScratch
	ext     stageExt    // snapshots and live reconfiguration (snapshot.go, reconfigure.go)
	hc      hcState     // the hypercube detector's counts (hypercube_stage.go)
	role    Role        // all, builder or scorer (roles.go)
	singles [][]string  // singles[j] = {features[j]}, shared by the scores of 1-D subspaces
	accel   Accelerator // runs SolvingSet, k-NN scoring and the density test on a GPU; nil: the CPU
	// OnModel, if set, is called (on the stage's goroutine) whenever a new model starts serving.
	OnModel func(*Model)
}

type buildResult struct {
	model *Model
	err   error
}

// NewStage makes the stage for a stream of the given features.
func NewStage(cfg Config, features []string, withSD bool, log zerolog.Logger) (*Stage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w, err := microcluster.New(cfg.Window, len(features), withSD)
	if err != nil {
		return nil, err
	}
	s := &Stage{cfg: cfg, features: features, withSD: withSD, log: log, win: w, ids: newIDRing(cfg.Window), done: make(chan buildResult, 1), lastBuild: time.Now()}
	s.singles = make([][]string, len(features))
	for j, f := range features {
		s.singles[j] = []string{f}
	}
	if err := s.openSnapshots(); err != nil {
		return nil, err
	}
	return s, nil
}

// Model is the model now serving (nil before the first).
func (s *Stage) Model() *Model { return s.model }

// Window is the stage's window (read-only use: metrics).
func (s *Stage) Window() *microcluster.Window { return s.win }

// Process adds b to the window, scores it with the model now serving, and returns the
// batches that are ready to go downstream, in arrival order: b itself, or nothing while
// records are held for the first model, or every held batch once it exists.
func (s *Stage) Process(ctx context.Context, b *batch.Batch) ([]*batch.Batch, error) {
	s.collect(false)
	if s.role == RoleScorer {
		return s.processScorer(b)
	}
	means, sds, err := s.columns(b)
	if err != nil {
		return nil, err
	}
	if err := s.win.Push(means, sds, s.evictedSink()); err != nil {
		return nil, err
	}
	s.ids.push(b.Topic, b.Partitions(), b.Offsets())
	if err := s.followWindow(means); err != nil {
		return nil, err
	}
	s.sinceLast += b.Len()
	if s.model == nil && s.win.Len() >= s.cfg.MinRecords && !s.building {
		if s.cfg.BeforeModel == BeforeModelHold {
			// Nothing can be emitted until the first model exists: build it right here.
			s.startBuild()
			s.collect(true)
		} else {
			s.startBuild()
		}
	} else if s.model != nil && !s.building && s.win.Len() >= s.cfg.MinRecords &&
		(s.ext.rebuildDue || s.sinceLast >= s.cfg.RefreshRecords || time.Since(s.lastBuild) >= s.cfg.RefreshInterval) {
		// The window holds fewer than min_records only after a start from a snapshot.
		s.startBuild()
	}
	if s.role == RoleBuilder {
		return []*batch.Batch{b}, nil // in the window: done (a builder scores nothing)
	}

	if s.model == nil {
		return s.beforeModel(b), nil
	}
	out := append(s.held, b)
	s.held = nil
	for _, ob := range out {
		if err := s.score(ob); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// beforeModel is what happens to b while no model serves (before_model): held, or passed on
// unscored at once.
func (s *Stage) beforeModel(b *batch.Batch) []*batch.Batch {
	if s.cfg.BeforeModel == BeforeModelHold {
		s.held = append(s.held, b)
		return nil
	}
	b.Scores = make([]batch.Score, b.Len()) // Scored = false
	return []*batch.Batch{b}
}

// Flush returns the batches still held (at shutdown), scored by the model if there is one.
// Without a model (the input stopped before min_records) nothing can be scored: under hold
// the held batches are released and nothing is returned, so their offsets are never marked
// done or committed and a restart reads and scores them (hold's promise: a record is scored
// and its output acknowledged, or it is read again). Under pass every batch already went out
// unscored, so nothing is held.
func (s *Stage) Flush() ([]*batch.Batch, error) {
	s.collect(s.building)
	out := s.held
	s.held = nil
	if s.model == nil {
		for _, b := range out {
			b.Record.Release()
		}
		if len(out) > 0 {
			s.log.Info().Int("batches", len(out)).Msg("stopping before the first model: held records are left uncommitted, to be read and scored after a restart")
		}
		return nil, nil
	}
	for _, b := range out {
		if err := s.score(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Close waits for a running build to finish (it holds only its own snapshot) and for
// snapshot writes in flight.
func (s *Stage) Close() {
	s.collect(s.building)
	s.ext.saves.Wait()
}

// columns returns the batch's feature (and uncertainty) columns as float32 slices, without copying.
func (s *Stage) columns(b *batch.Batch) (means, sds [][]float32, err error) {
	rec := b.Record
	means = make([][]float32, len(s.features))
	if s.withSD {
		sds = make([][]float32, len(s.features))
	}
	for j, f := range s.features {
		col, ok := float32Column(rec, f)
		if !ok {
			return nil, nil, fmt.Errorf("detect: batch has no Float32 column %q", f)
		}
		means[j] = col
		if s.withSD {
			sd, ok := float32Column(rec, f+batch.UncertaintySuffix)
			if !ok {
				return nil, nil, fmt.Errorf("detect: batch has no Float32 column %q", f+batch.UncertaintySuffix)
			}
			sds[j] = sd
		}
	}
	return means, sds, nil
}

// float32Column returns a Float32 column's values by name, sharing the Arrow buffer.
func float32Column(rec arrow.Record, name string) ([]float32, bool) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return nil, false
	}
	col, ok := rec.Column(idx[0]).(*array.Float32)
	if !ok {
		return nil, false
	}
	return col.Float32Values(), true
}

// startBuild snapshots the window and builds the next model on a new goroutine.
func (s *Stage) startBuild() {
	cols, sds := s.win.Snapshot()
	s.building, s.sinceLast, s.lastBuild = true, 0, time.Now()
	s.ext.rebuildDue = false // this build reads the configuration now in force
	version := s.version + 1
	cfg, features, accel, members := s.cfg, s.features, s.accel, s.ids.members()
	go func() {
		m, err := buildOn(accel, cols, sds, features, cfg, version)
		if m != nil {
			m.Members = members
		}
		s.done <- buildResult{model: m, err: err}
	}()
}

// collect installs a finished build; with wait it blocks until the running build ends.
func (s *Stage) collect(wait bool) {
	if !s.building {
		return
	}
	var r buildResult
	if wait {
		r = <-s.done
	} else {
		select {
		case r = <-s.done:
		default:
			return
		}
	}
	s.building = false
	if r.err == nil {
		r.err = s.install(r.model)
	}
	if r.err != nil {
		// The previous model keeps serving; the next trigger tries again.
		s.log.Error().Err(r.err).Msg("model rebuild failed; the previous model keeps serving")
	}
}

// install makes m the serving model.
func (s *Stage) install(m *Model) error {
	s.model, s.version = m, m.Version
	if err := s.resetHypercube(); err != nil { // the counts follow the new normalisation
		s.log.Error().Err(err).Msg("hypercube detector off until the next model")
	}
	s.installed(m)
	s.log.Info().Uint64("model_version", m.Version).Int("window", m.WindowRecords).
		Int("solving_set", len(m.Distance.Points[0])).Float64("w_star", m.Distance.WStar).
		Dur("build", m.BuildTime).Msg("model serving")
	if s.OnModel != nil {
		s.OnModel(m)
	}
	return nil
}
