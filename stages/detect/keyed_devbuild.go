package detect

import (
	"runtime"
	"sync"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/fanout"
)

// Key builds batched on the device (issue 21 item 2): more than half of a key's build on the
// host is its k-NN calibration (each of the window's records against the others, keyBuild.build:
// 57% of BenchmarkKeyBuild's CPU profile), and a batch at a million keys rebuilds hundreds of
// keys. With a device that takes it, the batch's builds run in three steps: each key's
// keyBuild.prepare on the cores (its window, sorted tails, standardisation and R), then every
// key's calibration in one device call (R against itself, a block per key: gpukern's
// keyed_self, solvingset.KNNWeightsSelf's bits), then each key's keyBuild.finish on the cores
// (the calibrations and the detectors' weights). The models are the CPU build's bit for bit
// (TestKeyBuildMatchesGeneral builds its windows batched too; the stage's parity tests with the
// kernel's CPU twin and on the GPU). The device call's input is R, which the model keeps on the host as before (snapshots,
// the model topic, the CPU's scoring of a later round's few records); the keys' upload
// (install) still sends the whole model.

// KeyedSelfWeigher is a KeyedModels that also computes keys' builds' k-NN calibrations on its
// device, many keys in one call (optional; internal/accel's store has it).
type KeyedSelfWeigher interface {
	// SelfWeightsCovered reports whether SelfWeights of sets of dims features at k (at most)
	// runs on the device.
	SelfWeightsCovered(dims, k int) bool
	// SelfWeights writes out[s][i], the sum of the distances from point i of sets[s] (column-
	// major) to its k[s] nearest other points of the set: solvingset.KNNWeightsSelf's bits. It
	// must be safe beside the store's other calls, and after its Close.
	SelfWeights(sets [][][]float32, k []int, out [][]float64) error
}

// deviceBuildsMin is the fewest due keys whose builds take the device's calibration (fewer:
// the device call's round trip, a fraction of a millisecond, is more than their builds on the
// cores). A variable: the tests lower it.
var deviceBuildsMin = 32

// selfWeigher is the device that takes the calibrations of due's builds (dims features), or nil.
func (k *keyedScorer) selfWeigher(due []*keyState, cfg *Config) KeyedSelfWeigher {
	if len(due) < deviceBuildsMin || k.dev == nil {
		return nil
	}
	sw, ok := k.dev.(KeyedSelfWeigher)
	if !ok || !sw.SelfWeightsCovered(len(due[0].cols), cfg.Keys.K) { // (a build's k is at most keys.k)
		return nil
	}
	return sw
}

// buildKeysBatched is buildKeyModel of every due key into out (nil where a build failed), the
// keys' k-NN calibrations in one call of sw (above); the keys' other work on every core, each
// key in its goroutine's pooled keyBuild scratch, and per key only what its finish reads kept
// across the call, in the call's room (preparedBuild into batchedRoom's rows and vals, kept
// from call to call: ~4 KB a key, where a keyBuild scratch held
// per key would be 400 scratches of tens of KB a batch). A window outside
// keyBuild's shortcuts takes the general build, on the cores; a failed device call leaves the
// calibrations to the cores (KNNWeightsSelf: the same bits).
func buildKeysBatched(due []*keyState, out []*Ranker, cfg *Config, sw KeyedSelfWeigher) {
	n := len(due)
	room := batchedRooms.Get().(*batchedRoom)
	defer batchedRooms.Put(room)
	room.rs, room.ps, room.at = grow(room.rs, n), grow(room.ps, n), grow(room.at, n+1)
	rs, ps, at := room.rs, room.ps, room.at // at: key t's room is at[t] .. at[t+1] (its window's records, at most)
	defer clear(ps)
	defer clear(rs) // (a key of the next call that takes the general build must find no R here to finish)
	at[0] = 0
	for t, st := range due {
		at[t+1] = at[t]
		if st.size <= keyBuildMaxRows { // (a larger window takes the general build: no room)
			at[t+1] += st.size
		}
	}
	room.rows, room.vals = grow(room.rows, at[n]), grow(room.vals, 2*at[n])
	rows, vals := room.rows, room.vals // (each key's part written by its prepare and calibration before its finish reads it)
	workers := runtime.GOMAXPROCS(0)
	fanout.Each(workers, n, func(t int) {
		prefetchBuild(due, t, min(workers, n))
		kb := keyBuilds.Get().(*keyBuild)
		defer keyBuilds.Put(kb)
		r, ok := kb.prepare(due[t], cfg)
		if !ok {
			out[t], _ = buildKeyModelGeneral(due[t], cfg)
			return
		}
		m, lo := len(kb.order), at[t]
		p := preparedBuild{rows: rows[lo : lo+m : lo+m], dens: vals[2*lo : 2*lo+m : 2*lo+m], self: vals[2*lo+m : 2*lo+2*m : 2*lo+2*m]}
		kb.rowsOfR(p.rows)
		copy(p.dens, kb.dens)
		rs[t], ps[t] = r, p
	})
	sets, ks, ws := make([][][]float32, 0, n), make([]int, 0, n), make([][]float64, 0, n)
	for t, r := range rs {
		if r != nil {
			sets, ks, ws = append(sets, r.Ref.Points), append(ks, r.Ref.K), append(ws, ps[t].self)
		}
	}
	if len(sets) > 0 && sw.SelfWeights(sets, ks, ws) != nil {
		fanout.OnCores(len(sets), func(s int) { solvingset.KNNWeightsSelf(sets[s], ks[s], ws[s]) })
	}
	fanout.OnCores(n, func(t int) {
		if rs[t] == nil {
			return
		}
		kb := keyBuilds.Get().(*keyBuild)
		out[t] = kb.finish(rs[t], cfg, ps[t])
		keyBuilds.Put(kb)
	})
}

// batchedRoom is buildKeysBatched's memory, kept from call to call (batchedRooms): a batch's
// 400 due keys' room (rows and vals) is 1.6 MB at the defaults (20 bytes a record), which made
// fresh each call was a large allocation the runtime zeroed before the keys wrote it, often in
// pages it had given back to the system (a fault each), every batch (docs/BENCHMARKS.md
// §13.1.16).
type batchedRoom struct {
	rs   []*Ranker
	ps   []preparedBuild
	at   []int
	rows []int32
	vals []float64
}

var batchedRooms = sync.Pool{New: func() any { return new(batchedRoom) }}

// buildDue is buildKeyModel of every due key into out (nil where a build failed): with sw (the
// keyedScorer's selfWeigher, read on the caller's goroutine) batched, else on the cores.
func buildDue(due []*keyState, out []*Ranker, cfg *Config, sw KeyedSelfWeigher) {
	if sw != nil {
		buildKeysBatched(due, out, cfg, sw)
		return
	}
	buildKeys(due, out, cfg)
}
