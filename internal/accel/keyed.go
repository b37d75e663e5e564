package accel

import (
	"errors"
	"fmt"
	"math"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/fanout"
)

// KeyedModel is one key's ranking model in the algorithms' types (detect's Ranker for a key):
// the tail score's distributions, the window sample R of the k-NN distance score with its k, and
// R's space (x' = clamp((x - Center) / Unit, +-gpukern.KeyedLimit)).
type KeyedModel struct {
	Tail         *rank.Tail
	Ref          *solvingset.Model
	Center, Unit []float64
}

// KeyedModels is detect.KeyedModels, spelled out here (an alias of the same interface literal)
// so that the stage's optional KeyedAccelerator method is implemented without importing detect.
type KeyedModels = interface {
	Install(slots []int32, tails []*rank.Tail, refs []*solvingset.Model, centers, units [][]float64) error
	Score(slots, rows [][]int32, x [][]float32, tail, dist [][]float64) error
	Bytes() int64
	Close() error
}

// KeyedModels opens a KeyedStore for the detect stage (detect.KeyedAccelerator).
func (d *Device) KeyedModels(dims, window int) (KeyedModels, error) {
	return d.KeyedStore(dims, window)
}

// KeyedStore keeps keys' models resident on the GPU (a slot per warm key, the caller's slot
// numbers) and scores a batch's records of many keys in one call (gpukern.KeyedStore). It keeps
// the host's models too: a call the kernels do not cover, or one the device fails, runs on the CPU
// with them (the same scores). Not safe for concurrent use (one stage owns it: its keys' pass,
// and the upload it settles before any other use).
type KeyedStore struct {
	d      *Device
	gpu    *gpukern.KeyedStore // nil: every call on the CPU
	shape  gpukern.KeyedShape
	models []KeyedModel // by slot
	why    string       // why the kernels do not take the store ("" when they do)
	call   keyedCall
}

// KeyedStore opens a store for models of dims features and windows of window records; on the
// CPU, or for a shape the kernels do not take, every call runs on the CPU.
func (d *Device) KeyedStore(dims, window int) (*KeyedStore, error) {
	s := &KeyedStore{d: d, shape: gpukern.KeyedShape{Dims: dims, Window: window}}
	s.why = s.shape.Check()
	if d.gpu == nil || s.why != "" {
		return s, nil
	}
	g, err := d.gpu.NewKeyedStore(s.shape)
	if err != nil {
		d.failed("keyed models", err)
		return s, nil
	}
	s.gpu = g
	return s, nil
}

// SlotBytes is the device memory one key's model takes (0 on the CPU).
func (s *KeyedStore) SlotBytes() int {
	if s.gpu == nil {
		return 0
	}
	return s.shape.SlotBytes()
}

// Bytes is the device memory the store holds (0 on the CPU).
func (s *KeyedStore) Bytes() int64 {
	if s.gpu == nil {
		return 0
	}
	return s.gpu.Bytes()
}

// Install puts model i in slot slots[i] (a key's new model), in one upload: its tail score's
// distributions, its window sample R with k, and R's space.
func (s *KeyedStore) Install(slots []int32, tails []*rank.Tail, refs []*solvingset.Model, centers, units [][]float64) error {
	models := make([]KeyedModel, len(slots))
	for i := range models {
		models[i] = KeyedModel{Tail: tails[i], Ref: refs[i], Center: centers[i], Unit: units[i]}
	}
	for i, sl := range slots {
		if sl < 0 {
			return fmt.Errorf("accel.KeyedStore.Install: slot %d", sl)
		}
		for int(sl) >= len(s.models) {
			s.models = append(s.models, KeyedModel{})
		}
		s.models[sl] = models[i]
	}
	if s.gpu == nil || len(slots) == 0 {
		return nil
	}
	gm := make([]*gpukern.KeyedModel, len(models))
	for i, m := range models {
		if m.Ref.K > gpukern.KeyedMaxK || len(m.Tail.Sorted[0]) > s.shape.Window || len(m.Ref.Points[0]) > s.shape.Window {
			s.dropGPU(fmt.Sprintf("a key's model of k = %d, %d values (the keyed kernels take k <= %d, %d values)", m.Ref.K, len(m.Tail.Sorted[0]), gpukern.KeyedMaxK, s.shape.Window))
			return nil
		}
		gm[i] = &gpukern.KeyedModel{Sorted: m.Tail.Sorted, Spread: m.Tail.Spread, Points: m.Ref.Points, Center: m.Center, Unit: m.Unit, K: m.Ref.K}
	}
	if !s.d.calls.begin() { // (the device closed: close.go)
		s.gpu = nil
		return nil
	}
	err := s.gpu.Install(slots, gm)
	s.d.calls.end()
	if err != nil {
		// The device's copy is now unknown: the CPU takes every later call of this store.
		s.d.failed("keyed models", err)
		s.dropGPU("")
	}
	return nil
}

// dropGPU frees the device's store: the host's models score from now on.
func (s *KeyedStore) dropGPU(why string) {
	if why != "" {
		s.why = why
		s.d.notCovered("keyed scoring", why)
	}
	if s.d.calls.begin() { // (else the device closed: close.go)
		err := s.gpu.Free()
		s.d.calls.end()
		if err != nil {
			s.d.failed("keyed models", err)
		}
	}
	s.gpu = nil
}

// Score writes the tail score and w_k(q, R) (rank.Tail.Score's and solvingset.KNNWeights's bits)
// of records given in parts, all in one device call: part w's record r is row rows[w][r] of x
// (column-major; row r where rows[w] is nil) against the model in slot slots[w][r], its scores
// written to tail[w][r] and dist[w][r]. Each part's host side (its records grouped by slot into
// the call's arrays, its scores placed, what the CPU scores) runs on a goroutine of its own: the
// detect stage's workers give their own records as a part each, and of the call only the packed
// copy for the upload runs over all its records on one goroutine (docs/BENCHMARKS.md §13.1.15).
// The CPU scores what the kernels leave to it: a tail past the window's range by more than ln n
// spreads (rank's log1p), a record with a non-finite value, and everything after a device
// failure. Records that do not fit the store (not its feature count, a row outside x) or a slot
// without a model are an error, and nothing is written.
func (s *KeyedStore) Score(slots, rows [][]int32, x [][]float32, tail, dist [][]float64) error {
	parts := len(slots)
	if len(rows) != parts || len(tail) != parts || len(dist) != parts {
		return fmt.Errorf("accel.KeyedStore.Score: %d parts of slots, %d of rows, %d/%d of outputs", parts, len(rows), len(tail), len(dist))
	}
	from := make([]int, parts+1)
	for w := range parts {
		n := len(slots[w])
		if rows[w] != nil && len(rows[w]) != n || len(tail[w]) != n || len(dist[w]) != n {
			return fmt.Errorf("accel.KeyedStore.Score: part %d: %d slots, %d rows, %d/%d outputs", w, n, len(rows[w]), len(tail[w]), len(dist[w]))
		}
		from[w+1] = from[w] + n
	}
	// The device's layout takes a record's width from the store: other columns would be read as
	// other records' values.
	if len(x) != s.shape.Dims {
		return fmt.Errorf("accel.KeyedStore.Score: %d features, the store's are %d", len(x), s.shape.Dims)
	}
	cols := 0
	if len(x) > 0 {
		cols = len(x[0])
	}
	for j, c := range x {
		if len(c) != cols {
			return fmt.Errorf("accel.KeyedStore.Score: feature %d has %d rows, feature 0 %d", j, len(c), cols)
		}
	}
	n := from[parts]
	if n == 0 {
		return nil
	}
	errs := make([]error, parts) // (on the parts' goroutines: each part's slots are read there again)
	fanout.Each(parts, parts, func(w int) {
		for r, sl := range slots[w] {
			if sl < 0 || int(sl) >= len(s.models) || s.models[sl].Tail == nil {
				errs[w] = fmt.Errorf("accel.KeyedStore.Score: part %d: slot %d holds no model", w, sl)
				return
			}
			if i := row(rows[w], r); i < 0 || i >= cols {
				errs[w] = fmt.Errorf("accel.KeyedStore.Score: part %d: record %d's row %d is outside x's %d", w, r, i, cols)
				return
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d := len(x)
	sc := &s.call
	if len(sc.groupers) < parts {
		sc.groupers = make([]gpukern.KeyedGrouper, parts)
		sc.orders = make([][]int32, parts)
		sc.chunks = make([][]int32, parts)
	}
	onGPU := false
	why := s.why
	if why == "" && s.gpu == nil {
		why = "the keyed models' device store was given up after a failure"
	}
	err := s.d.step("keyed scoring", why, func() error {
		if cap(sc.xs) < n*d {
			sc.xs = make([]float32, n*d)
		}
		xs := sc.xs[:n*d]
		fanout.Each(parts, parts, func(w int) { // (a goroutine a part)
			sc.orders[w], sc.chunks[w] = sc.groupers[w].Group(slots[w], rows[w], x, from[w], xs)
		})
		if err := s.gpu.ScoreGrouped(sc.chunks[:parts], xs, &sc.out); err != nil {
			return err
		}
		onGPU = true
		return nil
	}, func() error { return nil })
	if err != nil {
		return err
	}
	fanout.Each(parts, parts, func(w int) { // (a goroutine a part)
		var cpu keyedCPU
		if !onGPU {
			for r := range slots[w] {
				cpu.score(s, slots[w][r], x, row(rows[w], r), false, &tail[w][r], &dist[w][r])
			}
			return
		}
		xs := sc.xs[from[w]*d : from[w+1]*d]
		for p, r32 := range sc.orders[w] {
			r, at := int(r32), from[w]+p
			tail[w][r], dist[w][r] = sc.out.Tail(at), sc.out.Dist(at)
			if finite := allFinite32(xs[p*d : (p+1)*d]); !finite || sc.out.Host(at) {
				cpu.score(s, slots[w][r], x, row(rows[w], r), finite, &tail[w][r], &dist[w][r])
			}
		}
	})
	return nil
}

// keyedCall is Score's host memory, kept for the next call (a call's arrays are megabytes at
// a million keys: fresh memory each call costs more than the work, §13.1.4).
type keyedCall struct {
	groupers       []gpukern.KeyedGrouper
	orders, chunks [][]int32
	xs             []float32
	out            gpukern.KeyedScores
}

// row is record r's row of x (rows nil: r).
func row(rows []int32, r int) int {
	if rows == nil {
		return r
	}
	return int(rows[r])
}

// keyedCPU scores single records on the CPU from the host's copy of their key's model (a part's
// goroutine's scratch).
type keyedCPU struct {
	one, q [][]float32
	out    []float64
}

// score writes record i's (row i of x) tail score against the model in slot sl, and its w_k(q,
// R) unless the device's distance stands (distOK: the record is finite, the device scored it).
func (c *keyedCPU) score(s *KeyedStore, sl int32, x [][]float32, i int, distOK bool, tail, dist *float64) {
	if c.one == nil {
		c.one, c.q, c.out = make([][]float32, len(x)), make([][]float32, len(x)), make([]float64, 1)
		for j := range c.q {
			c.q[j] = make([]float32, 1)
		}
	}
	m := &s.models[sl]
	for j := range x {
		c.one[j] = x[j][i : i+1]
	}
	m.Tail.Score(c.one, c.out)
	*tail = c.out[0]
	if distOK {
		return // the device's distance is the CPU's
	}
	for j := range x { // detect's distanceSpace, clamped as the kernel clamps
		c.q[j][0] = float32(max(-gpukern.KeyedLimit, min(gpukern.KeyedLimit, (float64(x[j][i])-m.Center[j])/m.Unit[j])))
	}
	solvingset.KNNWeights(m.Ref.Points, c.q, m.Ref.K, 1, c.out)
	*dist = c.out[0]
}

// Close frees the device's store.
func (s *KeyedStore) Close() error {
	if s.gpu == nil || !s.d.calls.begin() { // (the device closed: its release frees the store, close.go)
		s.gpu = nil
		return nil
	}
	err := s.gpu.Free()
	s.d.calls.end()
	s.gpu = nil
	return err
}

// SelfWeightsCovered reports whether SelfWeights of sets of dims features at k runs on the GPU
// (else it runs on the calling goroutine, where the stage's cores build its keys faster).
func (s *KeyedStore) SelfWeightsCovered(dims, k int) bool {
	return s.d.gpu != nil && dims >= 1 && dims <= gpukern.KeyedMaxDims && k >= 1 && k <= gpukern.KeyedMaxK
}

// SelfWeights is the device's KeyedSelfWeights: the key builds' k-NN calibrations, every set in
// one call. It reads no model of the store and is safe beside its other calls.
func (s *KeyedStore) SelfWeights(sets [][][]float32, k []int, out [][]float64) error {
	return s.d.KeyedSelfWeights(sets, k, out)
}

// KeyedSelfWeights writes out[s][i], the sum of the distances from point i of set s (sets[s]: d
// columns of its points) to its k[s] nearest other points of the set (solvingset.KNNWeightsSelf's
// bits), every set in one launch on the GPU (gpukern.Device.KeyedSelfWeights), else on the CPU.
func (d *Device) KeyedSelfWeights(sets [][][]float32, k []int, out [][]float64) error {
	if len(k) != len(sets) || len(out) != len(sets) {
		return fmt.Errorf("accel.KeyedSelfWeights: %d sets, %d k, %d outputs", len(sets), len(k), len(out))
	}
	for s, set := range sets {
		if len(set) == 0 || len(set) != len(sets[0]) || k[s] < 1 || len(out[s]) != len(set[0]) {
			return fmt.Errorf("accel.KeyedSelfWeights: set %d of %d features (set 0: %d), k = %d, %d outputs", s, len(set), len(sets[0]), k[s], len(out[s]))
		}
		for j, c := range set { // (a ragged set is the caller's error, not a device failure)
			if len(c) != len(set[0]) {
				return fmt.Errorf("accel.KeyedSelfWeights: set %d: feature %d has %d points, feature 0 %d", s, j, len(c), len(set[0]))
			}
		}
	}
	why := ""
	for s, set := range sets {
		if len(set) > gpukern.KeyedMaxDims || k[s] > gpukern.KeyedMaxK {
			why = fmt.Sprintf("a key build of %d features at k = %d (the keyed kernels take %d and %d)", len(set), k[s], gpukern.KeyedMaxDims, gpukern.KeyedMaxK)
			break
		}
		if !allFinite(set) { // (keyed_self leaves a point out by its index, KNNWeightsSelf its zero distance: the same only for finite points)
			why = fmt.Sprintf("a key build's set %d holds a point not finite", s)
			break
		}
	}
	return d.step("keyed builds", why, func() error {
		return d.gpu.KeyedSelfWeights(sets, k, out)
	}, func() error { // (on every core: a batch's builds wait for it, as for their GPU call)
		fanout.OnCores(len(sets), func(s int) { solvingset.KNNWeightsSelf(sets[s], k[s], out[s]) })
		return nil
	})
}

// allFinite32 reports whether every value of v is finite.
func allFinite32(v []float32) bool {
	for _, f := range v {
		if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
			return false
		}
	}
	return true
}

// allFinite reports whether every value of the columns is finite (a key build's points in the
// distance space always are: clamped, from finite windows).
func allFinite(cols [][]float32) bool {
	for _, c := range cols {
		if !allFinite32(c) {
			return false
		}
	}
	return true
}
