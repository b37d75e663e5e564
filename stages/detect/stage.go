package detect

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/hugepage"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// Stage is the detect stage: it is owned by one goroutine (the pipeline's detect loop) and
// has no locks. Model rebuilds run on one extra goroutine at a time, started by Process and
// working on their own snapshot; their result is picked up by a later Process call.
type Stage struct {
	// What the stage scores, and with what: fixed at construction (cfg changes by Reconfigure).
	cfg      Config
	features []string
	withSD   bool
	deps     Deps
	// cycles are Deps.Cycles by column (cycles.go); cyclesUnread the columns of them the serving
	// model does not read, as last logged.
	cycles       []cycleCols
	cyclesUnread string

	// The window, and in step with it its records' identities (a model's Members) and marks
	// (significant: left out of the next builds, alarm.go); pending is the stream index in recs
	// of each pushed batch not yet scored.
	win     *microcluster.Window
	recs    *windowRing
	pending map[*batch.Batch]uint64
	// alarms is flag_by: significance's cap on the alarms' starts over the last window's records;
	// groups fold continuing alerts per key (alert_cooldown).
	alarms *alarmCap
	series seriesAlarms // the deadband's series in alarm (flag_clear)
	groups alertGroups
	// recent is the stream's last combined scores (recent.go; the keys' are in keyed).
	recent recentRing
	// past is the stream's last recent_past records' features (recent_past.go).
	past pastRing
	// stale is the share of the stream's last recent_past scored records whose combined score
	// reached staleDecades (recent_past_weight: stale; recent_past.go).
	stale exceedRing
	// keyed holds the models per key (key_by: key; nil otherwise).
	keyed *keyedScorer

	// The serving model, the builds that replace it, and the batches held for the first one.
	model  *Model
	builds buildState
	held   []*batch.Batch // batches waiting for the first model (before_model: hold)
	// heldRecords counts the records of held (HeldRecords).
	heldRecords int

	// The detectors that score (detector.go: the model's, then the hypercube), those of them
	// that follow the window push by push, the records a push evicted for them, and the
	// scoring buffers.
	detectors []Detector
	followers []Follower
	evicted   microcluster.Evicted
	scratch   scoreScratch
	// keyedScores are the keys' pass's scores beside the global scoring, kept for the next
	// batch, cleared (scoreKeyedBeside, mergeKeyed).
	keyedScores []batch.Score
	// keyedDevice: the keys' models were put on a device at construction (the keys' pass may
	// fall back to the CPU later: keyed.dev is then the pass's to change).
	keyedDevice bool
	// keysAtPass are the keys' figures when the running chained keys' pass started (startChained):
	// KeyStats's while it runs.
	keysAtPass KeyStats
	// globalShare is the share of the records of the last batch whose chained keys' pass started
	// that the global model scores (their key without a model then; 1 before any): speculate.
	globalShare float64
	// With overlap (Deps.Overlap, overlap.go): the second lane, the batch in flight, and the
	// batches finished outside Process (settle) that wait to be returned.
	alt    []*lanes
	flight []*scoring
	ready  []*batch.Batch

	ext stageExt // snapshots and live reconfiguration (snapshot.go, reconfigure.go)
}

// OverlapOnGPU is Deps.Overlap as the pipeline sets it on a GPU: four batches in flight are
// four scoring calls queued for the device, served together between a model build's
// SolvingSet iterations (about 1.3 ms each at W = 1M) instead of one per iteration
// (docs/BENCHMARKS.md §4.7).
const OverlapOnGPU = 4

// Deps are what a stage is given at construction besides its configuration.
type Deps struct {
	// Log receives the stage's events (a model serving, a failed rebuild, snapshots).
	Log zerolog.Logger
	// Role is the stage's part in a deployment of several processes (run.role). Default
	// RoleAll.
	Role Role
	// Accelerator runs SolvingSet, micro-clustering, k-NN scoring and the density test on a
	// device; nil: the CPU.
	Accelerator Accelerator
	// OnModel, if set, is told on the stage's goroutine whenever the serving model changes, so
	// that nobody has to poll Model: fresh is true for a new model (built, or given to
	// InstallModel), false for the serving model with w* taken from its top weights after a
	// reload of distance.n (the same version: nothing new to publish). A model loaded from a
	// snapshot by NewStage is not announced (nobody listens yet): Model returns it.
	OnModel func(m *Model, fresh bool)
	// Overlap is how many batches may be in flight with an Accelerator (0: none): Process
	// begins a batch's scoring, the device call running on its own, and returns the batches
	// before it once more than Overlap are in flight (overlap.go): the host work of one batch
	// overlaps the device work of the others. LandScored returns those whose scoring ended (the
	// pipeline calls it once Landing is closed), Drain all of them. Verdicts are the same as
	// without.
	Overlap int
	// AlertGroupsFrom, when not empty, is a directory holding alarm state files saved under other
	// columns (the pipeline moved them out of state_dir at a change of the columns: their series
	// in alarm and caps rest on the verdicts of models not loaded): where state_dir holds no
	// alarm state, the alert groups of the newest of those that reads back are kept, nothing
	// else of it (alarm_adopt.go).
	AlertGroupsFrom string
	// Cycles are the stream's cyclic time columns (ingest.derive's time_of_day and day_of_week
	// pairs: pipeline.Cycles): a model reads a pair only when its window spans the pair's period
	// (cycles.go).
	Cycles []Cycle
}

// buildState is the model builds' bookkeeping.
type buildState struct {
	version   uint64           // the newest model's version (the next build is version+1)
	sinceLast int              // records pushed since the last build started
	sinceRank int              // records pushed since the last build or recalibration started
	lastBuild time.Time        // when the last build started
	started   time.Time        // when the running build (or recalibration) started
	running   bool             // a build runs; its result arrives on done
	done      chan buildResult // capacity 1: the running build's result
}

type buildResult struct {
	model *Model
	err   error
}

// NewStage makes the stage for a stream of the given features.
func NewStage(cfg Config, features []string, withSD bool, deps Deps) (*Stage, error) {
	return NewStageContext(context.Background(), cfg, features, withSD, deps)
}

// NewStageContext is NewStage whose load of detect.state_dir's snapshots (the keys' state: about
// 1.3 GB at 100,000 keys, seconds to read, checksum and decode) ends when ctx does: it returns
// ctx.Err() and no stage (a stop during the start; the files are left as they were, for the next
// start).
func NewStageContext(ctx context.Context, cfg Config, features []string, withSD bool, deps Deps) (*Stage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w, err := microcluster.New(cfg.Window, len(features), withSD)
	if err != nil {
		return nil, err
	}
	s := &Stage{cfg: cfg, features: features, withSD: withSD, deps: deps,
		win: w, recs: newWindowRing(cfg.Window), pending: map[*batch.Batch]uint64{},
		alarms: newAlarmCap(cfg.Window), globalShare: 1, builds: buildState{done: make(chan buildResult, 1), lastBuild: time.Now()}}
	s.ext.saving, s.ext.cutSaves = context.WithCancel(context.Background())
	s.ext.seed = maphash.MakeSeed()
	if s.cycles, err = resolveCycles(deps.Cycles, features); err != nil {
		return nil, err
	}
	if s.cycles != nil {
		s.recs.times = make([]int64, cfg.Window)
		s.recs.blind = make([]bool, cfg.Window) // (marks of a model blind to a pair: cycles_rejudge.go)
	}
	if cfg.KeyBy == KeyByKey {
		s.keyed = s.newKeyed()
		if ka, ok := deps.Accelerator.(KeyedAccelerator); ok { // the keys' models resident on the device
			if s.keyed.dev, err = ka.KeyedModels(len(features), cfg.Keys.Window); err != nil {
				return nil, err
			}
			if s.keyedDevice = s.keyed.dev != nil; s.keyedDevice {
				s.keyed.devBytes = s.keyed.dev.Bytes()
			}
		}
	}
	hc := &hypercubeDetector{scorer: deps.Role == RoleScorer}
	s.detectors = append(modelDetectors(deps.Accelerator, features), hc)
	s.followers = []Follower{hc}
	if err := s.openSnapshots(ctx); err != nil {
		if s.keyed != nil { // (its device models, if any)
			if cerr := s.keyed.close(); cerr != nil {
				deps.Log.Warn().Err(cerr).Msg("releasing the keys' models on the device")
			}
		}
		return nil, err
	}
	s.noteLoaded() // (what a stop right after this start need not write again: keyed_unchanged.go)
	if s.keyed != nil && cfg.Keys.HugePages {
		var first hugepage.Stats
		s.keyed.releaseHeap, first = hugepage.Keep() // (released by Close)
		if first.Err != nil {
			deps.Log.Warn().Err(first.Err).Msg("keys.huge_pages: the heap is not marked for huge pages (a hint: the keys run on the host's pages)")
		}
	}
	return s, nil
}

// KeyStats are the models per key's figures (zero without key_by), as the batches finished so far
// left them. While a batch's keys' pass runs chained (overlap.go's startChained) they are the
// figures it started from, read without waiting for it (the pipeline reads them after every
// Process call: waiting would put every batch's keys' pass back on the stage's goroutine), the
// device's bytes those after the last upload that had ended then.
func (s *Stage) KeyStats() KeyStats {
	if s.keyed == nil {
		return KeyStats{}
	}
	if len(s.flight) > 0 && s.flight[0].chained && s.flight[0].keyedDone != nil {
		return s.keysAtPass // (only the oldest batch's pass runs chained: startChained)
	}
	return s.keyed.stats()
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
	if s.deps.Role == RoleScorer {
		return s.processScorer(b)
	}
	if s.overlapping() && s.model != nil {
		return s.processOverlapped(b) // overlap.go
	}
	if err := s.pushBatch(ctx, b); err != nil {
		return nil, err
	}
	if s.deps.Role == RoleBuilder {
		delete(s.pending, b)
		if s.keyed != nil { // the keys' models: built as role all builds them (keyed_topic.go)
			if err := s.keyedBuilderPass(b); err != nil {
				return nil, err
			}
		}
		s.maybeRebuild()
		return []*batch.Batch{b}, nil // in the window: done (a builder scores nothing)
	}

	if s.model == nil {
		return s.beforeModel(b), nil
	}
	out := append(s.held, b)
	s.held, s.heldRecords = nil, 0
	for _, ob := range out {
		if err := s.score(ob); err != nil {
			return nil, err
		}
	}
	// After scoring: the build leaves out the records this batch found significant.
	s.maybeRebuild()
	return s.takeReady(out), nil
}

// pushBatch adds b to the window (and the identities, the significance bits and the
// followers), and starts the first model's build once the window holds min_records. The
// first model is built from exactly the first min_records records: a batch that crosses
// min_records is pushed in two parts, the build snapshotting the window between them, so that
// the records after them (a fault that begins within the batch, on a slow plant whose first
// batch spans its whole commissioning period) are scored by a model that has not seen them,
// whatever the batch size (replay's 1000 rows or a live stream's few). Under hold the first
// build is waited for here, until ctx (the pipeline's hard stop) ends at most: its model is lost
// then, and the batches stay held, to be read again after a restart.
func (s *Stage) pushBatch(ctx context.Context, b *batch.Batch) error {
	means, sds, err := s.columns(b)
	if err != nil {
		return err
	}
	n, cut := b.Len(), b.Len()
	if s.model == nil && !s.builds.running && s.win.Len() < s.cfg.MinRecords && s.win.Len()+n > s.cfg.MinRecords {
		cut = s.cfg.MinRecords - s.win.Len()
	}
	first := s.recs.pushed
	warm := warmingRows(b) // (hypercube_warm.go)
	if err := s.pushRows(means, sds, b, warm, 0, cut); err != nil {
		return err
	}
	s.pending[b] = first
	s.recs.leaveOutWarming(b, first) // (out of the next references, the rows pushed so far: warmup.go)
	if s.model == nil && s.win.Len() >= s.cfg.MinRecords && !s.builds.running {
		if s.cfg.BeforeModel == BeforeModelHold {
			// Nothing can be emitted until the first model exists: build it right here.
			if ctx.Err() == nil { // (past the hard stop nothing more is built)
				s.startBuild()
				s.awaitBuild(ctx)
			}
		} else {
			s.startBuild()
		}
	}
	if cut < n {
		if err := s.pushRows(means, sds, b, warm, cut, n); err != nil {
			return err
		}
		s.recs.leaveOutWarming(b, first) // (the rows after the cut, pushed only now)
	}
	return nil
}

// pushRows pushes the batch's records [lo, hi) to the window, the identities and the
// followers (less the records the hypercube's counts leave out: hypercube_warm.go), and counts
// them towards the next build and recalibration. warm marks the batch's records with a warming
// column (nil: none).
func (s *Stage) pushRows(means, sds [][]float32, b *batch.Batch, warm []bool, lo, hi int) error {
	parts, offs, topic, ts := b.Partitions(), b.Offsets(), b.Topic, b.Timestamps()
	if lo > 0 || hi < len(parts) {
		means, sds = sliceRows(means, lo, hi), sliceRows(sds, lo, hi)
		parts, offs = parts[lo:hi], offs[lo:hi]
		if warm != nil {
			warm = warm[lo:hi]
		}
	}
	uncounted := s.uncountedRows(warm)
	from, held := s.recs.pushed, s.recs.held() // (the evicted are the stream's records from-held on)
	ev := s.evictedSink()
	if err := s.win.Push(means, sds, ev); err != nil {
		return err
	}
	var evictedOut []bool
	if ev != nil {
		evictedOut = s.recs.uncountedFrom(from-uint64(held), ev.Len(), from, uncounted)
	}
	first := s.recs.push(topic, parts, offs, warm, uncounted)
	if s.ext.reread != nil { // (records read again after a start from a saved window: window_restore.go)
		s.leaveOutReread(topic, parts, offs)
	}
	s.recs.pushTimes(first, ts, lo, hi)
	if err := s.follow(means, uncounted, evictedOut); err != nil {
		return err
	}
	s.builds.sinceLast += hi - lo
	s.builds.sinceRank += hi - lo
	return nil
}

// sliceRows is the rows [lo, hi) of column-major cols (nil stays nil).
func sliceRows(cols [][]float32, lo, hi int) [][]float32 {
	if cols == nil {
		return nil
	}
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = c[lo:hi]
	}
	return out
}

// maybeRebuild starts the next model's build when one is due: refresh_records records or
// refresh_interval since the last, or a reload that needs one.
func (s *Stage) maybeRebuild() {
	if s.model != nil && !s.builds.running && s.win.Len() >= s.cfg.MinRecords &&
		(s.ext.rebuildDue || s.builds.sinceLast >= s.cfg.Refresh() || time.Since(s.builds.lastBuild) >= s.cfg.RefreshInterval) {
		// The window holds fewer than min_records only after a start from a snapshot without a
		// saved window (or one saved short of it: window_restore.go).
		s.startBuild()
	} else if s.model != nil && s.model.Ranker != nil && !s.builds.running && s.win.Len() >= s.cfg.MinRecords &&
		s.builds.sinceRank >= s.cfg.Recalibrate(s.win.Len()) {
		s.startRecalibration()
	}
}

// reference is what a build or a recalibration reads: a snapshot of the window without the
// records found significant (alarm.go: a fault repeated does not become normal).
func (s *Stage) reference() (cols, sds [][]float32) {
	cols, sds = s.win.Snapshot()
	s.maybeRejudgeBlind(cols) // (the first model able to read a cyclic pair: cycles_rejudge.go)
	cols, sds, _ = withoutOutcasts(cols, sds, s.recs.significant(s.win.Len()), s.cfg.Window)
	return cols, sds
}

// startRecalibration rebuilds the serving model's ranking part alone (the tails, the distance
// sample, the calibrations: what flag_by: significance and rate decide by) from a snapshot of
// the window on the build goroutine, as a new model version sharing the other parts: the
// calibration follows the stream every recalibrate_records, at a small part of a full build's
// cost (the solving set and the micro-clusters stay until the next full build).
func (s *Stage) startRecalibration() {
	cols, _ := s.reference()
	s.builds.running, s.builds.sinceRank, s.builds.started = true, 0, time.Now()
	next := *s.model
	next.Version = s.buildVersion()
	next.Members, next.WindowSpan = s.recs.members(), s.recs.span()
	cfg, done := s.cfg, s.builds.done
	go func() {
		start := time.Now()
		r, err := buildRanker(cols, sortedColumns(cols), next.Features, cfg)
		if err != nil {
			done <- buildResult{err: err}
			return
		}
		next.Ranker, next.BuiltAt, next.BuildTime = r, time.Now(), time.Since(start)
		done <- buildResult{model: &next}
	}()
}

// beforeModel is what happens to b while no model serves (before_model): held, or passed on
// unscored at once.
func (s *Stage) beforeModel(b *batch.Batch) []*batch.Batch {
	if s.cfg.BeforeModel == BeforeModelHold {
		s.held = append(s.held, b)
		s.heldRecords += b.Len()
		return nil
	}
	b.Scores = make([]batch.Score, b.Len()) // Scored = false
	s.pastDecades(b)                        // (its records are still the recent past of the next)
	return []*batch.Batch{b}
}

// Flush returns the batches still held (at shutdown), scored by the model if there is one.
// Without a model (the input stopped before min_records) nothing can be scored: under hold
// the held batches are released and nothing is returned, so their offsets are never marked
// done or committed and a restart reads and scores them (hold's promise: a record is scored
// and its output acknowledged, or it is read again). Under pass every batch already went out
// unscored, so nothing is held. A build in progress is waited for only when batches are held
// for its model (without bound here, until ctx ends in FlushContext); another (a rebuild) is
// left to Close or AwaitBuild, so that a stop's final commit does not wait for it.
func (s *Stage) Flush() ([]*batch.Batch, error) { return s.FlushContext(context.Background()) }

// FlushContext is Flush waiting for the build of a model that held batches wait for until ctx
// ends at most (a stop's hard deadline): the build's model is then lost (awaitBuild), and the
// held batches are read again after a restart.
func (s *Stage) FlushContext(ctx context.Context) ([]*batch.Batch, error) {
	if err := s.settle(); err != nil { // the batch in flight (overlap.go) first: stream order
		return nil, err
	}
	if len(s.held) > 0 {
		s.awaitBuild(ctx)
	} else {
		s.collect(false)
	}
	done := s.takeReady(nil)
	out := s.held
	s.held, s.heldRecords = nil, 0
	if s.model == nil {
		for _, b := range out {
			delete(s.pending, b)
			b.Release()
		}
		if len(out) > 0 {
			s.deps.Log.Info().Int("batches", len(out)).Msg("stopping before the first model: held records are left uncommitted, to be read and scored after a restart")
		}
		return nil, nil
	}
	for _, b := range out {
		if err := s.score(b); err != nil {
			return nil, err
		}
	}
	return append(done, out...), nil
}

// Close waits for a running build to finish (it holds only its own snapshot) and for
// snapshot writes in flight, then saves the keys' and alarm state.
func (s *Stage) Close() { s.CloseContext(context.Background()) }

// CloseContext is Close waiting until ctx ends at most (a stop's hard deadline) for the keys'
// passes and builds of batches in flight (quietWithin), a model build in progress (its model is
// then lost: awaitBuild), the snapshot writes in flight and the keys' and alarm state's save
// (about 1.3 GB at 100,000 keys): a write or a file's fsync ctx ends is removed, the last
// complete file stands and the next start loads it (cutSave logs it); a directory's fsync ctx
// ends leaves the new file in place (SnapshotDir.saveAs logs it).
func (s *Stage) CloseContext(ctx context.Context) {
	defer context.AfterFunc(ctx, s.ext.cutSaves)()
	if !s.quietWithin(ctx, nil, s.closeKeyed) { // (after Flush or Abandon nothing is in flight)
		s.ext.cutSaves()
		return
	}
	s.awaitBuild(ctx)
	s.ext.saves.Wait()
	if ctx.Err() != nil {
		s.ext.cutSaves() // (AfterFunc's call, on a goroutine of its own, may not have run yet)
	}
	s.saveKeys(true) // the keys' state as the stop leaves it (keyed_save.go)
	s.closeKeyed()
}

// PassedOnDropped tells the stage that batches it passed on were dropped unwritten or left
// uncommitted (the pipeline's run failed, met the hard stop after them, or its final commit
// failed): read again after a restart, they would count again in the state it saves, so Close
// saves no keys' or alarm state (the last save stands, as after a crash).
func (s *Stage) PassedOnDropped() { s.ext.stateAhead.Store(true) }

// columns returns the batch's feature (and uncertainty) columns as float32 slices, without
// copying (batch.New resolved and checked them).
func (s *Stage) columns(b *batch.Batch) (means, sds [][]float32, err error) {
	if !b.Resolved() || !slices.Equal(b.Features, s.features) || (s.withSD && !b.HasUncertainty()) {
		return nil, nil, fmt.Errorf("detect: batch of features %v (uncertainty %v), want %v (uncertainty %v)", b.Features, b.HasUncertainty(), s.features, s.withSD)
	}
	means = make([][]float32, len(s.features))
	if s.withSD {
		sds = make([][]float32, len(s.features))
	}
	for j := range s.features {
		means[j] = b.Feature(j)
		if s.withSD {
			sds[j] = b.Uncertainty(j)
		}
	}
	return means, sds, nil
}

// startBuild snapshots the window and builds the next model on a new goroutine.
func (s *Stage) startBuild() {
	cols, sds := s.reference()
	s.builds.running, s.builds.sinceLast, s.builds.sinceRank, s.builds.lastBuild = true, 0, 0, time.Now()
	s.builds.started = s.builds.lastBuild
	s.ext.rebuildDue = false // this build reads the configuration now in force
	version := s.buildVersion()
	cfg, features, accel, members, span, done := s.cfg, s.features, s.deps.Accelerator, s.recs.members(), s.recs.span(), s.builds.done
	go func() {
		m, err := buildOn(accel, cols, sds, features, cfg, version)
		if m != nil {
			m.Members, m.WindowSpan = members, span
		}
		done <- buildResult{model: m, err: err} // (its own channel: awaitBuild may leave it)
	}()
}

// collect installs a finished build; with wait it blocks until the running build ends.
func (s *Stage) collect(wait bool) {
	if !s.builds.running {
		return
	}
	if wait {
		s.awaitBuild(context.Background())
		return
	}
	select {
	case r := <-s.builds.done:
		s.finishBuild(r)
	default:
	}
}

// finishBuild installs the running build's result r.
func (s *Stage) finishBuild(r buildResult) {
	s.builds.running = false
	if r.err == nil {
		r.err = s.install(r.model)
	}
	if r.err != nil {
		// The previous model keeps serving; the next trigger tries again.
		s.deps.Log.Error().Err(r.err).Msg("model rebuild failed; the previous model keeps serving")
	}
}

// install makes m the serving model.
func (s *Stage) install(m *Model) error {
	s.model, s.builds.version = m, m.Version
	s.followAfresh() // the counts follow the new normalisation
	s.noteCycles(m)
	s.deps.Log.Info().Uint64("model_version", m.Version).Int("window", m.WindowRecords).
		Int("solving_set", len(m.Distance.Points[0])).Float64("w_star", m.Distance.WStar).
		Float64("build_ms", float64(m.BuildTime.Microseconds())/1000).Msg("model serving")
	s.announce(m, true)
	s.installed(m) // may retune m to the configuration now in force, announced after it
	return nil
}

// announce tells Deps.OnModel that m serves (not while NewStage loads a snapshot).
func (s *Stage) announce(m *Model, fresh bool) {
	if s.deps.OnModel != nil && !s.ext.loading {
		s.deps.OnModel(m, fresh)
	}
}
