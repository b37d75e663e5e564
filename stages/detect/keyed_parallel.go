package detect

import (
	"math"
	"runtime"
	"sync"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/prefetch"
)

// The keys' per-record work over the cores (issue 21: a million keys resident at 2M records/s
// on one GPU host; docs/BENCHMARKS.md §13.1.1). Everything a record does to the keyed state is
// its own key's: the key's window, rebuild clock and alarm cap, its model (built from that
// window alone), its recent scores. What crosses keys is the least-recently-seen order and the
// evictions it drives, the counters, and the device's one call per flush. So a batch that can
// evict no key (its new keys fit keys.max_keys and keys.max_bytes whatever it warms) is split by
// key over W workers, each walking its keys' records in stream order, and its results are the
// serial path's bit for bit whatever W is (TestKeyedParallelMatchesSerial):
//
//  1. the keys looked up on every core (the map only read), the new keys made in stream order;
//  2. rounds: each worker walks its records (touch, queue the record with the model it meets,
//     append it to the window); a key whose rebuild comes due holds its later records for the
//     next round. Then one device call for every record queued (or, without a device, the raw
//     scores on each worker), each worker decides its own records (each key's cap in order), the
//     due keys are built on every core, and one upload installs their models. Keys rebuilt within a batch are
//     what makes a second round (a key with more than keys.rebuild_records records in one
//     batch: KeysConfig.Rebuild, keys.window/4 by default);
//  3. each record's recent rank (recent.go), per key in stream order, on the workers.
//
// A batch that could evict (a fleet growing past keys.max_keys) and a scorer's keys take the
// serial path (keyed.go's score, keyed_device.go's scoreOnDevice), whose stream-order
// bookkeeping is what defines the evictions.

// parallelGrain is the fewest records per worker of the parallel path (a variable: the tests
// lower it to run the workers on small batches).
var parallelGrain = 256

// keyedPass is what the parallel path leaves for the stage's recent ranking of the same batch.
type keyedPass struct {
	b       *batch.Batch
	sts     []*keyState // each record's key (all held: nothing was evicted)
	mine    [][]int     // each worker's records, in stream order
	workers int
}

// keyedWorker is one worker's share of a batch.
type keyedWorker struct {
	todo, next []int // this round's records, those held for the next
	q          []queued
	due        []*keyState
	tail, dist []float64
	// mean is each queued record's mean of its calibrated scores (Ranker.mean), computed
	// prefetchAhead records before its decision so that its final calibration's leaf can be
	// asked for (decide); kept for the next batch.
	mean  []float64
	warm  int   // keys warmed (their first build due) by this worker's records
	bytes int64 // their bytes
	// later are the due keys whose builds wait for the batch's end (decideAndBuild)
	later []*keyState
	// (the workers' shares are adjacent and each writes its own q for every record it walks:
	// apart by more than a cache line, no two workers write one line)
	_ [72]byte
}

// scoreParallel is score over the cores (above); false, having changed nothing, where the batch
// takes the serial path.
func (k *keyedScorer) scoreParallel(cfg *Config, features []string, b *batch.Batch, raw [][]float32, warm *warmCells, out []batch.Score) bool {
	n := b.Len()
	workers := parallelWorkers(n)
	looked := k.looked
	k.looked = keyLookups{}
	if k.follower || k.serial || workers < 2 {
		return false
	}
	keys, parts := b.Keys(), b.Partitions()
	d := len(raw)
	sts, shard := looked.sts, looked.shard
	if looked.b != b || looked.gen != k.gen || len(sts) != n { // (none, or made stale since)
		sts, shard = make([]*keyState, n), make([]uint8, n)
		onChunks(n, workers, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				key := recordKey(keys, i)
				sts[i] = k.keys[string(key)]
				shard[i] = uint8(keyHash(key) % uint64(workers))
			}
		})
	}
	if !k.makeNewKeys(sts, keys, cfg, d, warm) {
		return false
	}
	base, at := k.lru.reserve(n)
	ws, mine := k.scratch.workers(workers)
	onWorkers(workers, func(w int) {
		// The batch's touches, in stream order: written here by contiguous chunks (the
		// workers' records interleave: written by each key's worker, four touches of a cache
		// line would come from four cores). The walk sets each key's seen to its last one.
		log, end := k.lru.log, base+n*(w+1)/workers
		for i := n * w / workers; i < n*(w+1)/workers; i++ {
			if a := base + i + 32; a < end && a%4 == 0 { // (a line of 4 touches, 8 lines ahead: 200 ns a touch without)
				prefetch.ForWrite(&log[a])
			}
			log[base+i] = touch{sts[i], at + uint64(i)}
		}
		own := mine[w] // (appended to here, written back once: the workers' headers share lines)
		for i, s := range shard {
			if int(s) == w {
				own = append(own, i)
			}
		}
		mine[w] = own
		ws[w].todo = append(ws[w].todo, own...)
	})
	for round := 0; ; round++ {
		onWorkers(workers, func(w int) {
			k.walk(&ws[w], cfg, out, raw, warm, sts, parts, base, at)
		})
		sraw := warm.scoring(raw) // (the warming values centred by walk)
		k.scoreQueued(ws, sraw, round == 0)
		k.buildDue(ws, decideAndBuild(ws, cfg, features, out, sraw, &k.hand, k.tail))
		more := false
		for w := range ws {
			ws[w].todo, ws[w].next = ws[w].next, ws[w].todo[:0]
			more = more || len(ws[w].todo) > 0
		}
		if !more {
			break
		}
	}
	var later []*keyState
	for w := range ws {
		k.warm += ws[w].warm
		k.bytes += ws[w].bytes
		later = append(later, ws[w].later...)
		clear(ws[w].later) // (kept for the next batch: its states may go)
	}
	k.startBuilds(later, cfg)
	k.lru.maybeCompact()
	k.pass = keyedPass{b: b, sts: sts, mine: mine, workers: workers}
	return true
}

// workers are the batch's workers' shares and record lists, empty, in memory kept from the batch
// before.
func (s *keyedScratch) workers(n int) ([]keyedWorker, [][]int) {
	if len(s.ws) != n {
		s.ws, s.mine = make([]keyedWorker, n), make([][]int, n)
	}
	for w := range s.ws {
		kw := &s.ws[w]
		kw.todo, kw.next, kw.q, kw.due, kw.later = kw.todo[:0], kw.next[:0], kw.q[:0], kw.due[:0], kw.later[:0]
		kw.tail, kw.dist, kw.warm, kw.bytes = nil, nil, 0, 0
		s.mine[w] = s.mine[w][:0]
	}
	return s.ws, s.mine
}

// parallelWorkers is the parallel path's workers for a batch of n records (below 2: serial).
func parallelWorkers(n int) int { return min(runtime.GOMAXPROCS(0), n/parallelGrain, 255) }

// makeNewKeys makes the states of the records' keys not held yet (sts[i] nil), in stream order,
// and says whether it did: not when they could evict a key during the batch (the serial path's
// evictions then, which happen only as a key is made: state), checked against everything the
// batch could add before its last new key (every new key, and a first model for each of the
// batch's keys not warm yet: a key warms once).
func (k *keyedScorer) makeNewKeys(sts []*keyState, keys *array.Binary, cfg *Config, d int, warm *warmCells) bool {
	var fresh []int
	distinct := map[string]struct{}{}
	for i, st := range sts {
		if st == nil {
			fresh = append(fresh, i)
			distinct[string(recordKey(keys, i))] = struct{}{}
		}
	}
	if len(fresh) == 0 {
		return true // no key is made: none can be evicted
	}
	newKeyBytes := 0
	for key := range distinct {
		newKeyBytes += len(key)
	}
	if len(k.keys)+len(distinct) > cfg.Keys.MaxKeys || cfg.Keys.MaxBytes > 0 && k.mostBytes(sts, len(distinct), newKeyBytes, cfg, d, warm) > cfg.Keys.MaxBytes {
		return false
	}
	for _, i := range fresh {
		key := recordKey(keys, i)
		st, ok := k.keys[string(key)]
		if !ok {
			st = k.newState(string(key), cfg, d)
		}
		sts[i] = st
	}
	return true
}

// mostBytes is the most bytes the keys can hold once the batch's newKeys (of newKeyBytes bytes
// together) are made: each new key with its first model, the first model of each held key of the
// batch not warm yet, and a ring of warming marks for each warming record (warm) whose key has
// none (keyed_warmup.go; a key's several such records counted each: a bound).
func (k *keyedScorer) mostBytes(sts []*keyState, newKeys, newKeyBytes int, cfg *Config, d int, warm *warmCells) int64 {
	w := cfg.Keys.Window
	most := k.bytes + int64(newKeys)*(k.bytesOf(w, d, true)+recentBytes(cfg.RecentScores, cfg.RecentBlocks())) + int64(newKeyBytes)
	counted := map[*keyState]bool{}
	for _, st := range sts {
		if st != nil && !st.warm && !counted[st] {
			counted[st] = true
			sw, sd := st.sig.len(), len(st.cols)
			most += k.bytesOf(sw, sd, true) - k.bytesOf(sw, sd, false)
		}
	}
	if warm != nil && !k.follower {
		for i, st := range sts {
			if (st == nil || st.warming == nil) && warm.at(i) {
				most += warmRingBytes(w)
			}
		}
	}
	return most
}

// walk is one round of a worker's records: each touched, queued with the model it meets (or
// marked Warming), appended to its key's window; a key whose rebuild comes due holds its later
// records for the next round (they meet the new model).
func (k *keyedScorer) walk(kw *keyedWorker, cfg *Config, out []batch.Score, raw [][]float32, warm *warmCells, sts []*keyState, parts []int32, base int, at uint64) {
	x := make([][]float32, len(raw))
	for t, i := range kw.todo {
		prefetchWalk(kw.todo, sts, t)
		st := sts[i]
		if st.due {
			kw.next = append(kw.next, i)
			st.held = true
			continue
		}
		st.partition = parts[i]
		st.seen = at + uint64(i) // (its touch is in the log: scoreParallel)
		for j := range raw {
			x[j] = raw[j][i : i+1]
		}
		warm.centre(i, st) // (the model queueRecord queues it with)
		warm.noteTime(i, st)
		kw.q = queueRecord(kw.q, out, i, st)
		due, grew := k.append(st, x, false, warm.at(i), cfg) // (the significance is written at the decision)
		kw.bytes += grew
		if due {
			st.since, st.due = 0, true
			kw.due = append(kw.due, st)
			if k.dev != nil && !st.warm { // as scoreOnDevice: counted warm when due
				st.warm = true
				kw.warm++
				kw.bytes += k.bytesOf(st.sig.len(), len(st.cols), true) - k.bytesOf(st.sig.len(), len(st.cols), false)
			}
		}
	}
}

// laterRoundOnDevice is the most records a round after a batch's first scores on the CPU rather
// than on the device (scoreQueued): about what the cores score in the device call's time.
const laterRoundOnDevice = 1024

// scoreQueued gets the raw scores of every worker's queued records: one device call for all of
// them, or (without a device, or after its error, as flush) each worker's on the CPU. Each
// worker's records are a part of the call, and the call's host work for a part (its records
// grouped by key into the call's arrays, its scores placed back) runs on a goroutine of its own:
// nothing of it runs over the batch's records on one goroutine (docs/BENCHMARKS.md §13.1.15; a
// batch's records are megabytes).
//
// A round after the first with at most laterRoundOnDevice records (those of keys rebuilt within
// the batch: a few at a million keys) is scored on the CPU, from the same models' host copies
// (the kernels' CPU twin: the same bits, TestKeyedGPUMatchesCPU): its device call would wait for
// the round before's upload, which otherwise runs beside the rest of the batch
// (docs/BENCHMARKS.md §13.1.4).
func (k *keyedScorer) scoreQueued(ws []keyedWorker, raw [][]float32, first bool) {
	from := make([]int, len(ws)+1)
	for w := range ws {
		from[w+1] = from[w] + len(ws[w].q)
	}
	total := from[len(ws)]
	sc := &k.scratch
	sc.tail, sc.dist = grow(sc.tail, total), grow(sc.dist, total)
	tail, dist := sc.tail, sc.dist
	for w := range ws {
		ws[w].tail, ws[w].dist = tail[from[w]:from[w+1]], dist[from[w]:from[w+1]]
	}
	if total == 0 {
		return
	}
	if first || total > laterRoundOnDevice { // (a later round's few records: below)
		k.settle() // (the models the round before installed)
	}
	if k.dev != nil && (first || total > laterRoundOnDevice) {
		sc.slots, sc.rows = grow(sc.slots, total), grow(sc.rows, total)
		if len(sc.parts) != 2*len(ws) {
			sc.parts = make([][]int32, 2*len(ws))
			sc.outs = make([][]float64, 2*len(ws))
		}
		slots, rows := sc.parts[:len(ws)], sc.parts[len(ws):]
		tails, dists := sc.outs[:len(ws)], sc.outs[len(ws):]
		for w := range ws {
			slots[w], rows[w] = sc.slots[from[w]:from[w+1]], sc.rows[from[w]:from[w+1]]
			tails[w], dists[w] = ws[w].tail, ws[w].dist
		}
		onWorkers(len(ws), func(w int) {
			for t, q := range ws[w].q {
				slots[w][t], rows[w][t] = q.slot, int32(q.i)
			}
		})
		if err := k.dev.Score(slots, rows, raw, tails, dists); err == nil {
			return
		}
	}
	onWorkers(len(ws), func(w int) {
		cpuRawScores(ws[w].q, raw, ws[w].tail, ws[w].dist)
	})
}

// decide decides the worker's queued records from their raw scores, in stream order (each key's
// cap), and writes their significance into their keys' windows.
//
// A record's two calibrated scores and their mean are computed prefetchAhead records before its
// decision (the leaves of its Density and Distance calibrations asked for before that,
// prefetchDecisions), and its final calibration's leaf asked for then: the final search's score
// is known only once the two others are done.
func (kw *keyedWorker) decide(cfg *Config, features []string, out []batch.Score, raw [][]float32, h *handover, f *fleetTail) {
	one := make([][]float32, len(raw))
	q, tail, dist := kw.q, kw.tail, kw.dist
	kw.mean = grow(kw.mean, len(q))
	mean := kw.mean
	for u := range min(prefetchAhead, len(q)) {
		mean[u] = q[u].model.mean(tail[u], dist[u])
	}
	for t, r := range q {
		prefetchDecisions(q, tail, dist, t, f != nil)
		if u := t + prefetchAhead; u < len(q) {
			m := q[u].model
			mean[u] = m.mean(tail[u], dist[u])
			prefetch.Slice(m.Final.Leaf(mean[u]))
		}
		for j := range raw {
			one[j] = raw[j][r.i : r.i+1]
		}
		r.st.sig.set(r.ring, decideByKeyMean(cfg, features, r.st, r.model, r.version, one, out[r.i:r.i+1], tail[t], dist[t], mean[t], h, f, r.i))
	}
	clear(kw.q) // (kept for the next batch: its models and states may go)
	kw.q = kw.q[:0]
}

// rankRecentKeyed is the stage's rankRecent for a batch the parallel path scored: each
// record's combined score ranked among its key's recent ones, per key in stream order, on the
// workers. False for another batch (the stage ranks it itself).
func (k *keyedScorer) rankRecentKeyed(b *batch.Batch, m, blocks int) bool {
	p := k.pass
	k.pass = keyedPass{}
	if p.b != b {
		return false
	}
	grown := make([]int64, p.workers)
	onWorkers(p.workers, func(w int) {
		for t, i := range p.mine[w] {
			prefetchRecent(p.mine[w], p.sts, t)
			sc := &b.Scores[i]
			sc.Recent = math.NaN()
			if !sc.Scored || m <= 0 {
				continue
			}
			st := p.sts[i]
			grown[w] += recentBytes(m, blocks) - st.recent.bytes() // (recent_scores or recent_horizon changed)
			sc.Recent = st.recent.score(sc.Score, m, blocks)
		}
	})
	for _, g := range grown {
		k.bytes += g
	}
	return true
}

// keyHash spreads keys over the workers (FNV-1a: any spread gives the same results).
func keyHash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h ^ h>>29
}

// onWorkers runs f(w) for w < workers, each on a goroutine, and waits.
func onWorkers(workers int, f func(w int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w)
		}()
	}
	wg.Wait()
}

// onChunks runs f over [0, n) cut into workers contiguous chunks, each on a goroutine, and waits.
func onChunks(n, workers int, f func(lo, hi int)) {
	onWorkers(workers, func(w int) { f(n*w/workers, n*(w+1)/workers) })
}
