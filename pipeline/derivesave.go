package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outlierd/outlierd/stages/ingest"
)

// The derive state's saves to detect.state_dir (ingest/derive_state.go: the format, the
// watermark, what a load refuses). Periodically where the keys' state is saved, with a new
// model (modelChanged), at most once per detect.refresh_interval: encoded on the fetch goroutine
// between two Next calls (a copy of the series at one point of the stream), written on a
// goroutine of its own; skipped while the previous one is still being written. And at Run's end,
// after the final commit, once the one in flight is written (an older one finishing later would
// replace it).

// deriveStater is a source that keeps ingest.derive's series across a restart.
type deriveStater interface {
	LoadDeriveState(ctx context.Context, dir string)
	EncodeDeriveState() (payload []byte, st ingest.StateSaved, ok bool)
	WriteDeriveState(ctx context.Context, dir string, payload []byte) error
}

// deriveStatser is a source with ingest.derive's figures (outlierd_derive_*).
type deriveStatser interface {
	DeriveStats() (st ingest.DeriveStats, ok bool)
}

// noteDerive passes the source's ingest.derive figures to the metrics: after the load of its
// state, and after each Next that handed out a batch (on the fetch goroutine).
func (p *Pipeline) noteDerive() {
	if ds, ok := p.src.(deriveStatser); ok {
		if st, ok := ds.DeriveStats(); ok {
			p.metrics.SetDerive(st.Series, st.Evictions, st.Restored)
		}
	}
}

// deriveSaves is the pipeline's state of the derive state's saves.
type deriveSaves struct {
	due     atomic.Bool // a new model: a save is due (modelChanged sets it)
	writing atomic.Bool // a periodic write in flight
	last    time.Time   // the last periodic save's start (the fetch goroutine's)
	wg      sync.WaitGroup
}

// deriveSaveDue marks a periodic save due (a new model: the keys' state is saved with it).
func (p *Pipeline) deriveSaveDue() { p.deriveSaves.due.Store(true) }

// maybeSaveDerive starts a periodic save when one is due, on the fetch goroutine between two
// Next calls; ctx (the hard stop) ends its write.
func (p *Pipeline) maybeSaveDerive(ctx context.Context) {
	ds, ok := p.src.(deriveStater)
	sv := &p.deriveSaves
	if !ok || p.cfg.Detect.StateDir == "" || !sv.due.Load() || time.Since(sv.last) < p.cfg.Detect.RefreshInterval {
		return
	}
	if !sv.writing.CompareAndSwap(false, true) {
		return // (tried again with a later model)
	}
	sv.due.Store(false)
	sv.last = time.Now()
	payload, st, ok := ds.EncodeDeriveState()
	if !ok {
		sv.writing.Store(false)
		return
	}
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		defer sv.writing.Store(false)
		if err := ds.WriteDeriveState(ctx, p.cfg.Detect.StateDir, payload); err != nil {
			p.log.Warn().Err(err).Msg("derive state not saved (periodic): the last save stands")
			return
		}
		p.log.Debug().Int("keys", st.Keys).Int("bytes", st.Bytes).Msg("derive state saved to detect.state_dir")
	}()
}

// saveDeriveState saves the source's derive state at Run's end, by the stop's deadline
// (closeBy), after the periodic write in flight. After the final commit: every record applied is
// then committed (a clean stop), or read again after the restart at or below the saved
// watermark (not applied twice). A failed save is a warning: the last save stands.
func (p *Pipeline) saveDeriveState(stoppedAt int64) {
	ds, ok := p.src.(deriveStater)
	if !ok || p.cfg.Detect.StateDir == "" {
		return
	}
	p.deriveSaves.wg.Wait()
	payload, st, ok := ds.EncodeDeriveState()
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), closeBy(stoppedAt, p.cfg.Run.ShutdownTimeout))
	defer cancel()
	if err := ds.WriteDeriveState(ctx, p.cfg.Detect.StateDir, payload); err != nil {
		p.log.Warn().Err(err).Msg("derive state not saved at the stop: the last save stands (its series are older: the records since count in their windows again, or not at all, for `last` records a key)")
		return
	}
	p.log.Info().Int("keys", st.Keys).Int("skipped_long_keys", st.Skipped).Int("bytes", st.Bytes).Msg("derive state saved to detect.state_dir")
}
