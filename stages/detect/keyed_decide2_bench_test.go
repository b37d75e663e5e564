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

// BenchmarkKeyedDecide: a parallel worker's decisions (keyedWorker.decide: the prefetches, the
// three calibrations' searches, the key's cap, the explanations of flagged records, the
// significance written into the key's window) over 16,384 records of random keys whose raw
// scores are computed beforehand, on one core. Keys' windows and models at the defaults
// (keyWindow, buildKeyModel): 64 keys (in the cache) and 200,000 (about 2.4 GB: every record's
// key's state and calibrations are cache misses, as at a million keys on the device host);
// ns/op is per record (docs/BENCHMARKS.md §13.1.9).
func BenchmarkKeyedDecide(b *testing.B) {
	for _, keys := range []int{64, 200000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			cfg, q, raw, tail, dist := keyedDecideRecords(b, keys)
			out := make([]batch.Score, len(q))
			kw := &keyedWorker{}
			b.ResetTimer()
			for i := 0; i < b.N; i += len(q) {
				n := min(len(q), b.N-i)
				kw.q = append(kw.q[:0], q[:n]...)
				kw.tail, kw.dist = tail[:n], dist[:n]
				kw.decide(cfg, []string{"a", "b", "c"}, out, raw)
			}
			b.StopTimer()
			if out[0].Score == 0 || !out[0].ByKey {
				b.Fatal("no decision")
			}
		})
	}
}

// keyedDecideRecordsCache keeps BenchmarkKeyedDecide's keys between its runs (-count).
var keyedDecideRecordsCache = map[int]func() (*Config, []queued, [][]float32, []float64, []float64){}

// keyedDecideRecords builds keys states and models at the defaults and 16,384 records of random
// keys (queued at a random place of their key's window) with their values and raw scores.
func keyedDecideRecords(b *testing.B, keys int) (*Config, []queued, [][]float32, []float64, []float64) {
	if f := keyedDecideRecordsCache[keys]; f != nil {
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
	keyedDecideRecordsCache[keys] = f
	return f()
}
