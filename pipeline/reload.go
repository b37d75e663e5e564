package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/stages/detect"
)

// Hot reload: on SIGHUP, or when the config file's content changes, the file is loaded and
// validated, compared key by key with the configuration in force, and applied without
// stopping:
//
//   - live keys apply to the next batch, keeping the window and the model (version unchanged):
//     detect's thresholds and triggers (detect.changeKinds lists them: density.eta/delta/mode/
//     samples, combine, distance.n (the w* policy), flag_by, min_score, flag_clear, alarm_rate,
//     alert_cooldown, min_records, refresh_*, recalibrate_records, before_model, recent_*,
//     hypercube.*, proclus.*, keys.rebuild_records, keys.tail), and sink.emit;
//   - rebuild keys start a model rebuild from the window at once (the previous model scores
//     meanwhile; the version increments when the new one serves): detect.distance.k/m,
//     detect.density.clusters/iterations, detect.seed, detect.score.*, and detect.window (the
//     window is re-created with its newest records, as many as fit);
//   - every other key (device, ingest.* including the features, the rest of sink.*, run.*,
//     detect.state_dir/snapshots, detect.key_by and the other detect.keys.*, and under key_by
//     detect.score.detectors/combine, which shape the keys' models too) cannot change
//     under a running consumer, decoder, writer or loop (or the keys' held state): such a
//     reload is rejected whole, naming the keys, and a restart applies it. The features need a
//     restart because the decoder and the Arrow schema are fixed at start; a restart then
//     starts from an empty window, since a snapshot of other features is refused.
//
// A rejected reload (invalid file, invalid values, a restart key) changes nothing: the running
// configuration keeps going, and the reason is returned and logged.

// ChangeClass lists the keys that differ between two configurations, by how they apply.
type ChangeClass struct {
	Live, Rebuild, Restart []string
}

// ClassifyChanges compares old and new key by key (YAML paths, "detect.density.eta").
func ClassifyChanges(old, new Config) ChangeClass {
	var c ChangeClass
	for _, ch := range detect.ConfigChanges(old.Detect, new.Detect) {
		switch ch.Kind {
		case detect.ChangeLive:
			c.Live = append(c.Live, ch.Key)
		case detect.ChangeRebuild:
			c.Rebuild = append(c.Rebuild, ch.Key)
		default:
			c.Restart = append(c.Restart, ch.Key)
		}
	}
	o, n := old, new
	o.Detect, n.Detect = detect.Config{}, detect.Config{} // classified above
	for _, k := range config.Diff("", o, n) {
		if k == "sink.emit" {
			c.Live = append(c.Live, k)
		} else {
			c.Restart = append(c.Restart, k)
		}
	}
	return c
}

// ReloadResult says what a reload applied.
type ReloadResult struct {
	// Live are the keys applied at once; Rebuild the keys applied by a model rebuild. Both
	// empty: the new configuration equals the running one.
	Live, Rebuild []string
	// RebuildStarted: a rebuild started now (else it starts when the running one ends, or
	// once the window holds min_records).
	RebuildStarted bool
	// RebuildWaits: what a rebuild not started waits for, in words (detect.Reconfiguration;
	// empty when one started or none is needed). Logged as rebuild_waits.
	RebuildWaits string
}

// ErrReloadRejected is wrapped by every reload error: nothing was changed.
var ErrReloadRejected = errors.New("pipeline: reload rejected, the running configuration keeps going")

// reconfRequest carries a new detect configuration to the detect goroutine.
type reconfRequest struct {
	cfg   detect.Config
	reply chan reconfReply // capacity 1: the detect goroutine never blocks on it
}

type reconfReply struct {
	r   detect.Reconfiguration
	err error
}

// applyReconf runs on the detect goroutine.
func (p *Pipeline) applyReconf(req reconfRequest) {
	r, err := p.det.Reconfigure(req.cfg)
	req.reply <- reconfReply{r, err}
}

// reconfigureDetect hands cfg to the detect goroutine and waits for it to apply it (between
// two batches). It fails when ctx ends first or the pipeline is not running.
func (p *Pipeline) reconfigureDetect(ctx context.Context, cfg detect.Config) (detect.Reconfiguration, error) {
	req := reconfRequest{cfg: cfg, reply: make(chan reconfReply, 1)}
	select {
	case p.reconf <- req:
	case <-p.detectDone:
		return detect.Reconfiguration{}, errors.New("the pipeline is not running")
	case <-ctx.Done():
		return detect.Reconfiguration{}, fmt.Errorf("waiting for the detect stage: %w", ctx.Err())
	}
	rep := <-req.reply // the detect goroutine answers at once
	return rep.r, rep.err
}

// Reloader applies new configurations to a running Pipeline: from a file on SIGHUP or when
// the file changes (Watch), or given directly (Apply). Its methods are safe for concurrent
// use; reloads are applied one at a time.
type Reloader struct {
	p    *Pipeline
	path string
	log  zerolog.Logger

	mu  sync.Mutex
	cur Config // the configuration in force

	// The file as last seen by Watch: a change of mtime or size makes it hash the content,
	// and only another hash reloads (a touch or a rewrite of the same bytes does nothing).
	seenMod  time.Time
	seenSize int64
	seenHash [sha256.Size]byte

	watching func() // test hook: called once Watch receives SIGHUP
}

// NewReloader makes the reloader of p, whose configuration was loaded from path (empty: no
// file; only Apply works). The file is taken as seen only when it still holds p's
// configuration: outlierd run makes the reloader after the start (up to 30 s of topic check),
// and an edit saved meanwhile is reloaded at Watch's first look, not taken for the one in force.
func NewReloader(p *Pipeline, path string, log zerolog.Logger) *Reloader {
	r := &Reloader{p: p, path: path, log: log, cur: p.cfg}
	if path != "" {
		if st, data, err := readConfigFile(path); err == nil {
			if cfg, err := LoadConfigBytes(path, data); err == nil && equalConfigs(cfg, p.cfg) {
				r.seenMod, r.seenSize, r.seenHash = st.ModTime(), st.Size(), sha256.Sum256(data)
			}
		}
	}
	return r
}

// equalConfigs says whether a and b differ in no key a reload compares.
func equalConfigs(a, b Config) bool {
	c := ClassifyChanges(a, b)
	return len(c.Live)+len(c.Rebuild)+len(c.Restart) == 0
}

// Config is the configuration in force.
func (r *Reloader) Config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Apply makes cfg the running configuration (see the rules at the top of this file). An
// error wraps ErrReloadRejected and says why; nothing changed then.
func (r *Reloader) Apply(ctx context.Context, cfg Config) (ReloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res ReloadResult
	if err := cfg.Validate(); err != nil {
		return res, fmt.Errorf("%w: invalid configuration: %w", ErrReloadRejected, err)
	}
	ch := ClassifyChanges(r.cur, cfg)
	if len(ch.Restart) > 0 {
		return res, fmt.Errorf("%w: %s cannot change while running; restart outlierd to apply it", ErrReloadRejected, strings.Join(ch.Restart, ", "))
	}
	if len(ch.Live)+len(ch.Rebuild) == 0 {
		return res, nil
	}
	if len(detect.ConfigChanges(r.cur.Detect, cfg.Detect)) > 0 {
		dr, err := r.p.reconfigureDetect(ctx, cfg.Detect)
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrReloadRejected, err)
		}
		res.RebuildStarted, res.RebuildWaits = dr.RebuildStarted, dr.RebuildWaits
		r.p.metrics.SetStaleModelAfter(cfg.Run.StaleModelAfter, cfg.Detect.RefreshInterval)
		if r.p.follow != nil { // (detect.window and the like bound the publications it takes)
			r.p.follow.bound.Store(int64(cfg.modelTopic().publicationBound))
		}
	}
	if cfg.Sink.Emit != r.cur.Sink.Emit {
		// Validated above, so it cannot fail after the detect part applied.
		if err := r.p.emit(cfg.Sink.Emit); err != nil {
			return res, fmt.Errorf("pipeline: reload: sink: %w", err)
		}
	}
	r.cur = cfg
	res.Live, res.Rebuild = ch.Live, ch.Rebuild
	return res, nil
}

// Reload loads the file (strictly, validated) and applies it.
func (r *Reloader) Reload(ctx context.Context) (ReloadResult, error) {
	if r.path == "" {
		return ReloadResult{}, fmt.Errorf("%w: no config file to reload", ErrReloadRejected)
	}
	cfg, err := LoadConfig(r.path)
	if err != nil {
		return ReloadResult{}, fmt.Errorf("%w: %w", ErrReloadRejected, err)
	}
	return r.Apply(ctx, cfg)
}

// reloadAndLog reloads and logs the outcome (Watch has nobody else to tell).
func (r *Reloader) reloadAndLog(ctx context.Context, why string) {
	res, err := r.Reload(ctx)
	switch {
	case err != nil:
		r.log.Error().Err(err).Str("trigger", why).Str("file", r.path).Msg("config reload rejected")
	case len(res.Live)+len(res.Rebuild) == 0:
		r.log.Info().Str("trigger", why).Str("file", r.path).Msg("config reloaded: no change")
	default:
		ev := r.log.Info().Str("trigger", why).Str("file", r.path).Strs("live", res.Live).Strs("rebuild", res.Rebuild).
			Bool("rebuild_started", res.RebuildStarted)
		if res.RebuildWaits != "" {
			ev = ev.Str("rebuild_waits", res.RebuildWaits)
		}
		ev.Msg("config reloaded")
	}
}

// Watch reloads the file on SIGHUP and when its content changes (checked every interval: the
// mtime and size, then a SHA-256 of the content), until ctx ends. Outcomes are logged, and so
// is a file gone or unreadable (once).
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) {
	hup, stop := ReloadSignals()
	defer stop()
	r.WatchSignals(ctx, interval, hup)
}

// ReloadSignals catches SIGHUP from now on, for a Reloader's WatchSignals: outlierd run calls
// it before the start, during which SIGHUP's default action ended the process (`systemctl
// reload` just after a start; systemd counts SIGHUP a clean exit and does not restart it). One
// signal received before the watcher runs waits for it. stop ends the catching.
func ReloadSignals() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// WatchSignals is Watch reloading on the signals of hup (ReloadSignals').
func (r *Reloader) WatchSignals(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	if r.watching != nil {
		r.watching()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	misses := 0 // checks in a row that could not read the file
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.noteFile() // the reload below reads this content: not again on the next tick
			r.reloadAndLog(ctx, "SIGHUP")
		case <-t.C:
			changed, err := r.fileChanged()
			// A file gone (or unreadable) keeps the running configuration, as an edit would
			// not: said once, from the second check in a row (an editor that replaces the file
			// can leave none for a moment), and once more when it is back.
			switch {
			case err != nil:
				if misses++; misses == 2 {
					r.log.Warn().Err(err).Str("file", r.path).
						Msg("config file gone or unreadable: the running configuration is kept (a restart would fail; a reload needs the file back)")
				}
			case misses >= 2:
				r.log.Info().Str("file", r.path).Msg("config file readable again")
				misses = 0
			default:
				misses = 0
			}
			if changed {
				r.reloadAndLog(ctx, "file changed")
			}
		}
	}
}

// fileChanged reports a new content of the file since it was last seen, and remembers it
// (so an invalid file is reported once, not every interval); err says why the file could
// not be read (the running configuration stays).
func (r *Reloader) fileChanged() (bool, error) {
	if r.path == "" {
		return false, nil
	}
	st, err := os.Stat(r.path)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	same := st.ModTime().Equal(r.seenMod) && st.Size() == r.seenSize
	r.mu.Unlock()
	if same {
		return false, nil
	}
	_, data, err := readConfigFile(r.path)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seenMod, r.seenSize = st.ModTime(), st.Size()
	if sum == r.seenHash {
		return false, nil
	}
	r.seenHash = sum
	return true, nil
}

// noteFile remembers the file's current state as seen.
func (r *Reloader) noteFile() {
	if r.path == "" {
		return
	}
	if st, data, err := readConfigFile(r.path); err == nil {
		r.mu.Lock()
		r.seenMod, r.seenSize, r.seenHash = st.ModTime(), st.Size(), sha256.Sum256(data)
		r.mu.Unlock()
	}
}

// readConfigFile returns the file's state and content, read through one open file.
func readConfigFile(path string) (os.FileInfo, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, nil, err
	}
	return st, b.Bytes(), nil
}
