package detect

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/fanout"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
)

// coldPool is BenchmarkKeyBuildsCold's keys: coldKeys states with full windows (keyWindow's),
// each with its model, and each one's k-NN calibration weights (R against itself) computed
// once, for the host-part row. Made once a process (seconds of setup).
type coldPool struct {
	sts  []*keyState
	self [][]float64
}

var coldKeys = sync.OnceValue(func() *coldPool {
	n := 100_000
	if s := os.Getenv("OUTLIERD_BENCH_COLD_KEYS"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	cfg := Default()
	cfg.KeyBy = KeyByKey
	p := &coldPool{sts: make([]*keyState, n), self: make([][]float64, n)}
	fanout.OnCores(n, func(i int) {
		st := keyWindow(&cfg, i, rand.New(rand.NewPCG(7, uint64(i))), 37)
		m, err := buildKeyModel(st, &cfg)
		if err != nil {
			panic(err)
		}
		st.model = m
		w := make([]float64, len(m.Ref.Points[0]))
		solvingset.KNNWeightsSelf(m.Ref.Points, m.Ref.K, w)
		p.sts[i], p.self[i] = st, w
	})
	return p
})

// poolSelf is knownSelf for the pool's keys: the calibration weights of the keys due this op
// (keys[s] is sets[s]'s key: every due key's build takes the batched path here).
type poolSelf struct {
	p    *coldPool
	keys []int
}

func (k *poolSelf) SelfWeightsCovered(dims, kk int) bool { return true }

func (k *poolSelf) SelfWeights(sets [][][]float32, ks []int, out [][]float64) error {
	for s := range sets {
		copy(out[s], k.p.self[k.keys[s]])
	}
	return nil
}

// BenchmarkKeyBuildsCold is BenchmarkKeyBuilds ("cores" and "host-part") with each op's 400 due
// keys drawn at random from a pool of 100,000 keys (OUTLIERD_BENCH_COLD_KEYS) with their models:
// about 1.4 GB of windows and models, far past the caches, so each build reads its key's state
// and window cold and writes its new model into memory the allocator hands back cold, as at a
// million keys; each new model replaces its key's (the old one garbage, as finishBuilds leaves
// it). BenchmarkKeyBuilds's 400 keys stay in the caches; the difference is the builds' memory
// traffic (docs/BENCHMARKS.md §13.1.16). Reports µs a key (wall) and the host's CPU µs a key.
func BenchmarkKeyBuildsCold(b *testing.B) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	p := coldKeys()
	const keys = 400
	for _, where := range []string{"cores", "host-part"} {
		b.Run(where, func(b *testing.B) {
			r := rand.New(rand.NewPCG(5, 6))
			due, out := make([]*keyState, keys), make([]*Ranker, keys)
			sw := &poolSelf{p: p, keys: make([]int, keys)}
			build := func() {
				for t := range due {
					sw.keys[t] = r.IntN(len(p.sts))
					due[t] = p.sts[sw.keys[t]]
				}
				switch where {
				case "cores":
					buildKeys(due, out, &cfg)
				default:
					buildKeysBatched(due, out, &cfg, sw)
				}
				for t, st := range due {
					st.model = out[t] // (nil: checked below)
				}
			}
			build()
			for t, m := range out {
				if m == nil {
					b.Fatalf("key %d: no model", t)
				}
			}
			stop := cputime.Profile(b, fmt.Sprintf("keybuilds-cold-%s-%d", where, b.N)) // (OUTLIERD_BENCH_CPUPROFILE: the timed builds alone, not the pool's)
			cpu0, f0 := cputime.Seconds(), minorFaults()
			b.ResetTimer()
			for range b.N {
				build()
			}
			b.StopTimer()
			stop()
			for t, m := range out {
				if m == nil {
					b.Fatalf("key %d: no model", t)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*keys), "µs/key")
			b.ReportMetric((cputime.Seconds()-cpu0)*1e6/float64(b.N*keys), "cpu-µs/key")
			b.ReportMetric(float64(minorFaults()-f0)/float64(b.N*keys), "faults/key")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// minorFaults is the process's minor page faults so far (processUsage).
func minorFaults() int64 { return processUsage().faults }
