package detect

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// ChangeKind says how a changed configuration key reaches a running stage.
type ChangeKind int

// The kinds of change.
const (
	// ChangeLive applies to the next batch: thresholds and triggers that the scoring reads
	// batch by batch. The model, its version and the window stay.
	ChangeLive ChangeKind = iota
	// ChangeRebuild applies by rebuilding the model from the window at once; the previous
	// model scores until the new one is installed (its version is one higher).
	ChangeRebuild
	// ChangeRestart cannot apply to a running stage: outlierd must be restarted.
	ChangeRestart
)

// String names the kind.
func (k ChangeKind) String() string {
	switch k {
	case ChangeLive:
		return "live"
	case ChangeRebuild:
		return "rebuild"
	}
	return "restart"
}

// changeKinds classifies the keys of the detect section (the YAML names under detect.). A key
// missing here (a field added later) needs a restart: never applied half by accident.
//
// The w* policy (distance.n): w* is the n-th largest weight of the window, which only the
// window can give; but every model keeps the exact weights of its top-n outliers
// (Model.TopWeights), so a smaller n takes its w* from them at once (ChangeLive, the version
// unchanged), and an n larger than the model knows rebuilds. Either way the solving set keeps
// its guarantee (no false negatives: w_k(q, S) >= w_k(q, D) holds for every threshold).
var changeKinds = map[string]ChangeKind{
	"combine": ChangeLive, "before_model": ChangeLive, "min_records": ChangeLive,
	"refresh_records": ChangeLive, "refresh_interval": ChangeLive, "recalibrate_records": ChangeLive,
	"density.mode": ChangeLive, "density.eta": ChangeLive, "density.delta": ChangeLive,
	"density.samples": ChangeLive, "distance.n": ChangeLive,
	"flag_by": ChangeLive, "alarm_rate": ChangeLive, "min_score": ChangeLive, "flag_clear": ChangeLive, "alert_cooldown": ChangeLive,
	"recent_scores":      ChangeLive, // (the rings resize at the next record, keeping the newest)
	"recent_horizon":     ChangeLive, // (the series' block maxima start afresh at the next record)
	"recent_past":        ChangeLive, // (the stream's recent past starts afresh at the next record)
	"recent_past_weight": ChangeLive,
	"recent_far_side":    ChangeLive,
	"hypercube.enabled":  ChangeLive, "hypercube.bins": ChangeLive, "hypercube.max_neighbours": ChangeLive,

	// PROCLUS's keys apply with the next model, built at the next batch (Reconfigure marks it
	// due): live, since the serving model stays valid meanwhile.
	"proclus.enabled": ChangeLive, "proclus.k": ChangeLive, "proclus.l": ChangeLive, "proclus.restarts": ChangeLive,
	"window": ChangeRebuild, "seed": ChangeRebuild, "density.clusters": ChangeRebuild,
	"density.iterations": ChangeRebuild, "distance.k": ChangeRebuild, "distance.m": ChangeRebuild,
	"score.detectors": ChangeRebuild, "score.sample": ChangeRebuild, "score.k": ChangeRebuild,
	"score.combine": ChangeRebuild, "score.weights": ChangeRebuild, "distance_space": ChangeRebuild,

	"state_dir": ChangeRestart, "snapshots": ChangeRestart,
	// The models per key are held by key with their windows: a change of their shape restarts.
	"key_by": ChangeRestart, "keys.window": ChangeRestart, "keys.min_records": ChangeRestart,
	"keys.k": ChangeRestart, "keys.max_keys": ChangeRestart, "keys.max_bytes": ChangeRestart,
	"keys.huge_pages":      ChangeRestart, // (the hold is taken with the stage)
	"keys.rebuild_records": ChangeLive,    // (each key's clock carried over in proportion: keyedScorer.rephase)
	"keys.tail":            ChangeLive,    // (the fleet's pool fills from the next pass on: keyed_fleet.go)
}

// keyShaped are the rebuild keys that shape the keys' models too under key_by: their header and
// each key's model carry them (checkKeyHeader, checkKeyRanker). There they restart, as keys.k
// does: applied live, the keys built before kept their models beside those built after, the
// keys' state saved since was refused at the next start, and a builder's keys' models by its
// scorers (which check them against the configuration they started with).
var keyShaped = map[string]bool{"score.detectors": true, "score.combine": true}

// Change is one changed key of the detect configuration.
type Change struct {
	Key  string // the YAML path, "detect.density.eta"
	Kind ChangeKind
}

// ConfigChanges lists the keys that differ between old and new, with how each applies.
func ConfigChanges(old, new Config) []Change {
	var out []Change
	for _, k := range config.Diff("detect", old, new) {
		name := strings.TrimPrefix(k, "detect.")
		kind, ok := changeKinds[name]
		if !ok || keyShaped[name] && (old.KeyBy == KeyByKey || new.KeyBy == KeyByKey) {
			kind = ChangeRestart
		}
		out = append(out, Change{Key: k, Kind: kind})
	}
	return out
}

// Reconfiguration reports what Reconfigure did.
type Reconfiguration struct {
	// Live are the keys applied at once; Rebuild the keys that started (or scheduled, until
	// the window holds min_records) a rebuild. Both empty: nothing changed.
	Live, Rebuild []string
	// RebuildStarted is true when a build started now (false: one was running, and the next
	// starts when it ends; or the window does not hold min_records yet; or no model exists and
	// the first one uses the new values anyway).
	RebuildStarted bool
	// RebuildWaits says, when Rebuild is not empty and no build started, what the rebuild
	// waits for, in words an operator can act on (the reload's log line carries it): a build
	// running, the window's min_records (after a start from a snapshot the snapshot's model
	// serves until then), the first model, or, on a scorer, the builder's next model.
	RebuildWaits string
}

// stageExt is the stage's state for snapshots and live reconfiguration.
type stageExt struct {
	snaps      *SnapshotDir   // nil without detect.state_dir
	saves      sync.WaitGroup // snapshot writes in flight
	rebuildDue bool           // build as soon as the window holds min_records
	// blindPeriod is the blocks' period of the last re-judgement of blind marks
	// (cycles_rejudge.go): the marks made after it are judged with it.
	blindPeriod time.Duration
	loading     bool // installing a loaded snapshot: not saved again
	// saving is the snapshot writes' context: CloseContext ends it with its own (the stop's
	// deadline), cutSaves; a write it ends leaves the files before it (SnapshotDir.saveAs).
	saving   context.Context
	cutSaves context.CancelFunc
	// keysSaved is when the keys' state was last saved (keyed_save.go), keysSkipped the
	// keys' state files passed over at start.
	keysSaved   time.Time
	keysSkipped []SkippedSnapshot
	// keysSaving is set while a keys' state save is being written: the next is skipped until
	// it is done, so that the copies (every key's state each) cannot pile up on a slow disk.
	keysSaving atomic.Bool
	// saveDue: a save was put off until the batch whose keys' pass ran ahead finished (saveKeys).
	saveDue bool
	// stateAhead: a batch was dropped after its keys' pass (drop: a failure, or Close without
	// Flush; or after the stage passed it on: PassedOnDropped), which is read again after a
	// restart: the keys' state is past the stream's, and is not saved again (the last save
	// stands).
	stateAhead atomic.Bool
	// keyCaps are a scorer's keys' alarm caps from the alarm state, each given back to its key
	// when its model is installed again (InstallKeyModels; alarm_state.go).
	keyCaps map[string]savedCap
	// saved are the digests of the state state_dir's newest files give back, seed theirs
	// (keyed_unchanged.go: a save of an unchanged state writes nothing).
	saved savedState
	seed  maphash.Seed
	// leftover are the waits an Abandon or a Close cut by its deadline left to end alone
	// (quietWithin), quieting the last one's end (nil: none).
	leftover sync.WaitGroup
	quieting chan struct{}
	// reread recognises the records read again after a start from a saved window (nil: none
	// left to recognise; window_restore.go).
	reread *rereadGuard
}

// Reconfigure applies cfg to the running stage, on the stage's goroutine (the pipeline's
// detect loop calls it between batches, so the hot path needs no lock). cfg must validate and
// change only ChangeLive and ChangeRebuild keys; otherwise nothing changes and the error says
// why. Live keys apply to the next batch scored. A new window size re-creates the window with
// its newest records (as many as fit) and rebuilds; the other rebuild keys start a build from
// the window at once, while the previous model keeps scoring.
func (s *Stage) Reconfigure(cfg Config) (Reconfiguration, error) {
	var r Reconfiguration
	if err := cfg.Validate(); err != nil {
		return r, fmt.Errorf("detect: configuration rejected: %w", err)
	}
	if err := s.settle(); err != nil { // the batch in flight finishes under the configuration it began with
		return r, err
	}
	var restart []string
	for _, c := range ConfigChanges(s.cfg, cfg) {
		switch c.Kind {
		case ChangeLive:
			r.Live = append(r.Live, c.Key)
		case ChangeRebuild:
			r.Rebuild = append(r.Rebuild, c.Key)
		default:
			restart = append(restart, c.Key)
		}
	}
	if len(restart) > 0 {
		return Reconfiguration{}, fmt.Errorf("detect: configuration rejected: %s cannot change while running (restart outlierd to apply)", strings.Join(restart, ", "))
	}
	if cfg.Window != s.cfg.Window {
		if err := s.resizeWindow(cfg.Window); err != nil {
			return Reconfiguration{}, err
		}
	}
	if s.keyed != nil {
		s.keysQuiet() // (settled: no keys' pass or build runs; the keys' clocks are final)
		s.keyed.rephase(s.cfg.Keys.Rebuild(), cfg.Keys.Rebuild())
	}
	building := s.builds.running
	hcChanged := cfg.Hypercube.Enabled != s.cfg.Hypercube.Enabled || cfg.Hypercube.Bins != s.cfg.Hypercube.Bins
	if cfg.Proclus != s.cfg.Proclus && s.model != nil {
		s.ext.rebuildDue = true // the clusters are part of the model
	}
	s.cfg = cfg
	if hcChanged {
		// New grid or detector: counted afresh from the window. (A failure, returned, said
		// "nothing changed" of a configuration the stage had taken.)
		s.followAfresh()
	}
	s.reconcile(true)
	r.RebuildStarted = s.builds.running && !building
	if len(r.Rebuild) > 0 && !r.RebuildStarted {
		r.RebuildWaits = s.rebuildWaits()
	}
	ev := s.deps.Log.Info().Strs("live", r.Live).Strs("rebuild", r.Rebuild).Bool("rebuild_started", r.RebuildStarted)
	if r.RebuildWaits != "" {
		ev = ev.Str("rebuild_waits", r.RebuildWaits)
	}
	ev.Msg("detect configuration reloaded")
	return r, nil
}

// rebuildWaits says what a rebuild asked for by a reload, and not started by it, waits for
// ("": nothing, the serving model already fits the configuration). Before operator29 the
// reload's log said only "rebuild_started": false, read as "a build runs" even after a start
// from a snapshot, whose model served the old values until min_records records had arrived.
func (s *Stage) rebuildWaits() string {
	switch {
	case s.model == nil:
		return fmt.Sprintf("the first model, built with the new values once the window holds detect.min_records=%d records (it holds %d)",
			s.cfg.MinRecords, s.win.Len())
	case !s.ext.rebuildDue:
		return "" // the serving model fits (a value set back, or w* taken from its top weights)
	case s.deps.Role == RoleScorer:
		return fmt.Sprintf("the builder: a scorer builds no model; model version %d serves until the builder publishes one built with the new values (the builder's file must change too)",
			s.model.Version)
	case s.builds.running:
		return fmt.Sprintf("a build runs: the rebuild starts when it ends; model version %d serves meanwhile", s.model.Version)
	case s.win.Len() < s.cfg.MinRecords:
		return fmt.Sprintf("the window: it holds %d of detect.min_records=%d records (a start from a snapshot without a saved window, or one saved short, begins with the records it has); model version %d serves with the earlier values until then, and detect.refresh_interval waits too",
			s.win.Len(), s.cfg.MinRecords, s.model.Version)
	}
	return "the next batch"
}

// Config is the configuration now in force.
func (s *Stage) Config() Config { return s.cfg }

// reconcile brings the serving model in line with s.cfg: other build parameters need a build
// (started now when start is set and possible, else at the next batch that can); another n
// takes w* from the model's top weights when it knows them (same version), else needs a build.
func (s *Stage) reconcile(start bool) {
	m := s.model
	if m == nil {
		return // the first build reads s.cfg
	}
	// The ranking part (score.*) is built with the model too (calibrate.go).
	due := len(m.Params.rebuildDiff(buildParams(s.cfg))) > 0 || rankerFits(m.Ranker, s.cfg) != nil
	if !due && m.Params.N != s.cfg.Distance.N {
		if dm, ok := m.WithN(s.cfg.Distance.N); ok {
			s.model = dm
			s.announce(dm, false)
			s.deps.Log.Info().Uint64("model_version", dm.Version).Int("n", s.cfg.Distance.N).
				Float64("w_star", dm.Distance.WStar).Msg("w* taken from the model's top weights for the new n")
		} else {
			due = true
		}
	}
	if !due {
		return
	}
	s.ext.rebuildDue = true
	if start && !s.builds.running && s.win.Len() >= s.cfg.MinRecords {
		s.startBuild()
	}
}

// installed runs inside install, once m serves: it snapshots m (on its own goroutine: the
// write and its fsyncs stay off the hot path) and reconciles m with a configuration that
// changed while m was being built.
func (s *Stage) installed(m *Model) {
	if d := s.ext.snaps; d != nil && !s.ext.loading {
		s.ext.saves.Add(1)
		ctx := s.ext.saving
		go func() {
			defer s.ext.saves.Done()
			path, err := d.SaveContext(ctx, m)
			if err != nil && cutBy(ctx, err) {
				s.cutSave("model snapshot", 0)
				return
			}
			if err != nil {
				s.deps.Log.Error().Err(err).Uint64("model_version", m.Version).Msg("model snapshot failed; the model keeps serving")
				return
			}
			s.deps.Log.Debug().Str("file", path).Uint64("model_version", m.Version).Msg("model snapshot written")
		}()
		// The keys' state beside it, at most once per refresh_interval (it is every key's
		// window and model: about keys x 15 KB) and at the stop (Close).
		if time.Since(s.ext.keysSaved) >= s.cfg.RefreshInterval {
			s.saveKeys(false)
		}
	}
	s.reconcile(false)
}

// openSnapshots opens detect.state_dir, puts its saved window back (window_restore.go) and
// installs its newest fitting snapshot, which then scores at once; the next model is built on
// the usual triggers from the restored window (at once when the snapshot is not the model that
// served at the window's save), or, without a saved window, as soon as the window holds
// min_records. A directory that cannot be created or read is an error (the configuration
// asks for snapshots); a snapshot that cannot be used is logged and skipped.
func (s *Stage) openSnapshots(ctx context.Context) error {
	if s.cfg.StateDir == "" {
		return nil
	}
	d, err := OpenSnapshotDir(s.cfg.StateDir, s.cfg.Snapshots, s.deps.Log)
	if err != nil {
		return err
	}
	s.ext.snaps = d
	if err := s.loadKeys(ctx); err != nil {
		return err
	}
	w, err := s.loadWindow(ctx) // (before the model: its install counts the followers over it)
	if err != nil {
		return err
	}
	ld, err := d.LoadNewestContext(ctx, s.features, s.cfg)
	if err != nil {
		return err
	}
	if ld.Model == nil {
		next := "the first model is built from the window once it holds min_records"
		if s.deps.Role == RoleScorer { // (it builds none: newuser31, the line said it would)
			next = "the first model is the builder's, read from run.model_topic"
		}
		s.deps.Log.Info().Str("dir", d.Dir()).Int("skipped", len(ld.Skipped)).Int("window", s.win.Len()).
			Msg("no usable model snapshot: " + next)
		return nil
	}
	s.ext.loading = true
	err = s.install(ld.Model)
	s.ext.loading = false
	if err != nil {
		s.deps.Log.Warn().Err(err).Str("file", ld.Path).Msg("model snapshot could not be installed; the first model is built from the stream")
		return nil
	}
	s.resumeTriggers(w, ld.Model) // (window_restore.go)
	s.deps.Log.Info().Str("file", ld.Path).Uint64("model_version", ld.Model.Version).Time("built_at", ld.Model.BuiltAt).
		Bool("rebuild_due", s.ext.rebuildDue).Msg("model loaded from snapshot: scoring resumes at once")
	return nil
}

// resizeWindow re-creates the window with a new capacity, keeping its newest records (as many
// as fit), and the identities of those records with it.
func (s *Stage) resizeWindow(capacity int) error {
	w, err := microcluster.New(capacity, len(s.features), s.withSD)
	if err != nil {
		return fmt.Errorf("detect: new window: %w", err)
	}
	cols, sds := s.win.Snapshot()
	n := s.win.Len()
	from := n - min(n, capacity)
	for j := range cols {
		cols[j] = cols[j][from:]
		if sds != nil {
			sds[j] = sds[j][from:]
		}
	}
	if n > from {
		if err := w.Push(cols, sds, nil); err != nil {
			return fmt.Errorf("detect: filling the resized window: %w", err)
		}
	}
	s.win = w
	s.recs = s.recs.resize(capacity)
	s.alarms, s.series = newAlarmCap(capacity), seriesAlarms{pos: s.series.pos} // (the keys' caps keep positions)
	// The counts follow the window's records. (A failure, returned, left the window resized
	// under the configuration of before.)
	s.followAfresh()
	return nil
}
