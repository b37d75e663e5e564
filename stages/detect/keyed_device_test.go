package detect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// twinKeyed is KeyedModels on gpukern's CPU twin of the keyed kernels (KeyedScoreReference), with
// internal/accel's split of the work: the tails past the kernels' reach on the CPU. It also counts
// the calls, so the tests see the batching.
type twinKeyed struct {
	models           map[int32]*gpukern.KeyedModel
	tails            map[int32]*rank.Tail
	logs             []float64
	scores, installs int
	host             int
	builds           twinSelf // the key builds' calibrations (KeyedSelfWeigher)
}

func newTwinKeyed(window int) *twinKeyed {
	return &twinKeyed{models: map[int32]*gpukern.KeyedModel{}, tails: map[int32]*rank.Tail{}, logs: gpukern.KeyedLogs(window)}
}

func (t *twinKeyed) Install(slots []int32, tails []*rank.Tail, refs []*solvingset.Model, centers, units [][]float64) error {
	t.installs++
	for i, s := range slots {
		t.models[s] = &gpukern.KeyedModel{Sorted: tails[i].Sorted, Spread: tails[i].Spread, Points: refs[i].Points, Center: centers[i], Unit: units[i], K: refs[i].K}
		t.tails[s] = tails[i]
	}
	return nil
}

func (t *twinKeyed) Score(slots, rows [][]int32, x [][]float32, tail, dist [][]float64) error {
	t.scores++
	one, rec, out := make([][]float32, len(x)), make([]float32, len(x)), make([]float64, 1)
	for w := range slots {
		for r, s := range slots[w] {
			i := r
			if rows[w] != nil {
				i = int(rows[w][r])
			}
			for j := range x {
				rec[j], one[j] = x[j][i], x[j][i:i+1]
			}
			var host bool
			tail[w][r], dist[w][r], host = gpukern.KeyedScoreReference(t.models[s], rec, t.logs)
			if host {
				t.host++
				t.tails[s].Score(one, out)
				tail[w][r] = out[0]
			}
		}
	}
	return nil
}

func (t *twinKeyed) SelfWeightsCovered(dims, k int) bool { return true }

func (t *twinKeyed) SelfWeights(sets [][][]float32, k []int, out [][]float64) error {
	return t.builds.SelfWeights(sets, k, out)
}

func (t *twinKeyed) Bytes() int64 { return 0 }
func (t *twinKeyed) Close() error { return nil }

// keyedStream is a fleet of keys with baselines of their own, 3 features, 1% spikes of +8 sd
// and 0.5% far ones (+60 sd: past the kernels' tail, the host's log1p), in batches.
type keyedStream struct {
	r        *rand.Rand
	keys     int
	base, sd [][3]float64
	off      int64
	mem      memory.Allocator
}

func newKeyedStream(keys int, seed uint64) *keyedStream {
	s := &keyedStream{r: rand.New(rand.NewPCG(seed, 21)), keys: keys, mem: memory.NewGoAllocator()}
	for range keys {
		var b, d [3]float64
		for j := range b {
			b[j], d[j] = 1000*s.r.Float64(), 1+4*s.r.Float64()
		}
		s.base, s.sd = append(s.base, b), append(s.sd, d)
	}
	return s
}

// next is a batch of n records, keys drawn from the first `among` keys (80% from the first
// 100), in copies batches of the same records, and its raw columns.
func (s *keyedStream) next(t testing.TB, n, among, copies int) ([]*batch.Batch, [][]float32) {
	rows := make([]testbatch.Row, n)
	raw := make([][]float32, 3)
	for i := range rows {
		k := s.r.IntN(among)
		if s.r.Float64() < 0.8 { // most records from the first 100 keys: they stay, the rest come and go
			k = s.r.IntN(min(among, 100))
		}
		f := make([]float32, 3)
		for j := range f {
			v := s.base[k][j] + s.sd[k][j]*s.r.NormFloat64()
			switch u := s.r.Float64(); {
			case u < 0.005:
				v += 60 * s.sd[k][j]
			case u < 0.015:
				v += 8 * s.sd[k][j]
			}
			f[j] = float32(v)
			raw[j] = append(raw[j], f[j])
		}
		rows[i] = testbatch.Row{Offset: s.off, Key: []byte(fmt.Sprintf("key-%04d", k)), Time: time.Unix(s.off, 0), Features: f}
		s.off++
	}
	bs := make([]*batch.Batch, copies)
	for c := range bs {
		bs[c] = testbatch.New(t, s.mem, "keys", []string{"a", "b", "c"}, false, false, rows)
		bs[c].Scores = make([]batch.Score, n)
	}
	return bs, raw
}

// checkKeyedParity feeds the same batches to the serial CPU path of a keyedScorer (the
// reference) and to the CPU's parallel path, the device's serial path (dev) and its parallel path
// (keyed_parallel.go), and holds every record's scores, verdict and explanation, the keys'
// windows and significance, and the stats to the reference's bit for bit, the decisions and the
// parallel path spread over 8 workers: few keys with many records a batch (a key's model rebuilt
// mid-batch: flushes, rounds), many keys past keys.max_keys (evictions with records queued and
// builds due: the serial path, and the parallel one until the keys fill), a short window
// (rebuilds every 10 records), and keys.rebuild_records (every 7 records, then every 3 from the
// middle of the stream on, as a live change: several rebuilds of a key a batch, rounds).
func checkKeyedParity(t *testing.T, newDev func(window int) KeyedModels) {
	defer func(g, p, b int) { decideGrain, parallelGrain, deviceBuildsMin = g, p, b }(decideGrain, parallelGrain, deviceBuildsMin)
	decideGrain, parallelGrain = 16, 16 // the decisions and the keys on several workers even for these batches
	deviceBuildsMin = 2                 // the device's batched builds for these batches' few due keys
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for _, c := range []struct {
		name                        string
		keys, among, batch, batches int
		window, minRecords, k, max  int
		calm                        int // among for two batches of three (0: among throughout)
		rebuild, later              int // keys.rebuild_records, and from the middle batch on (0: the default)
		tail                        KeysTail
		warm                        int // every warm-th record's column c warming (withWarming; 0: none)
	}{
		{"few keys, many records each", 6, 6, 700, 6, 200, 50, 10, 100000, 0, 0, 0, TailOwn, 0},
		{"evictions", 400, 400, 500, 40, 200, 50, 10, 150, 0, 0, 0, TailOwn, 0},
		{"evictions between batches of held keys", 400, 400, 500, 40, 200, 50, 10, 150, 100, 0, 0, TailOwn, 0},
		{"short window", 50, 50, 600, 8, 40, 20, 5, 100000, 0, 0, 0, TailOwn, 0},
		{"rebuild_records, changed live", 12, 12, 600, 8, 200, 50, 10, 100000, 0, 7, 3, TailOwn, 0},
		// keys.tail: fleet (keyed_fleet.go): every path decides a batch against the same fit
		{"fleet tail", 12, 12, 700, 24, 200, 50, 10, 100000, 0, 0, 0, TailFleet, 0},
		// a derived column still warming (warm26): each path scores it at the key's model's
		// centre, and pushes the derived value
		{"warming column", 12, 12, 700, 8, 200, 50, 10, 100000, 0, 0, 0, TailOwn, 3},
		{"warming column, evictions", 400, 400, 500, 40, 200, 50, 10, 150, 0, 0, 0, TailOwn, 10}, // (every 3rd: too few keys reach 50 records not warming, keyed_warmup.go)
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.KeyBy = KeyByKey
			cfg.Keys.Window, cfg.Keys.MinRecords, cfg.Keys.K, cfg.Keys.MaxKeys = c.window, c.minRecords, c.k, c.max
			cfg.Keys.RebuildRecords, cfg.Keys.Tail = c.rebuild, c.tail
			features := []string{"a", "b", "c"}
			cpu, cpuPar, dev, devPar, plain := newKeyedScorer(), newKeyedScorer(), newKeyedScorer(), newKeyedScorer(), newKeyedScorer()
			cpu.serial, dev.serial, plain.serial = true, true, true
			var plainScores []batch.Score
			plainByKey, warmDiffers := 0, 0
			dev.dev, devPar.dev = newDev(c.window), newDev(c.window)
			defer dev.close()
			defer devPar.close()
			paths := []struct {
				name string
				k    *keyedScorer
			}{{"CPU, parallel", cpuPar}, {"device, serial", dev}, {"device, parallel", devPar}}
			s := newKeyedStream(c.keys, 7)
			byKey, sigs, parallel := 0, 0, 0
			for n := range c.batches {
				if n == c.batches/2 && c.later > 0 { // (between batches, as Reconfigure applies it)
					cfg.Keys.RebuildRecords = c.later
				}
				among := c.among
				if c.calm > 0 && n%3 != 0 {
					among = c.calm // (held keys only, mostly: the parallel path between the evictions)
				}
				bs, raw := s.next(t, c.batch, among, 2+len(paths))
				if c.warm > 0 {
					for p := range bs[:1+len(paths)] {
						bs[p] = withWarming(t, bs[p], 2, c.warm)
					}
					// the last copy without warming, on a serial CPU path of its own: the
					// warming records' scores must differ somewhere (the case's point)
					last := bs[len(bs)-1]
					plain.score(&cfg, features, last, raw, last.Scores)
					for i := range last.Scores {
						if last.Scores[i].ByKey && math.Float64bits(last.Scores[i].Score) != math.Float64bits(0) {
							plainByKey++
						}
					}
					bs = bs[:len(bs)-1]
					defer last.Release()
					plainScores = append(plainScores, last.Scores...)
				} else {
					bs[len(bs)-1].Release()
					bs = bs[:len(bs)-1]
				}
				cpu.score(&cfg, features, bs[0], raw, bs[0].Scores)
				if c.warm > 0 {
					for i, a := range bs[0].Scores {
						b := plainScores[len(plainScores)-len(bs[0].Scores)+i]
						if a.ByKey && i%c.warm == 0 && a.Score != b.Score {
							warmDiffers++
						}
					}
				}
				for p, path := range paths {
					path.k.score(&cfg, features, bs[1+p], raw, bs[1+p].Scores)
					if path.k.pass.b == bs[1+p] {
						parallel++
					}
					for i := range bs[0].Scores {
						a, b := bs[0].Scores[i], bs[1+p].Scores[i]
						if !reflect.DeepEqual(a, b) || math.Float64bits(a.Score) != math.Float64bits(b.Score) {
							t.Fatalf("batch %d record %d: CPU %+v, %s %+v", n, i, a, path.name, b)
						}
					}
				}
				for i := range bs[0].Scores {
					if a := bs[0].Scores[i]; a.ByKey {
						byKey++
					}
					if a := bs[0].Scores[i]; a.Outlier || a.Suppressed {
						sigs++
					}
				}
				for _, b := range bs {
					b.Release()
				}
			}
			for _, path := range paths {
				st := path.k.stats()
				st.DeviceBytes = 0 // (the CPU holds none)
				if cpu.stats() != st || len(cpu.keys) != len(path.k.keys) {
					t.Fatalf("stats: CPU %+v, %s %+v", cpu.stats(), path.name, path.k.stats())
				}
				for key, a := range cpu.keys {
					b := path.k.keys[key]
					if b == nil || !reflect.DeepEqual(a.cols, b.cols) || !reflect.DeepEqual(a.sig, b.sig) || !reflect.DeepEqual(a.warming, b.warming) || a.since != b.since || !reflect.DeepEqual(a.cap, b.cap) {
						t.Fatalf("key %s: the windows, significance or caps differ (%s)", key, path.name)
					}
				}
				if !reflect.DeepEqual(recencyOrder(cpu), recencyOrder(path.k)) {
					t.Fatalf("%s: the keys' least-recently-seen order differs", path.name)
				}
			}
			if c.tail == TailFleet { // (the same fit on every path, and one there: the fleet's score took part)
				for _, path := range paths {
					a, b := &cpu.fleet, &path.k.fleet
					if a.lo != b.lo || a.hi != b.hi || a.ok != b.ok || !reflect.DeepEqual(a.shards, b.shards) {
						t.Fatalf("%s: the fleet's fit %v %g %g, the CPU's %v %g %g", path.name, b.ok, b.lo, b.hi, a.ok, a.lo, a.hi)
					}
				}
				if !cpu.fleet.ok {
					t.Fatal("no fleet tail fitted: the case misses its point")
				}
			}
			if c.later > 0 { // every warm key's clock within the last cadence: the option held on every path (a since equal on all of them)
				for key, st := range cpu.keys {
					if st.warm && int(st.since) >= c.later {
						t.Fatalf("key %s: %d records since its build, past keys.rebuild_records=%d", key, st.since, c.later)
					}
				}
			}
			if byKey < c.batch*c.batches/20 || sigs == 0 || c.max < c.keys && cpu.stats().Evictions == 0 || parallel == 0 && c.max >= c.keys {
				t.Fatalf("%d records scored by their key, %d significant, %d batches on the parallel path: the stream misses the point", byKey, sigs, parallel)
			}
			if c.warm > 0 && (plainByKey == 0 || warmDiffers == 0) {
				t.Fatalf("warming: %d records by key without it, %d warming records' scores changed by it: the case misses its point", plainByKey, warmDiffers)
			}
			t.Logf("%d records by key, %d significant, %d of %d batches on the parallel path, %d warming records' scores changed, stats %+v", byKey, sigs, parallel, 2*c.batches, warmDiffers, dev.stats())
		})
	}
}

// recencyOrder is k's keys, least recently seen first.
func recencyOrder(k *keyedScorer) []string {
	var out []string
	k.lru.each(func(st *keyState) { out = append(out, st.key) })
	return out
}

// TestKeyedDeviceMatchesCPU: the device path of the keyed scorer (queued records, deferred
// rebuilds, flushes, slots) on the kernels' CPU twin gives the CPU path's verdicts bit for bit,
// with tails past the kernel's reach scored on the host and keys' models rebuilt within a batch.
func TestKeyedDeviceMatchesCPU(t *testing.T) {
	var twins []*twinKeyed
	checkKeyedParity(t, func(window int) KeyedModels {
		tw := newTwinKeyed(window)
		twins = append(twins, tw)
		return tw
	})
	var built [2]int // the key builds' calibrations on the device: the serial path's, the parallel path's
	for i, tw := range twins {
		if tw.host == 0 {
			t.Fatalf("no tail went to the host: the far spikes miss the case")
		}
		built[i%2] += tw.builds.sets
	}
	if built[0] == 0 || built[1] == 0 {
		t.Fatalf("key builds with their calibration on the device: %d on the serial path, %d on the parallel one: the batched builds miss the case", built[0], built[1])
	}
	if few := twins[0]; few.scores < 2*6 {
		t.Fatalf("few keys: %d device calls for 6 batches: no flush within a batch", few.scores)
	}
}
