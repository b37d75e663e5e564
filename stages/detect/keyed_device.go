package detect

import (
	"runtime"
	"sync"

	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/fanout"
)

// Models per key on a device (issue 21 item 2): the warm keys' models stay resident there, a slot
// per key, installed whenever a key's model is rebuilt; a batch's records of warm keys are scored
// in one device call (the records grouped by key, each against its own key's model), and the
// stage decides their flags from the raw scores as on the CPU. The verdicts are the CPU path's
// (keyedScorer.score without a device) bit for bit: the device's raw scores are the CPU's
// (gpukern's parity tests), and the stream order of what depends on it is kept:
//
// A key's model may change within a batch (a rebuild every keys.rebuild_records of its records), and the
// rebuild reads the significance of the key's records before it, so the batch is walked in stream
// order doing the bookkeeping at once (the key's state, least-recently-seen order and evictions,
// its window) and deferring the scores: a record of a warm key is queued with the model it meets;
// a rebuild that comes due is deferred too, and a later record of that same key first flushes the
// queue: one device call for everything queued, the flags decided in stream order (each key's cap
// in its own order), the significance written into the windows, then the due rebuilds (in
// parallel: each reads its own key only) and one upload of their models. With keys spread over
// many more keys than a batch's records, a batch is one call.

// KeyedAccelerator is an Accelerator that also keeps keys' models resident (optional: a stage
// whose Accelerator is nil or lacks it scores its keys on the CPU).
type KeyedAccelerator interface {
	Accelerator
	// KeyedModels opens a store for keys' models of dims features and windows of window records.
	KeyedModels(dims, window int) (KeyedModels, error)
}

// KeyedModels keeps keys' models on a device, a slot per key (the stage's numbers). Its scores
// are the CPU's bits (it scores on the CPU what its device cannot); one stage owns it. An alias of
// an interface literal, spelled the same in internal/accel (accel.KeyedModels), so that accel
// implements it without importing detect (pipeline/device.go asserts that it does).
type KeyedModels = interface {
	// Install puts model i (its tail score's distributions, its window sample R with k, R's space
	// x' = clamp((x - center) / unit, +-1e6)) in slot slots[i], replacing the slot's model.
	Install(slots []int32, tails []*rank.Tail, refs []*solvingset.Model, centers, units [][]float64) error
	// Score writes raw scores of records given in parts, in one device call: part w's record r is
	// row rows[w][r] of x (column-major; row r where rows[w] is nil), scored against the model in
	// slot slots[w][r] into tail[w][r], the tail score (rank.Tail.Score), and dist[w][r], w_k(q,
	// R) (solvingset.KNNWeights in R's space). Each part's host work may run on a goroutine of
	// its own (the parallel path gives each worker's records as a part).
	Score(slots, rows [][]int32, x [][]float32, tail, dist [][]float64) error
	// Bytes is the device memory the models hold.
	Bytes() int64
	Close() error
}

// slotPool numbers the device's slots: released slots first, then new ones.
type slotPool struct {
	free []int32
	next int32
}

func (p *slotPool) get() int32 {
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	p.next++
	return p.next - 1
}

func (p *slotPool) release(s int32) { p.free = append(p.free, s) }

// queued is a record of a warm key waiting for its scores.
type queued struct {
	i     int       // in the batch
	st    *keyState // (the key may be evicted before the flush: its state lives on here)
	ring  int       // the record's position in the key's window
	model *Ranker   // the model the record meets
	slot  int32
	// version is model's (keyState.version).
	version uint64
}

// queueRecord queues record i of b for st's model when st has one (as the key stands now, before
// the record joins its window), else marks it scored by the global model (Warming).
func queueRecord(q []queued, out []batch.Score, i int, st *keyState) []queued {
	if st.model == nil {
		out[i].Warming = true
		return q
	}
	return append(q, queued{i: i, st: st, ring: st.next, model: st.model, slot: st.slot, version: st.version})
}

// keyedBatch is scoreOnDevice's queue and scratch.
type keyedBatch struct {
	q          []queued
	due        []*keyState
	slot, rows []int32
}

// scoreOnDevice is score with the device (see above).
func (k *keyedScorer) scoreOnDevice(cfg *Config, features []string, b *batch.Batch, raw [][]float32, warm *warmCells, out []batch.Score) {
	sraw := warm.scoring(raw) // (scored; the keys' windows get raw)
	keys, parts := b.Keys(), b.Partitions()
	d := len(raw)
	x := make([][]float32, d)
	var kb keyedBatch
	for i := range out {
		st := k.recordState(out, keys, parts, i, cfg, d)
		if st == nil {
			continue
		}
		if st.due { // its new model first
			k.flush(cfg, features, out, sraw, &kb)
		}
		for j := range raw {
			x[j] = raw[j][i : i+1]
		}
		warm.centre(i, st) // (the model queueRecord queues it with)
		warm.noteTime(i, st)
		kb.q = queueRecord(kb.q, out, i, st)
		if k.follower {
			continue
		}
		due, grew := k.append(st, x, false, warm.at(i), cfg) // (the significance is written at the flush)
		k.bytes += grew
		if due {
			st.since = 0
			st.due = true
			k.markWarm(st) // (a key's build cannot fail: min_records > keys.k >= 1, so R has >= 2 records)
			kb.due = append(kb.due, st)
		}
	}
	k.flush(cfg, features, out, sraw, &kb)
}

// flush scores the queued records in one device call and decides them in stream order, then
// builds the due models and installs them in one upload.
func (k *keyedScorer) flush(cfg *Config, features []string, out []batch.Score, raw [][]float32, kb *keyedBatch) {
	if n := len(kb.q); n > 0 {
		kb.slot, kb.rows = kb.slot[:0], kb.rows[:0]
		for _, q := range kb.q {
			kb.slot, kb.rows = append(kb.slot, q.slot), append(kb.rows, int32(q.i))
		}
		tail, dist := make([]float64, n), make([]float64, n)
		k.settle() // (the batch's models installed by the flush before)
		if k.dev == nil || k.dev.Score([][]int32{kb.slot}, [][]int32{kb.rows}, raw, [][]float64{tail}, [][]float64{dist}) != nil {
			cpuRawScores(kb.q, raw, tail, dist) // (a KeyedModels scores on its CPU itself; this is its error)
		}
		decideQueued(cfg, features, out, raw, kb.q, tail, dist, &k.hand, k.tail)
		kb.q = kb.q[:0]
	}
	if len(kb.due) == 0 {
		return
	}
	built := make([]*Ranker, len(kb.due))
	buildDue(kb.due, built, cfg, k.selfWeigher(kb.due, cfg))
	var rebuilt []*keyState
	for t, st := range kb.due {
		st.due = false
		if built[t] == nil || k.keys[st.key] != st { // (evicted before the flush: dropped)
			continue
		}
		st.model = built[t]
		k.markDirty(st)
		rebuilt = append(rebuilt, st)
	}
	kb.due = kb.due[:0]
	k.install(rebuilt)
}

// install puts the keys' models on the device (a slot for a key that has none), in one upload
// that runs beside the keys' next work (the models' encoding and the copy, a millisecond a batch
// at a million keys, on the stage's path before: docs/BENCHMARKS.md §13.1.4): every use of the
// device settles it first (settle), so the device sees the same calls in the same order. After
// a failed upload the CPU scores from the next settle on (every model is on the host).
func (k *keyedScorer) install(keys []*keyState) {
	k.settle()
	if len(keys) == 0 || k.dev == nil {
		return
	}
	slots := make([]int32, len(keys))
	tails := make([]*rank.Tail, len(keys))
	refs := make([]*solvingset.Model, len(keys))
	centers, units := make([][]float64, len(keys)), make([][]float64, len(keys))
	for t, st := range keys {
		if st.slot < 0 {
			st.slot = k.slots.get()
		}
		r := st.model
		slots[t], tails[t], refs[t], centers[t], units[t] = st.slot, r.Tail, r.Ref, r.Center, r.Unit
	}
	in, dev := &keyedInstall{done: make(chan struct{})}, k.dev
	k.installing = in
	go func() {
		defer close(in.done)
		if in.err = dev.Install(slots, tails, refs, centers, units); in.err == nil {
			in.bytes = dev.Bytes() // (the store is this goroutine's until settle)
		}
	}()
}

// keyedInstall is an upload of models (install) under way.
type keyedInstall struct {
	done  chan struct{}
	err   error
	bytes int64 // the device memory the models hold after it
}

// settle waits for the upload under way, if any; after a failed one the device is closed and
// the CPU scores.
func (k *keyedScorer) settle() {
	in := k.installing
	if in == nil {
		return
	}
	<-in.done
	k.installing = nil
	k.devBytes = in.bytes
	if in.err != nil && k.dev != nil {
		k.dev.Close()
		k.dev = nil
	}
}

// decideGrain is the fewest queued records per worker of decideQueued (a variable: the tests
// lower it to run the workers on small batches).
var decideGrain = 1024

// decideQueued decides the queued records from their raw scores (tail, dist), each key's records
// in stream order (its cap), on every core when there are many: worker w takes the keys of
// slot % workers == w (a queued key's slot is its own while it is queued), and each record writes
// only its own score and its key's window.
func decideQueued(cfg *Config, features []string, out []batch.Score, raw [][]float32, q []queued, tail, dist []float64, h *handover, f *fleetTail) {
	workers := min(runtime.GOMAXPROCS(0), len(q)/decideGrain)
	decide := func(w, workers int) {
		one := make([][]float32, len(raw))
		for t, r := range q {
			if workers > 1 && int(r.slot)%workers != w {
				continue
			}
			for j := range raw {
				one[j] = raw[j][r.i : r.i+1]
			}
			r.st.sig.set(r.ring, decideByKey(cfg, features, r.st, r.model, r.version, one, out[r.i:r.i+1], tail[t], dist[t], h, f, r.i))
		}
	}
	if workers <= 1 {
		decide(0, 1)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decide(w, workers)
		}()
	}
	wg.Wait()
}

// buildKeys builds the keys' models (nil where a build failed), on every core when there are
// many: each build reads its own key's state only.
func buildKeys(due []*keyState, out []*Ranker, cfg *Config) {
	workers := min(runtime.GOMAXPROCS(0), (len(due)+3)/4)
	fanout.Each(workers, len(due), func(t int) {
		prefetchBuild(due, t, workers)
		out[t], _ = buildKeyModel(due[t], cfg)
	})
}

// cpuRawScores is the queued records' raw scores on the CPU (keyedScorer.score's).
func cpuRawScores(q []queued, raw [][]float32, tail, dist []float64) {
	one := make([][]float32, len(raw))
	var space [][]float32
	out := make([]float64, 1)
	for t, r := range q {
		for j := range raw {
			one[j] = raw[j][r.i : r.i+1]
		}
		r.model.Tail.Score(one, out)
		tail[t] = out[0]
		space = r.model.distanceSpace(one, space)
		solvingset.KNNWeights(r.model.Ref.Points, space, r.model.Ref.K, 1, out)
		dist[t] = out[0]
	}
}
