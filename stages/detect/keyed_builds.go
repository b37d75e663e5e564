package detect

import (
	"sync/atomic"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// decideAndBuild decides each worker's queued records (decide), then builds the workers' due
// keys' models (built[w][t]: ws[w].due[t]'s; nil where a build failed). A key's build reads the
// significance its records' decisions wrote into its window, and a key's records are its
// worker's alone: so a worker builds its own due keys once its decisions are done, then takes
// the next due key of any worker done deciding (a build is most of a key's work: shared, so that
// none waits on the worker with the most), and no core waits for every worker's decisions
// before the first build (they were two phases, each waiting on its slowest worker).
func decideAndBuild(ws []keyedWorker, cfg *Config, features []string, out []batch.Score, raw [][]float32) [][]*Ranker {
	n := len(ws)
	built := make([][]*Ranker, n)
	for w := range ws {
		built[w] = make([]*Ranker, len(ws[w].due))
	}
	next := make([]atomic.Int64, n) // worker u's next due key to build
	decided := make([]chan struct{}, n)
	for w := range decided {
		decided[w] = make(chan struct{})
	}
	onWorkers(n, func(w int) {
		ws[w].decide(cfg, features, out, raw)
		close(decided[w])
		for {
			waitFor := -1
			for v := w; v < w+n; v++ {
				u := v % n
				select {
				case <-decided[u]:
				default:
					if waitFor < 0 && len(ws[u].due) > 0 {
						waitFor = u
					}
					continue
				}
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
			<-decided[waitFor] // (a worker still deciding, with due keys: they come next)
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
			st.due = false
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
