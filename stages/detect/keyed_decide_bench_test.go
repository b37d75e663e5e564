package detect

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
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
			q, dens, dist := keyRecords(b, keys)
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
			q, dens, _ := keyRecords(b, keys)
			raw := make([][]float32, 3)
			r := rand.New(rand.NewPCG(6, 6))
			for j := range raw {
				raw[j] = make([]float32, len(q))
				for t := range q {
					raw[j][t] = float32(r.NormFloat64())
				}
			}
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

// keyRecords builds keys models at the defaults (keyWindow) and 16,384 records of random keys
// with their raw scores.
func keyRecords(b *testing.B, keys int) (q []queued, dens, dist []float64) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	const records = 16384
	models := make([]*Ranker, keys)
	var wg sync.WaitGroup
	for g := range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 4))
			for i := g; i < keys; i += runtime.GOMAXPROCS(0) {
				m, err := buildKeyModel(keyWindow(&cfg, i, r, 37), &cfg)
				if err != nil {
					panic(err)
				}
				models[i] = m
			}
		}()
	}
	wg.Wait()
	r := rand.New(rand.NewPCG(4, 4))
	q = make([]queued, records)
	dens, dist = make([]float64, records), make([]float64, records)
	one, res := make([][]float32, 3), make([]float64, 1)
	for t := range q {
		k := r.IntN(keys)
		m := models[k]
		q[t] = queued{i: t, model: m}
		one[0] = []float32{float32(k) + float32(r.NormFloat64())}
		one[1], one[2] = []float32{float32(r.NormFloat64())}, []float32{float32(r.NormFloat64())}
		m.Tail.Score(one, res)
		dens[t] = res[0]
		solvingset.KNNWeights(m.Ref.Points, m.distanceSpace(one, nil), m.Ref.K, 1, res)
		dist[t] = res[0]
	}
	return q, dens, dist
}
