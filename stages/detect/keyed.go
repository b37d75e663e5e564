package detect

import (
	"math"
	"runtime"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/config"
	"github.com/outlierd/outlierd/internal/core/prefetch"
)

// Models per key (detect.key_by: key; docs/DESIGN.md, "Models per key"). A fleet of sensors
// on one topic is many populations: a +8 sd spike of one sensor sits inside another's range,
// so one window and one threshold for the topic cannot see it. With key_by every key keeps a
// window of its own last keys.window records and, once it holds keys.min_records, a model of
// its own: the ranking part (the per-feature tail score and the k-NN distance to the key's
// window, each calibrated against the key's own records, and their combined calibration),
// which is what flag_by: significance decides by. The paper's detectors (the solving set, the
// micro-cluster density, the hypercube, PROCLUS) stay global: each needs thousands of records to
// mean anything (w* is the window's top 0.1%, the density is summarised in 200 micro-clusters),
// more than a key has or than 16 KB a key can hold.
//
// A key's model depends on that key's records alone: its window, its rebuilds (every
// keys.rebuild_records of its records, keys.window/4 by default, synchronously, in stream
// order), its records found significant and far out against its window's others (left out of
// its next models: keyed_outcast.go; the global model leaves out every significant record), its
// warm-up's far-out readings (marked so at its first build), and its own alarm cap (at most
// alarm_rate of its last keys.window records flagged when an alarm starts; one going on is
// flagged past it: alarmCap.admitRun). So once warm, a key's records get the same verdicts in the keyed
// stream as when its records are replayed alone. Until a key is warm its records are scored by
// the global model and say so. Keys unseen for longest are evicted past keys.max_keys or
// keys.max_bytes (an evicted key starts cold again).

// keyedScorer holds the per-key state of a stage (owned by the stage's goroutine, and by a keys'
// pass while it runs beside it: scoreKeyedBeside, startChained; keysQuiet waits for it).
type keyedScorer struct {
	keys      map[string]*keyState
	lru       recency // the keys' least-recently-seen order
	bytes     int64
	evictions uint64
	// coldEvictions counts the evicted keys that had no model of their own (KeyStats).
	coldEvictions uint64
	warm          int // keys with a model

	// dev keeps the warm keys' models on the device (keyed_device.go; nil: the CPU scores).
	dev   KeyedModels
	slots slotPool

	// follower: a scorer's keys (run.role scorer), whose models come from the builder through
	// InstallKeyModels (keyed_topic.go): no windows, no builds. dirty (a builder's, nil
	// otherwise) are the keys whose model changed or that were evicted warm since the last
	// TakeKeyModels, with their partitions (an evicted key's is gone with its state).
	follower bool
	dirty    map[string]int32
	// cycles are the stage's cyclic time columns (cycles.go), centred where a key's model's
	// window spans less than their period.
	cycles []cycleCols

	// pass is the parallel path's last batch, for its recent ranking (keyed_parallel.go);
	// serial forces the serial path (the tests compare the two).
	pass   keyedPass
	serial bool

	// looked are warmRows' lookups of a batch's keys, for the parallel path of the same batch
	// (one pass over a million keys' map, not two); gen counts the keys made and evicted, so
	// that lookups a key's making or eviction made stale are not used.
	looked keyLookups
	gen    uint64

	// scratch is the parallel path's, kept batch after batch (keyedScratch).
	scratch keyedScratch
	// installing is the models' upload under way (install, settle); building are the parallel
	// path's builds deferred to run beside the stage's finish (finishBuilds).
	installing *keyedInstall
	building   *deferredBuilds
	// releaseHeap releases the stage's hold on huge pages for the heap (keys.huge_pages).
	releaseHeap func()
	// devBytes is the device memory the models held after the last upload that ended (settle;
	// counts: read while a chained pass may be using the device).
	devBytes int64
	// hand is what the batch's pass leaves to the stage's capAlarms (keyed_handover.go).
	hand handover
	// fleet is the keys' pooled tail (keys.tail: fleet; keyed_fleet.go), tail the pass's (nil:
	// own).
	fleet fleetTail
	tail  *fleetTail
}

// keyedScratch is the parallel path's per-batch memory, reused: each batch's allocation of it
// was fresh memory, whose first writes cost more than the work (docs/BENCHMARKS.md §13.1.4).
// Everything in it is the pass's alone until the batch's recent ranks (rankRecentKeyed, which
// runs before the next batch's pass in either order of work).
type keyedScratch struct {
	ws         []keyedWorker
	mine       [][]int
	tail, dist []float64
	// The device call's arrays (scoreQueued): each record's slot and row, cut into the workers'
	// parts, and the parts' outputs.
	slots, rows []int32
	parts       [][]int32
	outs        [][]float64
}

// keyLookups are a batch's records' key states (nil: not held) and workers' shards, as they
// stood at the keys' generation gen.
type keyLookups struct {
	b     *batch.Batch
	gen   uint64
	sts   []*keyState
	shard []uint8
}

// keyState is one key's window, bookkeeping and model.
type keyState struct {
	key   string
	cols  [][]float32 // the key's window, a ring per feature (capacity keys.window)
	sig   flagRing    // in step with cols: the record was significant under the key's model
	next  int
	size  int
	model *Ranker
	cap   *alarmCap
	// seen is the key's last touch (recency); gone (with the flags below: the struct's 288
	// bytes with sig's length) says the key was evicted.
	seen uint64
	// recent is the key's last combined scores (recent.go), sized at its first record.
	recent recentRing
	// With a device (keyed_device.go): slot is the key's model's slot there (-1: none yet); due
	// says a build was due at the key's last record and waits for the batch's flush; warm says the
	// key is counted as warm (its first build was due).
	slot int32
	due  bool
	warm bool
	gone bool
	// held says a record of the key waits in the parallel path's next round for the key's due
	// build (keyed_builds.go: that build is not deferred).
	held bool
	// version is the builder's version of the key's model (a scorer's, from the model topic; 0
	// where the key's model was built here). partition is the input partition of the key's
	// latest record (a builder's; a scorer's: the one its model was published with).
	version   uint64
	partition int32
	// since is the records since the key's last build (an int32 beside partition: the struct
	// stays in its allocation size class of 288 bytes with warming).
	since int32
	// warming marks the window's records whose rolling column was still warming when they came
	// (nil until the key's first such record): its builds leave them out (keyed_warmup.go).
	warming *warmRing
	// lastMs and gapMs are the key's latest record's time (epoch ms, 0: none) and its average
	// interval between records (ms, 0: none yet), kept with cyclic time columns only (cycles.go:
	// a key's model reads them once its window spans their period). They take the struct from
	// the allocation size class of 288 bytes to 320 (0.2 % of a key's 15 KB at the defaults).
	lastMs int64
	gapMs  float32
}

// KeyStats are the keyed models' figures for the metrics.
type KeyStats struct {
	Live, Warming int    // keys with a model of their own; keys still scored by the global model
	Evictions     uint64 // keys evicted so far (least recently seen first)
	// ColdEvictions counts those of them evicted before they had a model of their own (fewer
	// than keys.min_records records while held): a fleet larger than keys.max_keys, or keys
	// that are no sensor's (a unique id per record).
	ColdEvictions uint64
	Bytes         int64 // the keys' windows and models, as accounted (keyBytes)
	DeviceBytes   int64 // the keys' models resident on the device (0 on the CPU)
}

func newKeyedScorer() *keyedScorer {
	return &keyedScorer{keys: map[string]*keyState{}}
}

// markDirty notes that st's model changed or that st was evicted warm (a builder's).
func (k *keyedScorer) markDirty(st *keyState) {
	if k.dirty != nil {
		k.dirty[st.key] = st.partition
	}
}

// close releases the device's models and the hold on huge pages.
func (k *keyedScorer) close() error {
	k.finishBuilds()
	k.settle()
	if k.releaseHeap != nil {
		k.releaseHeap()
		k.releaseHeap = nil
	}
	if k.dev == nil {
		return nil
	}
	err := k.dev.Close()
	k.dev = nil
	return err
}

// stats reports the keyed models' figures.
func (k *keyedScorer) stats() KeyStats {
	st := k.counts()
	k.finishBuilds()
	k.settle()
	st.DeviceBytes = 0
	if k.dev != nil {
		st.DeviceBytes = k.dev.Bytes()
		k.devBytes = st.DeviceBytes
	}
	return st
}

// counts are stats without waiting for the builds or the upload under way: the device's bytes
// after the last upload that ended.
func (k *keyedScorer) counts() KeyStats {
	return KeyStats{Live: k.warm, Warming: len(k.keys) - k.warm, Evictions: k.evictions, ColdEvictions: k.coldEvictions, Bytes: k.bytes, DeviceBytes: k.devBytes}
}

// keyBytes is what a key holds at a window of w records of d features: its window (float32),
// the significance marks and the alarm ring (a bit each: flagRing), and, once warm, its model:
// the sorted window (float32), the window in the distance space (float32), three calibrations
// of w scores (float64) and their indexes (every rank.IndexStride-th score), about 300 bytes of
// headers and map entry, and warmOverhead.
func keyBytes(w, d int, warm bool) int64 {
	b := int64(w*d*4 + 2*8*((w+63)/64) + 300)
	if warm {
		b += int64(2*w*d*4+3*w*8+d*(w/8+2)*4) + warmOverhead // + the tail's bucket index
		b += int64(3 * rank.IndexLen(w) * 8)                 // + the calibrations' indexes
	}
	return b
}

// keysFit refuses a keys.max_bytes below one warm key of features: every key would be evicted
// before its model, and the fleet scored by the global model alone, silently.
func (c *Config) keysFit(features int) error {
	kc := c.Keys
	if c.KeyBy != KeyByKey || kc.MaxBytes == 0 {
		return nil
	}
	if one := keyBytes(kc.Window, features, true) + recentBytes(c.RecentScores, c.RecentBlocks()); kc.MaxBytes < one {
		return config.Fieldf("detect.keys.max_bytes", "%d cannot hold one key: a warm key at keys.window %d of %d features takes about %d bytes; want 0 (no bound) or at least %d, that many for each key of a fleet",
			kc.MaxBytes, kc.Window, features, one, one)
	}
	return nil
}

// bytesOf is keyBytes for this scorer's keys: a scorer's keys (follower) hold no window.
func (k *keyedScorer) bytesOf(w, d int, warm bool) int64 {
	b := keyBytes(w, d, warm)
	if k.follower {
		b -= int64(w * d * 4)
	}
	return b
}

// warmOverhead is what a warm key's model costs beyond its arrays (the Ranker and its tail,
// sample and calibrations' headers, the robust units, allocation slack), set so that keyBytes
// is the heap's growth a key at 100,000 keys with full windows at the defaults (3 features):
// BenchmarkKeyedStage measured 15,844 bytes a key there (15,982-15,992 at 10,000, where the
// global model's share is larger), less the 16 of modelHeaders since (docs/BENCHMARKS.md
// §13.1.10, §13.0.2). The model's arrays share allocations (buildKeyModel, buildRankerOn) so
// that the allocator's rounding is paid twice a model, not eight times. The calibrations' indexes (keyBytes) took their allocation from the
// allocator's class of 4,864 bytes to 5,376 at the defaults, of which the center, unit and
// spread (3 x 24 bytes, three allocations before) now fill 72, and the Ranker from 352 to 416
// (their three headers). The tail's bucket index in one allocation for every feature (keycold,
// §13.1.16) added 14 bytes a key: 15,842 measured at 100,000 keys (2026-11-27).
const warmOverhead = 1912

// score scores the records of b whose key is warm with the key's model and decides their flag
// (significance, the key's cap); every record is then pushed into its key's window, which
// rebuilds the key's model when due. raw are b's feature columns. Records of keys still warming
// keep the global model's scores and are marked Warming. out are the records' scores it writes
// (b.Scores after the global scoring, or a batch's own to merge into them: mergeKeyed); it
// writes only the fields decideByKey writes, and Warming.
func (k *keyedScorer) score(cfg *Config, features []string, b *batch.Batch, raw [][]float32, out []batch.Score) {
	k.finishBuilds() // (the caller's, after the batch before: finish)
	k.settle()       // (the device as the last batch left it, for the whole pass)
	k.tail = k.fleetPass(cfg, len(out))
	warm := newWarmCells(b, raw, k.cycles) // (the warming values at each key's model's centre: warmup.go)
	if k.scoreParallel(cfg, features, b, raw, warm, out) {
		return
	}
	if k.dev != nil {
		k.scoreOnDevice(cfg, features, b, raw, warm, out)
		return
	}
	sraw := warm.scoring(raw)
	keys, parts := b.Keys(), b.Partitions()
	d := len(raw)
	x := make([][]float32, d) // the record's values, column-major
	dens, dist := make([]float64, 1), make([]float64, 1)
	space := make([][]float32, d)
	for j := range space {
		space[j] = make([]float32, 1)
	}
	for i := range out {
		st := k.recordState(out, keys, parts, i, cfg, d)
		if st == nil {
			continue
		}
		sc := &out[i]
		sig := false
		if r := st.model; r != nil {
			warm.centre(i, st)
			for j := range raw {
				x[j] = sraw[j][i : i+1]
			}
			r.Tail.Score(x, dens)
			r.distanceSpace(x, space)
			solvingset.KNNWeights(r.Ref.Points, space, r.Ref.K, 1, dist)
			sig = decideByKey(cfg, features, st, r, st.version, x, out[i:i+1], dens[0], dist[0], &k.hand, k.tail, i)
		} else {
			sc.Warming = true
		}
		warm.noteTime(i, st)
		if !k.follower {
			for j := range raw { // (the window: the derived values, warming or not)
				x[j] = raw[j][i : i+1]
			}
			k.push(st, x, sig, warm.at(i), cfg)
		}
	}
}

// warmRows marks the records of b whose key has a model now (nil when none has): the global
// ranking skips them. A key that warms within b is not marked (its records are scored both ways).
// The lookups run on every core (the map is only read).
// The states looked up are kept for the parallel path (lookupKeys) with the records' shards.
func (k *keyedScorer) warmRows(b *batch.Batch) []bool {
	if k.warm == 0 {
		return nil
	}
	keys, n := b.Keys(), b.Len()
	out := make([]bool, n)
	workers := parallelWorkers(n)
	sts, shard := make([]*keyState, n), make([]uint8, n)
	warm := func(i int) bool { return sts[i] != nil && sts[i].model != nil }
	onChunks(n, max(1, min(runtime.GOMAXPROCS(0), n/parallelGrain)), func(lo, hi int) {
		// A record's key's model is read lookupLag records after its lookup, which asked for
		// its line (prefetch): at a million keys each state is a miss, which then overlaps the
		// next lookups' instead of following its own.
		for i := lo; i < hi; i++ {
			key := recordKey(keys, i)
			st := k.keys[string(key)]
			sts[i] = st
			if st != nil {
				prefetch.Object(&st.model)
			}
			if workers >= 2 {
				shard[i] = uint8(keyHash(key) % uint64(workers))
			}
			if j := i - lookupLag; j >= lo {
				out[j] = warm(j)
			}
		}
		for j := max(lo, hi-lookupLag); j < hi; j++ {
			out[j] = warm(j)
		}
	})
	k.looked = keyLookups{b: b, gen: k.gen, sts: sts, shard: shard}
	return out
}

// lookupLag is how many records after its key's lookup warmRows reads the key's model.
const lookupLag = 16

// clearGlobalFields clears the global model's own fields of a record its key's model scores:
// the paper's density and solving-set verdicts, eta-probability, subspace, w_k(q,S), w* and
// the hypercube's (globalRows: a warm key's record is its key's model's alone; the fields
// that model writes are decideByKey's).
func clearGlobalFields(sc *batch.Score) {
	sc.DensityOutlier, sc.EtaProbability, sc.Subspace, sc.SubspaceOf = false, 0, nil, ""
	sc.DistanceOutlier, sc.Weight, sc.WStar, sc.Hypercube = false, 0, 0, nil
}

// decideByKey scores one record (raw: its values, out: its score; record i of its batch) by its
// key's model r from the raw scores, and decides its flag by significance and the key's cap (or
// leaves it to capAlarms: h, keyed_handover.go); it returns whether the record was significant.
func decideByKey(cfg *Config, features []string, st *keyState, r *Ranker, version uint64, raw [][]float32, out []batch.Score, dens, dist float64, h *handover, f *fleetTail, i int) bool {
	return decideByKeyMean(cfg, features, st, r, version, raw, out, dens, dist, r.mean(dens, dist), h, f, i)
}

// decideByKeyMean is decideByKey with the mean of the record's calibrated scores, r.mean(dens,
// dist), computed ahead (keyedWorker.decide); the combined score is its final calibration's
// surprisal, as r.combine computes it, raised by the fleet's tail f (keyed_fleet.go; nil: none).
func decideByKeyMean(cfg *Config, features []string, st *keyState, r *Ranker, version uint64, raw [][]float32, out []batch.Score, dens, dist, mean float64, h *handover, f *fleetTail, i int) bool {
	sc := &out[0]
	clearGlobalFields(sc) // (a key warming within the batch: the global model scored it too)
	sc.DensityScore, sc.DistanceScore = dens, dist
	sc.Score, sc.Threshold = r.Final.Surprisal(mean), cfg.MinScore
	if f != nil {
		sc.Score = f.lift(r, raw, sc.Score, cfg.MinScore, cfg.Keys.Window, i)
	}
	sig := sc.Score >= sc.Threshold
	if h.waits(st, i) { // (its key's first: capAlarms decides; explained below if it may be flagged)
		sc.Outlier, sc.Held, sc.Suppressed = sig || sc.Score >= cfg.clearScore(), false, false
	} else {
		sc.Outlier, sc.Held = st.cap.admitRun(sig, st.cap.last(), sc.Score, cfg.clearScore(), capLimit(cfg.AlarmRate, cfg.Keys.Window))
		sc.Suppressed = sig && !sc.Outlier
	}
	sc.ByKey, sc.Warming, sc.KeyModelVersion = true, false, version
	sc.Deviations = nil
	explainDeviations(r, features, raw, out, true)
	return sig
}

// recordKey is record i's key: nil when the batch carries no keys or the record has none.
func recordKey(keys *array.Binary, i int) []byte {
	if keys != nil && keys.IsValid(i) {
		return keys.Value(i)
	}
	return nil
}

// recordState is the state of record i's key, the key's partition noted where the keys' models
// are built here; nil for a scorer's key it holds no published model of, whose record it marks
// Warming (the global model scores it).
func (k *keyedScorer) recordState(out []batch.Score, keys *array.Binary, parts []int32, i int, cfg *Config, d int) *keyState {
	st := k.stateOf(recordKey(keys, i), cfg, d)
	if st == nil {
		out[i].Warming = true
		return nil
	}
	if !k.follower {
		st.partition = parts[i]
	}
	return st
}

// recentBytes is a key's ring of m recent scores (float64) and their index by score, and the
// maxima of its horizon's blocks (float64; recent.go).
func recentBytes(m, blocks int) int64 { return int64(m*(8+indexWidth(m)) + 8*blocks) }

// stateOf is state for a key's bytes, without a string made for a key already held. A scorer's
// key (follower) is made by InstallKeyModels only: nil for a key it holds no model of.
func (k *keyedScorer) stateOf(key []byte, cfg *Config, d int) *keyState {
	if st, ok := k.keys[string(key)]; ok {
		k.lru.touch(st)
		return st
	}
	if k.follower {
		return nil
	}
	return k.state(string(key), cfg, d)
}

// state returns key's state, made (cold) when new; the key becomes the most recently seen, and
// the least recently seen keys are evicted past the limits.
func (k *keyedScorer) state(key string, cfg *Config, d int) *keyState {
	if st, ok := k.keys[key]; ok {
		k.lru.touch(st)
		return st
	}
	st := k.newState(key, cfg, d)
	k.lru.touch(st)
	for len(k.keys) > cfg.Keys.MaxKeys || (cfg.Keys.MaxBytes > 0 && k.bytes > cfg.Keys.MaxBytes && len(k.keys) > 1) {
		k.evict(k.lru.oldest(), d)
	}
	return st
}

// newState makes key's state (cold) and holds it, untouched (state touches it; the parallel
// path, keyed_parallel.go, touches it at its record).
func (k *keyedScorer) newState(key string, cfg *Config, d int) *keyState {
	w := cfg.Keys.Window
	st := &keyState{key: key, sig: newFlagRing(w), cap: newAlarmCap(w), slot: -1}
	if cfg.RecentScores > 0 {
		st.recent.resize(cfg.RecentScores, cfg.RecentBlocks())
	}
	if !k.follower { // (a scorer's key keeps no window)
		st.cols = make([][]float32, d)
		for j := range st.cols {
			st.cols[j] = make([]float32, w)
		}
	}
	k.keys[key] = st
	k.gen++
	k.bytes += k.bytesOf(w, d, false) + recentBytes(cfg.RecentScores, cfg.RecentBlocks()) + int64(len(key)) // (a key is as long as the input's writer makes it)
	return st
}

// evict drops st past the limits (or retired by its builder): counted, its alarm handed back to
// the global model's path (keyed_handover.go).
func (k *keyedScorer) evict(st *keyState, d int) {
	if !st.warm {
		k.coldEvictions++
	}
	k.remove(st, d)
	k.evictions++
	k.hand.evicted(st)
}

// remove drops st from the keys held: a key evicted, or moved to another scorer (its records
// and its alarm go with it: DropKeysOutside).
func (k *keyedScorer) remove(st *keyState, d int) {
	st.gone = true // (its touches in the recency log are stale from now on)
	delete(k.keys, st.key)
	k.gen++
	k.bytes -= k.bytesOf(st.sig.len(), d, st.warm) + st.recent.bytes() + int64(len(st.key))
	if st.warming != nil {
		k.bytes -= warmRingBytes(st.sig.len())
	}
	if st.warm {
		k.warm--
		k.markDirty(st)
	}
	if st.slot >= 0 {
		k.slots.release(st.slot)
		st.slot = -1
	}
	st.due = false // (a build waiting for the flush is dropped with the key)
}

// push appends one record to its key's window and rebuilds the key's model when it is due:
// when the window first holds keys.min_records, then every keys.rebuild_records records
// (KeysConfig.Rebuild: a quarter of keys.window by default); the records that were warming not
// counted (append).
func (k *keyedScorer) push(st *keyState, x [][]float32, sig, warming bool, cfg *Config) {
	due, grew := k.append(st, x, sig, warming, cfg)
	k.bytes += grew
	if due {
		k.build(st, cfg)
	}
}

// append appends one record to its key's window (warming: a rolling column of the record was
// still warming, warmCells.at) and says whether the key's model is due: when the window first
// holds keys.min_records records that were not warming, then every KeysConfig.Rebuild records
// while it holds that many (keyed_warmup.go). grew is the bytes the key's state grew by (its
// ring of warming marks, made at its first warming record), for the caller to count: the
// parallel path's workers append.
func (k *keyedScorer) append(st *keyState, x [][]float32, sig, warming bool, cfg *Config) (due bool, grew int64) {
	w := st.sig.len()
	for j := range st.cols {
		st.cols[j][st.next] = x[j][0]
	}
	st.sig.set(st.next, sig)
	if warming && st.warming == nil {
		grew = warmRingBytes(w)
	}
	st.noteWarming(st.next, warming)
	st.next = (st.next + 1) % w
	st.size = min(st.size+1, w)
	if st.since < math.MaxInt32 {
		st.since++
	}
	if st.size-st.warmingCount() < cfg.Keys.MinRecords {
		return false, grew
	}
	if st.model == nil && !st.warm {
		markWarmupOutcasts(st, outcastZ(cfg.MinScore)) // (the first build is due: its warm-up judged)
		return true, grew
	}
	return !st.warm || int(st.since) >= cfg.Keys.Rebuild(), grew
}

// rephase carries every key's records since its last build from one rebuild cadence to another
// (a live change of keys.rebuild_records), in proportion: each key keeps its place between its
// rebuilds, so the fleet's rebuilds go on at the new steady rate. Left as they were, a halved
// cadence would make every key past the new one rebuild at its next record, about half the
// fleet within one pass over it (TestKeysRebuildRecordsLiveKeepsPhase). One walk over the keys,
// between batches, at a reload.
func (k *keyedScorer) rephase(from, to int) {
	if from == to {
		return
	}
	for _, st := range k.keys {
		st.since = int32(int64(st.since) * int64(to) / int64(from))
	}
}

// build makes the key's model from its window, oldest first, without the records found
// significant that are also far out (keepFarOutcasts; while the rest is at least outcastFloor of
// the window).
func (k *keyedScorer) build(st *keyState, cfg *Config) {
	r, err := buildKeyModel(st, cfg)
	st.since = 0
	if err != nil {
		return // too few records left: the previous model (or the global one) keeps scoring
	}
	k.markWarm(st)
	st.model = r
	k.markDirty(st)
}

// markWarm counts st as warm (once).
func (k *keyedScorer) markWarm(st *keyState) {
	if !st.warm {
		st.warm = true
		k.warm++
		w, d := st.sig.len(), len(st.cols)
		k.bytes += k.bytesOf(w, d, true) - k.bytesOf(w, d, false)
	}
}
