package proclus

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outlierd/outlierd/internal/algo/quality"
)

// TestRestartsRecoverPlanted is issue 24's check: planted subspace clusters (the shape:
// 20 features, 5 clusters of about 2,000 rows, each Gaussian with sd 1.5 on [0, 100] in its own 4
// features and uniform elsewhere, about 100 uniform outliers; and the harder 20,000 x 15 set of
// sd 2 with 2% outliers). A single run (restart 0) ends in a local optimum on some seeds (ARI
// 0.56-0.88: two medoids in one planted cluster); the default restarts recover the planted
// partition, outliers included, with ARI >= 0.95 for every seed tried. 0.95 is the issue's
// target; the recovered runs score 0.96-0.99 (the rest are uniform outliers that fall inside a
// cluster's subspace box and cannot be told apart).
func TestRestartsRecoverPlanted(t *testing.T) {
	sets := []struct {
		name  string
		pl    func() (*Planted, error)
		seeds uint64
	}{
		{"issue 24 shape, generator seed 1", func() (*Planted, error) { return GeneratePlanted(10100, 20, 5, 4, 1.5, 100.0/10100, 1) }, 20},
		{"issue 24 shape, generator seed 3", func() (*Planted, error) { return GeneratePlanted(10100, 20, 5, 4, 1.5, 100.0/10100, 3) }, 20},
		{"20000 x 15, sd 2", func() (*Planted, error) { return GeneratePlanted(20000, 15, 5, 4, 2, 0.02, 3) }, 10},
	}
	for i, s := range sets {
		if testing.Short() && i > 0 {
			continue
		}
		pl, err := s.pl()
		if err != nil {
			t.Fatal(err)
		}
		singleFails := 0
		for seed := uint64(1); seed <= s.seeds; seed++ {
			p := Default()
			p.K, p.L, p.Seed, p.Restarts = 5, 4, seed, 1
			one, err := Run(pl.Cols, p)
			if err != nil {
				t.Fatal(err)
			}
			if quality.AdjustedRandIndex(one.Assignment, pl.Label) < 0.95 {
				singleFails++
			}
			p.Restarts = DefaultRestarts
			res, err := Run(pl.Cols, p)
			if err != nil {
				t.Fatal(err)
			}
			if ari := quality.AdjustedRandIndex(res.Assignment, pl.Label); ari < 0.95 {
				t.Errorf("%s, seed %d: ARI %.4f < 0.95 with %d restarts (kept restart %d, costs %v)", s.name, seed, ari, p.Restarts, res.Restart, res.RestartCosts)
			}
			// Restart 0 is the single run of the seed.
			if res.RestartCosts[0] != one.FullCost {
				t.Errorf("%s, seed %d: restart 0 cost %v, the single run's %v", s.name, seed, res.RestartCosts[0], one.FullCost)
			}
		}
		t.Logf("%s: a single run misses the planted partition on %d of %d seeds", s.name, singleFails, s.seeds)
		if singleFails == 0 {
			t.Errorf("%s: every single run recovered the planted clusters: the set does not test the restarts", s.name)
		}
	}
}

// TestRestartsChoice: Run keeps the first restart of lowest FullCost, each restart being RunOnce
// from RestartSeed(seed, r), and the result does not depend on how many engines run the restarts
// at once (each restart depends only on its seed).
func TestRestartsChoice(t *testing.T) {
	pl, dt := preparedPlanted(t, 6000, 10, 4, 3, 21)
	p := Default()
	p.K, p.L, p.Seed, p.Restarts = 4, 3, 7, 6
	var want *Result
	costs := make([]float64, p.Restarts)
	for r := range p.Restarts {
		q := p
		q.Seed = RestartSeed(p.Seed, r)
		one, err := dt.RunOnce(q, NewCPUEngine(pl.Cols, 2))
		if err != nil {
			t.Fatal(err)
		}
		costs[r], one.Restart = one.FullCost, r
		if want == nil || one.FullCost < want.FullCost {
			want = one
		}
	}
	want.RestartCosts = costs
	if len(slices.Compact(slices.Sorted(slices.Values(costs)))) < 2 {
		t.Fatalf("costs %v: all restarts alike, the choice is not tested", costs)
	}
	for _, engines := range [][]Engine{
		{NewCPUEngine(pl.Cols, 2)},
		{NewCPUEngine(pl.Cols, 1), NewCPUEngine(pl.Cols, 1), NewCPUEngine(pl.Cols, 3)},
	} {
		got, err := dt.Run(p, engines...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d engines: kept restart %d (seed %d) costs %v; want restart %d (seed %d) costs %v",
				len(engines), got.Restart, got.Seed, got.RestartCosts, want.Restart, want.Seed, want.RestartCosts)
		}
	}
	if RestartSeed(7, 0) != 7 || RestartSeed(7, 1) == RestartSeed(8, 1) || RestartSeed(7, 1) == RestartSeed(7, 2) {
		t.Error("RestartSeed: restart 0 must be the seed, others distinct")
	}
}

// failingEngine is a CPU engine whose Begin (one a restart) fails from its failAt-th call on,
// counting the calls of every engine sharing begun.
type failingEngine struct {
	Engine
	begun  *atomic.Int32
	failAt int32
}

var errInjected = errors.New("injected engine failure")

func (e failingEngine) Begin(scales []float64, slots int) error {
	if e.begun.Add(1) >= e.failAt {
		return errInjected
	}
	return e.Engine.Begin(scales, slots)
}

// TestRestartsStopAtFailure: a restart whose engine fails fails Run with an error naming the
// restart and its seed, and no restart begins after the failure is known (one engine: restarts
// run in order, so the third's failure leaves the other three unrun).
func TestRestartsStopAtFailure(t *testing.T) {
	pl, dt := preparedPlanted(t, 3000, 8, 3, 3, 5)
	p := Default()
	p.K, p.L, p.Seed, p.Restarts = 3, 3, 11, 6
	var begun atomic.Int32
	_, err := dt.Run(p, failingEngine{NewCPUEngine(pl.Cols, 1), &begun, 3})
	want := fmt.Sprintf("restart 2 (seed %d)", RestartSeed(p.Seed, 2))
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v: want the injected failure naming %q", err, want)
	}
	if n := begun.Load(); n != 3 {
		t.Errorf("%d restarts began, want 3 (none after the failing one)", n)
	}
	// Two engines: every restart that began before the failure may finish, but Run still fails.
	begun.Store(0)
	if _, err = dt.Run(p, failingEngine{NewCPUEngine(pl.Cols, 1), &begun, 3}, failingEngine{NewCPUEngine(pl.Cols, 1), &begun, 3}); !errors.Is(err, errInjected) {
		t.Fatalf("two engines: error %v, want the injected failure", err)
	}
	if n := begun.Load(); n >= int32(p.Restarts) {
		t.Errorf("two engines: %d of %d restarts began: the failure did not stop the others", n, p.Restarts)
	}
}

// preparedPlanted is GeneratePlanted's set of rows x dims (k clusters in l dimensions each, sd 2,
// 2% outliers, from seed) and its Data.
func preparedPlanted(tb testing.TB, rows, dims, k, l int, seed uint64) (*Planted, *Data) {
	tb.Helper()
	pl, err := GeneratePlanted(rows, dims, k, l, 2, 0.02, seed)
	if err != nil {
		tb.Fatal(err)
	}
	dt, err := Prepare(pl.Cols)
	if err != nil {
		tb.Fatal(err)
	}
	return pl, dt
}
