package detect

import (
	"sync"
	"sync/atomic"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The parallel path's builds (keyed_parallel.go). A key's build is due at the record that
// completes keys.rebuild_records new records (KeysConfig.Rebuild); its later records in the
// batch wait for the next round, which scores them with the new model. So a round builds the due keys that hold such records
// (held: at a million keys, a few a batch) before the next round, and leaves the others (most)
// to run beside the stage's finish (the merge, the global cap, the recent ranks, the alert
// groups and explanations: the stage's goroutine's serial part, where the cores were idle),
// which waits for them (finishBuilds; with the keys' pass chained, overlap.go, the batch's
// finish comes in a later Process call, and the methods between batches wait first, keysQuiet):
// the next batch, and everything between batches, sees every key as the batch's rounds would
// have left it, the same models in the same places (docs/BENCHMARKS.md §13.1.4).

// decideAndBuild decides each worker's queued records (decide), then builds the workers' due
// keys that hold records for the next round (built[w][t]: ws[w].due[t]'s; nil where a build
// failed), the others moved to the worker's later. A key's build reads the significance its
// records' decisions wrote into its window, and a key's records are its worker's alone: so a
// worker builds its own due keys once its decisions are done, then takes the next due key of
// any worker done deciding (a build is most of a key's work: shared, so that none waits on the
// worker with the most), and no core waits for every worker's decisions before the first build
// (they were two phases, each waiting on its slowest worker).
func decideAndBuild(ws []keyedWorker, cfg *Config, features []string, out []batch.Score, raw [][]float32, h *handover, f *fleetTail) [][]*Ranker {
	n := len(ws)
	built := make([][]*Ranker, n)
	next := make([]atomic.Int64, n) // worker u's next due key to build
	decided := make([]chan struct{}, n)
	for w := range decided {
		decided[w] = make(chan struct{})
	}
	onWorkers(n, func(w int) {
		kw := &ws[w]
		kw.decide(cfg, features, out, raw, h, f)
		now := kw.due[:0]
		for _, st := range kw.due {
			if st.held {
				now = append(now, st)
			} else {
				kw.later = append(kw.later, st)
			}
		}
		clear(kw.due[len(now):])
		kw.due = now
		built[w] = make([]*Ranker, len(now))
		close(decided[w])
		for {
			waitFor := -1
			for v := w; v < w+n; v++ {
				u := v % n
				select {
				case <-decided[u]:
				default:
					if waitFor < 0 { // (its due list is its own until it has decided)
						waitFor = u
					}
					continue
				}
				// (Not fanout.Each: a counter per owner's list, each list open to all once its owner decided.)
				for {
					t := int(next[u].Add(1)) - 1
					if t >= len(ws[u].due) {
						break
					}
					built[u][t], _ = buildKeyModel(ws[u].due[t], cfg)
				}
			}
			if waitFor < 0 {
				return
			}
			<-decided[waitFor] // (a worker still deciding: its due keys may come next)
		}
	})
	return built
}

// buildDue makes the workers' due keys' new models (decideAndBuild's) their keys' in worker
// order, counts a key warm at its first model without a device (as build), and installs them on
// the device in one upload.
func (k *keyedScorer) buildDue(ws []keyedWorker, built [][]*Ranker) {
	var rebuilt []*keyState
	for w := range ws {
		for t, st := range ws[w].due {
			st.due, st.held = false, false
			if built[w][t] == nil {
				continue // too few records left: the previous model (or the global one) keeps scoring
			}
			k.markWarm(st)
			st.model = built[w][t]
			k.markDirty(st)
			rebuilt = append(rebuilt, st)
		}
		clear(ws[w].due) // (kept for the next batch: its states may go)
		ws[w].due = ws[w].due[:0]
	}
	if k.dev != nil && len(rebuilt) > 0 {
		k.install(rebuilt)
	}
}

// deferredBuilds are the builds a batch left to run beside the stage's finish (startBuilds).
type deferredBuilds struct {
	due   []*keyState
	built []*Ranker
	wg    sync.WaitGroup
}

// startBuilds starts the due keys' builds on a goroutine of their own (buildDue: on the cores,
// taking the next key as one frees; with many keys and a device that takes them, their k-NN
// calibrations in one device call).
func (k *keyedScorer) startBuilds(due []*keyState, cfg *Config) {
	if len(due) == 0 {
		return
	}
	b := &deferredBuilds{due: due, built: make([]*Ranker, len(due))}
	sw := k.selfWeigher(due, cfg)
	b.wg.Go(func() { buildDue(due, b.built, cfg, sw) })
	k.building = b
}

// finishBuilds waits for the builds startBuilds started, if any, then makes the new models their
// keys' in the order the batch's workers left them (buildDue's bookkeeping) and installs them on
// the device in one upload.
func (k *keyedScorer) finishBuilds() {
	b := k.building
	if b == nil {
		return
	}
	k.building = nil
	b.wg.Wait()
	var rebuilt []*keyState
	for t, st := range b.due {
		st.due, st.held = false, false
		if b.built[t] == nil {
			continue // too few records left: the previous model (or the global one) keeps scoring
		}
		k.markWarm(st)
		st.model = b.built[t]
		k.markDirty(st)
		rebuilt = append(rebuilt, st)
	}
	if k.dev != nil && len(rebuilt) > 0 {
		k.install(rebuilt)
	}
}
