package proclus

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/outlierd/outlierd/internal/core/fanout"
)

// DefaultRestarts is Params.Restarts' default. A single run misses planted subspace clusters on
// 25-40% of seeds with 5 clusters and 70% with 8; the smallest number of restarts from which
// every seed 1..20 recovered them (adjusted Rand index >= 0.95) was 2-5 on sets of issue 24's
// shape, 4 on a harder 20,000-row set and 11 with 8 clusters (docs/BENCHMARKS.md §6.1). 20 keeps
// a margin on all of them: all 20 runs miss with probability 0.71^20 = 0.1% at 8 clusters.
const DefaultRestarts = 20

// MaxRestarts bounds Params.Restarts (a guard against a typo's hours of runs).
const MaxRestarts = 1000

// RestartSeed is the seed of restart r of a run with seed: seed itself for r = 0 (so one restart
// is the single run of that seed), else the r-th output of SplitMix64 started at seed (Steele et
// al. 2014: mix64(seed + r*0x9e3779b97f4a7c15), a bijective mixer, so nearby seeds and restarts do
// not give related PCG streams).
func RestartSeed(seed uint64, r int) uint64 {
	if r == 0 {
		return seed
	}
	z := seed + uint64(r)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Run runs PROCLUS's p.Restarts restarts (restart r from seed RestartSeed(p.Seed, r)) on
// engines over the same columns and returns the result of lowest FullCost, ties to the lowest
// restart, with every restart's FullCost (Result.RestartCosts). Each engine runs one restart at a
// time; with several engines (a GPU's run states sharing one uploaded data set) the restarts run
// concurrently, one goroutine per engine, and the result is the same whatever their number and
// timing (each restart depends only on its seed).
func (dt *Data) Run(p Params, engines ...Engine) (*Result, error) {
	if err := p.Validate(dt.rows, len(dt.cols)); err != nil {
		return nil, fmt.Errorf("proclus: %w", err)
	}
	if len(engines) == 0 {
		return nil, fmt.Errorf("proclus: no engine")
	}
	R := p.Restarts
	costs := make([]float64, R)
	errs := make([]error, R)
	var failed atomic.Bool
	bests := make([]*Result, len(engines))
	fanout.EachWorker(len(engines), R, func(w, r int) {
		if failed.Load() {
			return // (a restart has failed: the run's error is known, the rest would be wasted)
		}
		q := p
		q.Seed = RestartSeed(p.Seed, r)
		res, err := dt.RunOnce(q, engines[w])
		if err != nil {
			errs[r] = fmt.Errorf("restart %d (seed %d): %w", r, q.Seed, err)
			failed.Store(true)
			return
		}
		res.Restart, costs[r] = r, res.FullCost
		if b := bests[w]; b == nil || res.FullCost < b.FullCost || (res.FullCost == b.FullCost && r < b.Restart) {
			bests[w] = res
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var best *Result
	for _, b := range bests {
		if b != nil && (best == nil || b.FullCost < best.FullCost || (b.FullCost == best.FullCost && b.Restart < best.Restart)) {
			best = b
		}
	}
	best.RestartCosts = costs
	return best, nil
}
