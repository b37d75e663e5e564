package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/detect"
)

// The detect goroutine: between the fetch goroutine (fetchLoop) and the sink's (sinkloop.go),
// the only one that touches the detect stage once Run has started.

// detectLoop scores every batch and passes dead letters on; held batches are flushed when the
// input ends. Live reloads (reload.go) are applied here, between batches, so the stage needs no
// lock. A scorer holding records for its first model stops taking batches once they reach
// holdBound (stopping, the soft stop, lifts that: the input then ends).
func (p *Pipeline) detectLoop(work context.Context, stopping <-chan struct{}, in <-chan item, out chan<- item) error {
	defer close(p.detectDone)
	send := func(bs []*batch.Batch) bool {
		for i, b := range bs {
			select {
			case out <- item{b: b}:
			case <-work.Done():
				for _, b := range bs[i:] {
					b.Release()
				}
				return false
			}
		}
		return true
	}
	// gpuSeen are the GPU's running totals already added to the metrics; after each batch the
	// change (this batch's kernels and copies, and those of any model rebuild since) is added.
	var gpuSeen struct {
		kernel              time.Duration
		up, down, fallbacks int64
	}
	hold, stopped := p.holdBound(), false
	keyReady, scopeChanged, keyQuery := p.scopeChannels()
	drainer, overlapped := p.stage.(Overlapped)
	for open := true; open; {
		// With overlap (detect.Deps.Overlap) the loop waits for the oldest batch's scoring or
		// the next batch, whichever comes first: a scored batch goes on at once, and the intake
		// never waits for the device alone (draining on an empty queue serialised the two:
		// docs/BENCHMARKS.md §4.9).
		var landing <-chan struct{}
		if overlapped {
			landing = drainer.Landing()
		}
		src, stop := in, stopping
		if !stopped && hold.pause(p) {
			src = nil // the fetched queue fills, then fetching waits: backpressure
		} else {
			stop = nil
		}
		select {
		case <-stop:
			stopped = true
		case <-landing:
			ready, err := drainer.LandScored()
			if err != nil {
				return fmt.Errorf("pipeline: detect: %w", err)
			}
			if !send(ready) {
				return nil
			}
		case req := <-p.reconf:
			if overlapped { // the batches in flight finish first, under the configuration they began with
				ready, err := drainer.Drain()
				if err != nil { // a scoring failure, fatal as in Process (not a rejected configuration)
					req.reply <- reconfReply{err: fmt.Errorf("the detect stage failed: %w", err)}
					return fmt.Errorf("pipeline: detect: %w", err)
				}
				if !send(ready) {
					req.reply <- reconfReply{err: errors.New("the pipeline is stopping")}
					return nil
				}
			}
			p.applyReconf(req)
		case <-keyReady: // a scorer's keys' models (modelkeys.go)
			p.det.InstallKeyModels(p.keys.take(p.scope.keep))
			p.noteKeys() // (a quiet input scores no batch that would count them)
		case reply := <-keyQuery:
			reply <- p.det.KeyVersions()
		case <-scopeChanged: // a rebalance: the alert groups and keys of the partitions moved away go
			if ok, err := p.rebalance(drainer, send); !ok {
				return err
			}
		case m := <-p.models: // a scorer's newer model (nil channel in the other roles)
			ready, err := p.installFollowed(m)
			if err != nil {
				return fmt.Errorf("pipeline: detect: %w", err)
			}
			if !send(ready) {
				return nil
			}
		case it, ok := <-src:
			if open = ok; !ok {
				break
			}
			if it.b == nil { // dead letters: straight on to the sink
				select {
				case out <- it:
				case <-work.Done():
					return nil
				}
				continue
			}
			b := it.b
			if ok, err := p.pendingRebalance(scopeChanged, drainer, send); !ok {
				b.Release()
				return err
			}
			if p.keys != nil { // the keys' models read first (a restore's, before its partitions' fetch)
				p.det.InstallKeyModels(p.keys.take(p.scope.keep))
			}
			start := time.Now()
			ready, err := p.stage.Process(work, b)
			p.metrics.ObserveBatch(metrics.StageDetect, time.Since(start))
			if g := p.dev.GPU(); g != nil {
				k, up, down := g.Counters()
				fb := p.dev.Fallbacks()
				p.metrics.AddGPU(k-gpuSeen.kernel, up-gpuSeen.up, down-gpuSeen.down, fb-gpuSeen.fallbacks)
				gpuSeen.kernel, gpuSeen.up, gpuSeen.down, gpuSeen.fallbacks = k, up, down, fb
			}
			p.metrics.SetWindow(p.stage.Window().Len(), p.stage.Window().Cap())
			p.noteKeys()
			p.metrics.SetAlertGroupEvictions(p.stage.AlertGroupEvictions())
			p.metrics.SetAlertFoldedLost(p.stage.AlertFoldedLost())
			if p.keyPub != nil { // a builder's keys whose model changed: to the model topic
				p.keyPub.add(p.det.TakeKeyModels())
			}
			if p.stage.Model() == nil {
				p.noteWaiting(false)
			}
			if err != nil {
				b.Release()
				return fmt.Errorf("pipeline: detect: %w", err)
			}
			if !send(ready) {
				return nil
			}
		}
	}
	rest, err := p.stage.FlushContext(work) // (the first model's build, held batches waiting: until the hard stop at most)
	if err != nil {
		return fmt.Errorf("pipeline: detect: %w", err)
	}
	send(rest)
	return nil
}

// noteKeys sets the models per key's gauges (outlierd_keys_*) from the stage: after each batch,
// and after a scorer installs keys' models read from the model topic between batches.
func (p *Pipeline) noteKeys() {
	if ks := p.stage.KeyStats(); ks != (detect.KeyStats{}) {
		p.metrics.SetKeys(ks.Live, ks.Warming, ks.Bytes, ks.Evictions)
		p.noteColdEvictions(ks)
	}
}

// coldEvictionLogEvery spaces noteColdEvictions' lines.
const coldEvictionLogEvery = time.Minute

// noteColdEvictions logs the keys evicted before their own model (detect.key_by: key): at the
// first, then at most once per coldEvictionLogEvery while more are. Such keys are scored by the
// global model and hold their share of keys.max_keys (a window each) for nothing: a producer
// that keys every message by a unique id, or a fleet larger than max_keys (or max_bytes). Before,
// only the gauges said it (outlierd_keys_warming at max_keys, the evictions counter rising).
func (p *Pipeline) noteColdEvictions(ks detect.KeyStats) {
	w := &p.paced
	now := time.Now
	if w.now != nil {
		now = w.now
	}
	if ks.ColdEvictions <= w.coldAt || !w.coldLogged.IsZero() && now().Sub(w.coldLogged) < coldEvictionLogEvery {
		return
	}
	k := p.cfg.Detect.Keys
	p.log.Warn().Uint64("evicted_cold", ks.ColdEvictions-w.coldAt).Uint64("evicted_cold_total", ks.ColdEvictions).
		Uint64("evictions_total", ks.Evictions).Int("keys_held", ks.Live+ks.Warming).Int("keys_with_model", ks.Live).
		Int("max_keys", k.MaxKeys).Int64("max_bytes", k.MaxBytes).Int("min_records", k.MinRecords).
		Msg("keys evicted before their own model (detect.key_by: key): each needs keys.min_records records while held, and keys.max_keys (or keys.max_bytes) evicted them first; their records were scored by the global model. A key per record (a unique id: check ingest.key_field and the message key) or a fleet larger than keys.max_keys")
	w.coldLogged, w.coldAt = now(), ks.ColdEvictions
}
