package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// Stats are the pipeline's running counts (safe to read from any goroutine).
type Stats struct {
	RecordsIn    atomic.Int64 // records decoded into batches
	RecordsOut   atomic.Int64 // records whose batch the sink wrote (acknowledged)
	Flagged      atomic.Int64 // records with the combined verdict "outlier"
	DeadLetters  atomic.Int64 // messages sent to the dead-letter topic
	ModelVersion atomic.Uint64
	Commits      atomic.Int64
	// KeyModelsRead counts the messages a scorer read from the model topic's partitions of its
	// keys (keyfollow.go): what its restores at rebalances and the builder's updates cost it.
	KeyModelsRead atomic.Int64
	// ModelTopicReadFailures counts the reads of the model topic by a scorer's followers that
	// failed (each retried after a backoff; outlierd_model_topic_read_failures_total).
	ModelTopicReadFailures atomic.Int64
}

// Pipeline is one running instance: a source, the detect stage and a sink.
type Pipeline struct {
	cfg Config
	log zerolog.Logger
	// src, stage and snk are the stages as Run's goroutines see them (stages.go): New sets them
	// to an ingest.Source, det and a sink.Sink. det is the concrete detect stage, for what only
	// the wiring touches (roles, live reloads, Detect); reload sets the sink's emit through
	// emit.
	src   Source
	stage Stage
	snk   Sink
	det   *detect.Stage
	emit  func(sink.Emit) error
	dev   *Device // where SolvingSet and k-NN scoring run (cpu or a GPU)
	stats Stats
	// metrics are the Prometheus series (pipeline/metrics), fed once per batch, never per
	// record; lag polls the consumer lag while the http listener is on (nil when it is off).
	metrics *metrics.Metrics
	lag     *metrics.LagPoller
	// watchModels, when set (tests, benchmarks), is told of every new model after the
	// pipeline's own use of it (modelChanged), on the goroutine that installs it.
	watchModels func(*detect.Model)
	// reconf carries live reloads to the detect goroutine (reload.go); detectDone is closed
	// when that goroutine ends, so a reload never waits for a loop that is gone.
	reconf     chan reconfRequest
	detectDone chan struct{}
	// role is run.role (roles.go): a builder publishes its models (pub), a scorer follows
	// them (models, fed by follow); both read the model topic at start.
	role   detect.Role
	pub    *modelPublisher
	follow *modelFollower
	models chan *followed
	// deriveSaves are the derive state's saves to detect.state_dir (derivesave.go).
	deriveSaves deriveSaves
	// flushModels, a builder's, is closed at a graceful stop once its drain is done and its
	// offsets committed: its publishers then write what is queued (the last model, the keys'
	// models held back) and end (Run).
	flushModels chan struct{}
	// With detect.key_by (modelkeys.go): a builder's publisher of the keys' models, and the
	// highest key model version on the topic at its start; a scorer's inbox of them.
	keyPub     *keyPublisher
	keyHighest uint64
	keysOn0    *partition0Keys // a builder's: key model messages on the model topic's partition 0 (keyspart0.go)
	keys       *keyInbox
	// scope is a scorer's partitions, whose keys' models it keeps (modelkeys.go).
	scope     *keyScope
	keyFollow *keyFollowers               // a scorer's readers of its partitions' keys' models (keyfollow.go)
	keyQuery  chan chan map[string]uint64 // KeyVersions' requests to the detect goroutine
	paced     pacedLogs                   // the log lines spaced in time (noteWaiting, noteDeadLetters)
}

// New connects the stages (no goroutine starts before Run), with metrics of its own. ctx bounds
// its waits (the topic check, a builder's removal of a dead predecessor from its group, the load
// of detect.state_dir's snapshots): when ctx ends first, New returns an error and ctx.Err()
// tells the caller it was a stop, as a stop during Run's start is (cmd/outlierd exits 0 then).
func New(ctx context.Context, cfg Config, log zerolog.Logger) (*Pipeline, error) {
	return NewWithMetrics(ctx, cfg, log, metrics.New())
}

// NewWithMetrics is New feeding m, which the caller may serve already (cmd/outlierd does): while
// New checks the topics (up to topicCheckWait for brokers that cannot be reached), /readyz says
// what the check waits for, and, when New fails, why.
func NewWithMetrics(ctx context.Context, cfg Config, log zerolog.Logger, m *metrics.Metrics) (_ *Pipeline, err error) {
	// A stop during the start: /readyz says "stopping" from the signal on (not what the start
	// waited for, nor "start failed" once New returns: cmd/outlierd exits 0 then).
	stopReady := context.AfterFunc(ctx, m.SetStopping)
	defer func() {
		stopReady()
		switch {
		case err != nil && ctx.Err() != nil:
			m.SetStopping()
		case err != nil:
			m.SetStarting("start failed: " + strings.ReplaceAll(err.Error(), "\n", "; ")) // errors.Join's lines
		default:
			m.SetStarting("")
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, log: log, metrics: m, reconf: make(chan reconfRequest), detectDone: make(chan struct{})}
	defer func() {
		if err != nil { // every failure from here closes what was opened before it
			closeCtx, cancel := context.WithDeadline(context.Background(), closeBy(0, cfg.Run.ShutdownTimeout))
			defer cancel()
			if cerr := p.closeOpened(closeCtx); cerr != nil { // (no build runs before Run; the stage saves what it loaded, by then)
				log.Warn().Err(cerr).Msg("closing what the failed start opened")
			}
		}
	}()
	// The device first: `device: cuda` without a usable GPU is refused at once, not after the
	// topic check (up to topicCheckWait for brokers that cannot be reached).
	if p.dev, err = OpenDevice(string(cfg.Device), log); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if err := checkTopics(ctx, cfg, log, m.SetStarting); err != nil { // before the reader joins (topics.go)
		if ctx.Err() != nil { // the check was cut: what it found last (a topic not listed yet) proves nothing
			return nil, startStopped(ctx)
		}
		return nil, err
	}
	m.SetStarting(fmt.Sprintf("topics checked; starting the source, the sink and the detectors (device %s)", p.dev.Name()))
	in := cfg.Ingest
	if cfg.Run.Role == detect.RoleBuilder {
		in.GroupID = BuilderGroup(in.GroupID) // the builder reads every partition
		leaveDeadBuilders(ctx, cfg, log)      // before the join, so that it need not wait out a dead one
		if ctx.Err() != nil {
			return nil, startStopped(ctx)
		}
	}
	// The source's own checkpointer: its batches' acks mark records done there, and only its
	// Commit reads it.
	src, err := ingest.NewSource(in, checkpoint.New(), memory.DefaultAllocator, log)
	if err != nil {
		return nil, fmt.Errorf("pipeline: source: %w", err)
	}
	p.src = src
	snk, err := sink.New(cfg.Sink)
	if err != nil {
		return nil, fmt.Errorf("pipeline: sink: %w", err)
	}
	p.snk, p.emit = snk, snk.SetEmit
	p.role = cfg.Run.Role
	// On a GPU the host work of one batch overlaps the device's scoring of the one before
	// (detect.Deps.Overlap: the same verdicts; detectLoop passes a batch on once it is scored).
	deps := detect.Deps{Log: log, Role: p.role, Accelerator: p.dev.Accelerator(), OnModel: p.modelChanged, Cycles: Cycles(cfg.Ingest)}
	if p.dev.IsGPU() {
		deps.Overlap = detect.OverlapOnGPU
	}
	// A column redefined under its name moves the models built on its old values aside first
	// (columndefs.go); the alert groups of the alarm state moved aside with them are kept.
	aside, err := checkColumns(ctx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	deps.AlertGroupsFrom = aside
	// The derive state (ingest.derive's series, saved at the last stop) after the columns' check:
	// one saved under other definitions is refused by its own record of them (cold, logged).
	if ds, ok := p.src.(deriveStater); ok && cfg.Detect.StateDir != "" {
		ds.LoadDeriveState(ctx, cfg.Detect.StateDir)
	}
	p.noteDerive()
	// (ctx ends the load of detect.state_dir's snapshots too: seconds at 100,000 keys.)
	if p.det, err = detect.NewStageContext(ctx, cfg.Detect, cfg.Ingest.Columns(), cfg.Ingest.Uncertainty != nil, deps); err != nil {
		if ctx.Err() != nil {
			return nil, startStopped(ctx)
		}
		return nil, fmt.Errorf("pipeline: detect: %w", err)
	}
	p.stage = p.det
	if err := p.setUpRole(); err != nil { // (a role client it opened is closed too)
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	p.metrics.SetDevice(p.dev.Name())
	if g := p.dev.GPU(); g != nil {
		p.metrics.SetKernelTimes(func() map[string]metrics.KernelTime {
			out := map[string]metrics.KernelTime{}
			for k, t := range g.KernelTimes() {
				out[k] = metrics.KernelTime{Launches: t.Launches, Time: t.Time}
			}
			return out
		})
	}
	p.metrics.SetStaleModelAfter(cfg.Run.StaleModelAfter, cfg.Detect.RefreshInterval)
	if cfg.HTTP.Enabled() {
		if p.lag, err = openLagPoller(p); err != nil {
			return nil, fmt.Errorf("pipeline: metrics: %w", err)
		}
	}
	if m := p.det.Model(); m != nil { // resumed from a snapshot (detect.state_dir)
		p.stats.ModelVersion.Store(m.Version)
	}
	return p, nil
}

// startStopped is New's error when ctx ended during its waits (a SIGTERM during the start).
func startStopped(ctx context.Context) error {
	return fmt.Errorf("pipeline: the start was stopped: %w", context.Cause(ctx))
}

// Stats are the running counts.
func (p *Pipeline) Stats() *Stats { return &p.stats }

// DeviceName is where detection runs: "cpu" or "cuda:<GPU name>".
func (p *Pipeline) DeviceName() string { return p.dev.Name() }

// Detect is the detect stage (for metrics).
func (p *Pipeline) Detect() *detect.Stage { return p.det }

// Metrics are the Prometheus series and the readiness of this pipeline; cmd/outlierd serves
// them with metrics.Listen on http.listen.
func (p *Pipeline) Metrics() *metrics.Metrics { return p.metrics }

// Run processes the stream until ctx ends (the soft stop: fetching stops, batches in flight
// are scored, written and acknowledged, offsets committed), or until a stage fails. After
// ctx ends, the drain has cfg.Run.ShutdownTimeout; past it the work is abandoned (the hard
// stop) and is re-read after a restart, since its offsets were never committed.
//
// Goroutines, all started and awaited here: fetch (source -> fetched: batches and dead
// letters), detect (fetched -> scored), sink (scored -> broker, then the acks: sinkloop.go),
// commit (a ticker committing the acked offsets: commit.go), lag (the lag poller, when on),
// and the role's (startRole: a builder's publishers, a scorer's model followers).
func (p *Pipeline) Run(ctx context.Context) error {
	p.log.Info().Str("flow", p.cfg.summary()).Str("device", p.dev.Name()).Msg("pipeline starting")
	// work ends on the hard stop or a failure; fetching ends with ctx (the soft stop).
	work, abandon := context.WithCancelCause(context.Background())
	defer abandon(nil)
	var stoppedAt atomic.Int64 // the soft stop's time (UnixNano), 0 before it: closeBy
	stopHard := context.AfterFunc(ctx, func() {
		stoppedAt.Store(time.Now().UnixNano())
		t := time.AfterFunc(p.cfg.Run.ShutdownTimeout, func() {
			abandon(fmt.Errorf("shutdown timeout %s passed: abandoning in-flight work", p.cfg.Run.ShutdownTimeout))
		})
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopHard()
	fetchCtx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	context.AfterFunc(work, stopFetch)

	fetched := make(chan item, p.cfg.Run.QueueBatches)
	scored := make(chan item, p.cfg.Run.QueueBatches)
	p.metrics.SetQueue("fetched", func() int { return len(fetched) })
	p.metrics.SetQueue("scored", func() int { return len(scored) })
	// /readyz says "not ready" from the soft stop on, and once Run has returned.
	stopReady := context.AfterFunc(ctx, p.metrics.SetStopping)
	defer stopReady()
	defer p.metrics.SetStopping()
	roleDone, err := p.startRole(ctx, work)
	if err != nil {
		abandon(err)
		<-roleDone
		// (nothing was pushed: no build runs; the state's save of what the stage loaded ends by the deadline)
		closeCtx, cancel := context.WithDeadline(context.Background(), closeBy(stoppedAt.Load(), p.cfg.Run.ShutdownTimeout))
		defer cancel()
		if ctx.Err() != nil { // the soft stop cut the start's reads: a clean stop, nothing fetched
			p.log.Info().Err(err).Msg("stopped during the start")
			err = nil
		}
		return errors.Join(err, p.closeOpened(closeCtx))
	}
	p.alertScope()                      // (after startRole: a scorer's keys' scope is its own, followAssignments')
	if m := p.stage.Model(); m != nil { // loaded from a snapshot: NewStage announces nothing
		p.showModel(m)
	} else {
		p.noteWaiting(true)
	}
	lagDone := make(chan struct{})
	if p.lag != nil {
		go func() { // lag: polls the brokers until the end of Run
			defer close(lagDone)
			p.lag.Run(work)
		}()
	} else {
		close(lagDone)
	}
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		abandon(err)
	}

	wg.Add(3)
	go func() { // fetch
		defer wg.Done()
		defer close(fetched)
		if err := p.fetchLoop(fetchCtx, work, fetched); err != nil {
			fail(err)
		}
	}()
	go func() { // detect
		defer wg.Done()
		defer close(scored)
		if err := p.detectLoop(work, ctx.Done(), fetched, scored); err != nil {
			fail(err)
		}
		for it := range fetched { // after a failure or the hard stop: never acked, read again later
			it.release()
		}
		// (the batches in flight: waited for until the stop's deadline, then left to end alone)
		abandonBy, cancel := context.WithDeadline(context.Background(), closeBy(stoppedAt.Load(), p.cfg.Run.ShutdownTimeout))
		p.stage.AbandonContext(abandonBy)
		cancel()
	}()
	go func() { // sink
		defer wg.Done()
		if p.role == detect.RoleBuilder {
			p.builderAckLoop(scored) // a builder emits nothing: a batch in the window is done
			return
		}
		if err := p.sinkLoop(work, scored); err != nil {
			fail(err)
		}
		for it := range scored { // after a failure: release what is left (never acked, re-read later)
			it.release()
		}
	}()
	commitDone := make(chan struct{})
	go func() { // commit
		defer close(commitDone)
		p.commitLoop(work)
	}()
	wg.Wait()
	// Everything written was acknowledged: commit it before leaving (finalCommit).
	var commitErr error // (failed: reported after a builder's flush below)
	if work.Err() == nil {
		commitErr = p.finalCommit(work)
	}
	// A failure, the hard stop, or a final commit that failed: batches scored may be dropped
	// unwritten, or written and not committed: read again after a restart, they must not be
	// in a state saved now (TestFailedFinalCommitKeepsTheLastSave).
	if (work.Err() != nil || commitErr != nil) && p.det != nil {
		p.det.PassedOnDropped()
	}
	// A builder's models built before the stop reach the scorers: its publishers write what is
	// queued, bounded by the hard stop (work), and end. After the final commit: a builder's
	// commit is one quick request that docs/OPERATIONS.md promises at a graceful stop, and its
	// batches are done once in the window (builderAckLoop), not once a model of them is out;
	// a publication can take many writes, retried, on another cluster (sink.brokers), which
	// must not starve the commit: published first, a model topic that cannot be reached would
	// take the whole shutdown_timeout, and the commit would be cut too (the batches read again).
	// A model build in progress is waited for there too (bounded by the hard stop: its model is
	// lost past it, logged), after the commit: the records are done whether it is built or not.
	// A final commit that failed (the drain complete) publishes all the same: the models are
	// built from records the builder did process; the next owner reads the uncommitted ones again
	// and builds from them too (at least once), and until its first model the scorers serve the
	// newest there is, not an older one. A model in the stream's window is a snapshot, not a
	// count: nothing in it counts twice (its versions stay below the next owner's: roles.go).
	if p.flushModels != nil && work.Err() == nil {
		if commitErr != nil {
			p.log.Warn().Err(commitErr).Msg("final commit failed: the models built are published all the same (built from records processed; the next owner reads the uncommitted records again)")
		}
		p.det.AwaitBuild(work)
		close(p.flushModels)
		<-roleDone
	}
	if commitErr != nil {
		fail(commitErr)
	}
	abandon(nil)
	<-commitDone
	<-lagDone
	<-roleDone
	p.saveDeriveState(stoppedAt.Load())
	closeCtx, cancelClose := context.WithDeadline(context.Background(), closeBy(stoppedAt.Load(), p.cfg.Run.ShutdownTimeout))
	closeErr := p.closeOpened(closeCtx)
	cancelClose()
	if firstErr != nil {
		return firstErr
	}
	if cause := context.Cause(work); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return closeErr
}

// closeBy is the deadline of the stage's close at Run's end (and at a start's failure or stop),
// until which a model build in progress and the keys' and alarm state's save are waited for:
// the hard stop's (shutdown_timeout after the soft stop at stoppedAt, UnixNano; past already
// when the hard stop came), or, for a run that ended without a stop (a failure),
// shutdown_timeout from now. A build still running then is lost, a save cut (detect.Stage.
// CloseContext logs them): the supervisor's kill follows the deadline.
func closeBy(stoppedAt int64, timeout time.Duration) time.Time {
	if stoppedAt == 0 {
		return time.Now().Add(timeout)
	}
	return time.Unix(0, stoppedAt).Add(timeout)
}

// fetchLoop reads batches until ctx ends and sends them, and the dead letters met on the way,
// to the detect goroutine; it writes nothing.
func (p *Pipeline) fetchLoop(ctx, work context.Context, out chan<- item) error {
	fetchFailures := 0 // consecutive transient fetch errors (the backoff grows with them)
	send := func(it item) bool {
		select {
		case out <- it: // blocks while the stages downstream are full: backpressure
			return true
		case <-work.Done():
			it.release()
			return false
		}
	}
	for {
		p.maybeSaveDerive(work)
		start := time.Now()
		b, dls, err := p.src.Next(ctx)
		if b != nil || dls.Len() > 0 { // the source consumes (readiness), dead letters too
			p.metrics.Fetched(time.Since(start))
		}
		if dls.Len() > 0 && !send(item{dl: dls}) {
			b.Release()
			return nil
		}
		if b != nil {
			p.stats.RecordsIn.Add(int64(b.Len()))
			p.metrics.AddRecordsIn(b.Len())
			p.noteDerive()
			if !send(item{b: b}) {
				return nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // the soft stop
			}
			if !transient(err) {
				return fmt.Errorf("pipeline: source: %w", err)
			}
			// kafka-go's reader keeps reconnecting on its own; Next is simply called again.
			fetchFailures++
			p.log.Warn().Err(err).Int("attempt", fetchFailures).Msg("fetch failed (broker unavailable?); retrying")
			if !backoff(ctx, fetchFailures) {
				return nil
			}
			continue
		}
		fetchFailures = 0
	}
}

// waitLogEvery spaces the log lines that say how far the first model is (the readiness
// reason says it at every scrape).
const waitLogEvery = 10 * time.Second

// noteWaiting says what the first model waits for, in /readyz's reason and in the log: at the
// start, at the first batch and then every waitLogEvery until it serves.
func (p *Pipeline) noteWaiting(start bool) {
	d := p.cfg.Detect
	if p.det != nil { // the configuration in force: min_records and before_model reload live
		d = p.det.Config()
	}
	var why string
	held := -1 // a scorer's records held for the first model (-1: not a scorer under hold)
	switch {
	case p.role == detect.RoleScorer:
		// A scorer keeps no window and waits for no min_records: what it has is the records
		// fetched meanwhile (before operator29 its line said "window_records": 0 of 5000).
		why = fmt.Sprintf("waiting for the first model from the builder on run.model_topic %q", p.cfg.Run.ModelTopic)
		if d.BeforeModel == detect.BeforeModelPass {
			why += " (before_model: pass: records go out unscored until then)"
		} else if p.det != nil {
			held = p.det.HeldRecords()
			why += fmt.Sprintf(" (before_model: hold: %d records held)", held)
		}
	case d.BeforeModel == detect.BeforeModelPass:
		why = fmt.Sprintf("%d of detect.min_records=%d records in the window for the first model (before_model: pass: records go out unscored until then)",
			p.stage.Window().Len(), d.MinRecords)
	default:
		why = fmt.Sprintf("holding %d of detect.min_records=%d records for the first model (before_model: hold)", p.stage.Window().Len(), d.MinRecords)
	}
	p.metrics.SetWaiting(why)
	now := time.Now()
	if w := &p.paced; start || w.waitLogs == 1 || now.Sub(w.waitLogged) >= waitLogEvery {
		w.waitLogs++
		w.waitLogged = now
		ev := p.log.Info()
		switch {
		case held >= 0:
			ev = ev.Int("held_records", held)
		case p.role != detect.RoleScorer:
			ev = ev.Int("window_records", p.stage.Window().Len()).Int("min_records", d.MinRecords)
		}
		ev.Msg(why)
	}
}

// modelChanged is the detect stage's notice that m serves (detect.Deps.OnModel, on the detect
// goroutine, or on Run's before it starts): a new model (fresh) counts in the stats and, in a
// builder, is published; every serving model shows in the metrics, the one a reload retuned
// (w* from the top weights) too.
func (p *Pipeline) modelChanged(m *detect.Model, fresh bool) {
	if fresh {
		p.deriveSaveDue()
		p.stats.ModelVersion.Store(m.Version)
		if p.pub != nil { // with the counts the hypercube detector just reset to (a scorer's)
			p.pub.Publish(publication{model: m, hypercube: p.det.PublishedHypercube()})
		}
	}
	p.showModel(m)
	if fresh && p.watchModels != nil {
		p.watchModels(m)
	}
}

// showModel shows m, the serving model, in the metrics.
func (p *Pipeline) showModel(m *detect.Model) {
	info := metrics.ModelInfo{Version: m.Version, BuiltAt: m.BuiltAt, BuildTime: m.BuildTime, WindowRecords: m.WindowRecords}
	if m.MicroClusters != nil {
		info.MicroClusters = m.MicroClusters.Q()
	}
	if d := m.Distance; d != nil {
		info.WStar = d.WStar
		if len(d.Points) > 0 {
			info.SolvingSetSize = len(d.Points[0])
		}
	}
	p.metrics.SetModel(info)
}

// openLagPoller is newLagPoller (a variable: a test makes it fail to see New close what it
// opened).
var openLagPoller = (*Pipeline).newLagPoller

// newLagPoller polls the input topic's consumer-group lag over the source's brokers and
// security; a group with no commit starts where ingest.start_offset says.
func (p *Pipeline) newLagPoller() (*metrics.LagPoller, error) {
	in := p.cfg.Ingest
	group := in.GroupID
	if p.role == detect.RoleBuilder {
		group = BuilderGroup(group)
	}
	lc := metrics.LagConfig{Brokers: in.Brokers, Topic: in.Topic, GroupID: group,
		FromEarliest: in.StartOffset == ingest.StartEarliest, Interval: p.cfg.HTTP.LagInterval}
	if in.Security.Enabled() {
		var err error
		if lc.Transport, err = in.Security.Transport(); err != nil {
			return nil, err
		}
	}
	return metrics.NewLagPoller(lc, p.metrics, p.log)
}
