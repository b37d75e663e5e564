package detect

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// BenchmarkKeyCalibrate: a record's three calibrations under its key's model (Ranker.combine:
// the density and distance scores' Surprisal, then the combined one's), the decisions' share of
// a keyed record's host work on the device path (the device computes the raw scores). Models at
// the defaults (keyWindow) of 64 keys (their calibrations in the cache) and of 20,000 (not: each
// record's key is cold, as at a million keys), 16,384 records of random keys, their raw scores
// computed beforehand; ns/op is per record.
func BenchmarkKeyCalibrate(b *testing.B) {
	for _, keys := range []int{64, 20000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			_, q, _, dens, dist := keyRecords(b, keys)
			out := make([]float64, len(q))
			b.ResetTimer()
			for i := 0; i < b.N; i += len(q) {
				n := min(len(q), b.N-i)
				for t := range n {
					out[t] = q[t].model.combine(dens[t], dist[t])
				}
			}
			b.StopTimer()
			if out[0] == 0 {
				b.Fatal("no score")
			}
		})
	}
}

// BenchmarkKeyRawScores: a record's raw scores under its key's model on the CPU, as
// cpuRawScores computes them (the tail score, the record in the distance space, its k-NN weight
// to the key's sample R), on the records and models of BenchmarkKeyCalibrate; ns/op is per
// record.
func BenchmarkKeyRawScores(b *testing.B) {
	for _, keys := range []int{64, 20000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			_, q, raw, dens, _ := keyRecords(b, keys)
			tail, dist := make([]float64, len(q)), make([]float64, len(q))
			b.ResetTimer()
			for i := 0; i < b.N; i += len(q) {
				n := min(len(q), b.N-i)
				cpuRawScores(q[:n], raw, tail, dist)
			}
			b.StopTimer()
			if tail[0] == 0 || dens[0] == 0 {
				b.Fatal("no score")
			}
		})
	}
}

// BenchmarkKeyedDecide: a parallel worker's decisions (keyedWorker.decide: the prefetches, the
// three calibrations' searches, the key's cap, the explanations of flagged records, the
// significance written into the key's window) over 16,384 records of random keys whose raw
// scores are computed beforehand, on one core. Keys' windows and models at the defaults
// (keyWindow, buildKeyModel): 64 keys (in the cache) and 200,000 (about 2.4 GB: every record's
// key's state and calibrations are cache misses, as at a million keys on the device host);
// ns/op is per record (docs/BENCHMARKS.md §13.1.9).
//
// keys=N,tail=fleet: the same under detect.keys.tail: fleet (keyed_fleet.go: each record's largest
// deviation, the fleet's score, its pooling; the pass's pool folded and the shards refitted as
// they come due, fleetTail.begin, once per 16,384 records).
func BenchmarkKeyedDecide(b *testing.B) {
	for _, c := range []struct {
		keys int
		tail KeysTail
	}{{64, TailOwn}, {200000, TailOwn}, {64, TailFleet}, {200000, TailFleet}} {
		keys, name := c.keys, fmt.Sprintf("keys=%d", c.keys)
		if c.tail != TailOwn {
			name += ",tail=" + string(c.tail)
		}
		b.Run(name, func(b *testing.B) {
			cfg, q, raw, tail, dist := keyRecords(b, keys)
			var f *fleetTail
			if c.tail == TailFleet {
				f = &fleetTail{ok: true, lo: 2.6, hi: 3.3} // (a fit as the fleets' of §13.4.2; refitted as the pool comes due)
			}
			out := make([]batch.Score, len(q))
			kw := &keyedWorker{}
			h := &handover{on: true} // (a stage's: every key past its first record, whose flag its cap decides)
			for _, x := range q {
				if x.st.cap.filled == 0 {
					x.st.cap.admitOver(false, false, true, 1)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += len(q) {
				n := min(len(q), b.N-i)
				kw.q = append(kw.q[:0], q[:n]...)
				kw.tail, kw.dist = tail[:n], dist[:n]
				if f != nil {
					f.begin(len(q))
				}
				kw.decide(cfg, []string{"a", "b", "c"}, out, raw, h, f)
			}
			b.StopTimer()
			if out[0].Score == 0 || !out[0].ByKey || len(h.rows) > 0 {
				b.Fatal("no decision, or one left to capAlarms")
			}
			if f != nil && (!f.ok || f.lo == 2.6) && b.N > 2*len(q) {
				b.Fatalf("the fleet's pool never refitted (fit %v at %g): the benchmark misses its cost", f.ok, f.lo)
			}
		})
	}
}

// keyRecordsCache keeps the benchmarks' keys between their runs (-count) and benchmarks.
var keyRecordsCache = map[int]func() (*Config, []queued, [][]float32, []float64, []float64){}

// keyRecords builds keys states and models at the defaults (keyWindow, buildKeyModel) and 16,384
// records of random keys (queued at a random place of their key's window) with their values
// (raw, a column a feature) and raw scores (the tail score, the k-NN weight).
func keyRecords(b *testing.B, keys int) (*Config, []queued, [][]float32, []float64, []float64) {
	if f := keyRecordsCache[keys]; f != nil {
		return f()
	}
	cfg := Default()
	cfg.KeyBy = KeyByKey
	const records = 16384
	sts := make([]*keyState, keys)
	var wg sync.WaitGroup
	for g := range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 4))
			for i := g; i < keys; i += runtime.GOMAXPROCS(0) {
				st := keyWindow(&cfg, i, r, 37)
				m, err := buildKeyModel(st, &cfg)
				if err != nil {
					panic(err)
				}
				st.model, st.cap = m, newAlarmCap(cfg.Keys.Window)
				sts[i] = st
			}
		}()
	}
	wg.Wait()
	r := rand.New(rand.NewPCG(4, 4))
	q := make([]queued, records)
	raw := make([][]float32, 3)
	for j := range raw {
		raw[j] = make([]float32, records)
	}
	tail, dist := make([]float64, records), make([]float64, records)
	one, res := make([][]float32, 3), make([]float64, 1)
	for t := range q {
		k := r.IntN(keys)
		st := sts[k]
		q[t] = queued{i: t, st: st, ring: r.IntN(st.sig.len()), model: st.model}
		raw[0][t] = float32(k) + float32(r.NormFloat64())
		raw[1][t], raw[2][t] = float32(r.NormFloat64()), float32(r.NormFloat64())
		for j := range one {
			one[j] = raw[j][t : t+1]
		}
		st.model.Tail.Score(one, res)
		tail[t] = res[0]
		solvingset.KNNWeights(st.model.Ref.Points, st.model.distanceSpace(one, nil), st.model.Ref.K, 1, res)
		dist[t] = res[0]
	}
	f := func() (*Config, []queued, [][]float32, []float64, []float64) { return &cfg, q, raw, tail, dist }
	keyRecordsCache[keys] = f
	return f()
}
