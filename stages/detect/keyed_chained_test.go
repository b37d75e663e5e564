package detect

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
	"github.com/rs/zerolog"
)

// gatedKeyed is the keyed kernels' CPU twin whose Score waits, once gate is set, until gate
// closes: a keys' pass held in its device call.
type gatedKeyed struct {
	*twinKeyed
	gate chan struct{}
}

func (g *gatedKeyed) Score(slots, rows [][]int32, x [][]float32, tail, dist [][]float64) error {
	if g.gate != nil {
		<-g.gate
	}
	return g.twinKeyed.Score(slots, rows, x, tail, dist)
}

type gatedKeyedAccel struct {
	fakeAccel
	keyed *gatedKeyed
}

func (a *gatedKeyedAccel) KeyedModels(dims, window int) (KeyedModels, error) {
	a.keyed = &gatedKeyed{twinKeyed: newTwinKeyed(window)}
	return a.keyed, nil
}

// TestKeyStatsWaitsForNoChainedPass: the pipeline reads KeyStats after every Process call (its
// metrics); with batches overlapped and the keys' models on a device, a batch's keys' pass then
// runs chained (startChained) and KeyStats must not wait for it, or the stage's goroutine waits
// for every batch's keys' pass between batches, as when the pass ran inside finish. It reads the
// figures as the batches finished so far left them: those before the pass.
func TestKeyStatsWaitsForNoChainedPass(t *testing.T) {
	g := newGatedChained(t)
	s := g.s
	before := s.KeyStats()
	if before.Live == 0 {
		t.Fatal("no key warm: the next batch's keys' pass makes no device call to hold")
	}
	gate := g.hold(t)
	got := make(chan KeyStats, 1)
	go func() { got <- s.KeyStats() }()
	select {
	case st := <-got:
		close(gate)
		if st != before {
			t.Errorf("KeyStats while the keys' pass runs: %+v, want the figures before it %+v", st, before)
		}
	case <-time.After(5 * time.Second):
		close(gate)
		<-got
		t.Fatal("KeyStats waited for the chained keys' pass")
	}
	g.drain(t)
}

// TestLandingWaitsForTheChainedPass: the pipeline waits for Landing or the next batch, whichever
// comes first, then calls LandScored, which must wait for nothing (docs/DESIGN.md: the intake
// never waits while a batch may arrive). With the batch's keys' pass chained, finish waits for
// it: so Landing closes once both the batch's global scoring and its keys' pass ended, and
// LandScored lands no batch whose keys' pass still runs.
func TestLandingWaitsForTheChainedPass(t *testing.T) {
	g := newGatedChained(t)
	s := g.s
	gate := g.hold(t)
	<-s.flight[0].done // the global scoring ended; the keys' pass waits at the gate
	select {
	case <-s.Landing():
		close(gate)
		t.Fatal("Landing closed while the batch's keys' pass runs")
	case <-time.After(50 * time.Millisecond):
	}
	landed := make(chan []*batch.Batch, 1)
	go func() {
		bs, err := s.LandScored()
		if err != nil {
			t.Error(err)
		}
		landed <- bs
	}()
	select {
	case bs := <-landed:
		if len(bs) != 0 {
			t.Errorf("LandScored landed %d batches, their keys' pass still running", len(bs))
		}
		releaseBatches(bs)
	case <-time.After(5 * time.Second):
		close(gate)
		releaseBatches(<-landed)
		t.Fatal("LandScored waited for the chained keys' pass")
	}
	close(gate)
	select {
	case <-s.Landing():
	case <-time.After(5 * time.Second):
		t.Fatal("Landing not closed once the keys' pass ended")
	}
	bs, err := s.LandScored()
	releaseBatches(bs)
	if err != nil || len(bs) != 1 {
		t.Fatalf("LandScored after the keys' pass: %d batches, %v; want 1", len(bs), err)
	}
}

// gatedChained is an overlapped keyed stage (one batch in flight) on the gated twin, its keys
// warm from 12 batches of 250 of a 20-sensor fleet, nothing in flight (newGatedChained).
type gatedChained struct {
	s     *Stage
	accel *gatedKeyedAccel
	mem   memory.Allocator
	rows  []fleetRow
}

func newGatedChained(t *testing.T) *gatedChained {
	return newGatedChainedWith(t, func(*Config) {}, zerolog.Nop())
}

// newGatedChainedWith is newGatedChained with the configuration set changes and the stage's log log.
func newGatedChainedWith(t *testing.T, set func(*Config), log zerolog.Logger) *gatedChained {
	cfg := keyedConfig()
	cfg.RefreshRecords, cfg.RecalibrateRecords, cfg.RefreshInterval = 1<<30, 1<<30, time.Hour
	set(&cfg)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	g := &gatedChained{accel: &gatedKeyedAccel{fakeAccel: fakeAccel{exact: true}}, mem: mem, rows: fleet(20, 3250, 0.01, 7)}
	var err error
	if g.s, err = NewStage(cfg, []string{"value"}, false, Deps{Log: log, Accelerator: g.accel, Overlap: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.s.Close) // (before the allocator's check: cleanups run last first)
	for lo := 0; lo < 3000; lo += 250 {
		g.process(t, lo)
	}
	g.drain(t)
	return g
}

// process runs the fleet's rows lo..lo+249 through the stage and releases what it returns.
func (g *gatedChained) process(t *testing.T, lo int) {
	var tr []testbatch.Row
	for i := lo; i < lo+250; i++ {
		tr = append(tr, testbatch.Row{Offset: int64(i), Key: []byte(g.rows[i].key), Features: []float32{g.rows[i].value}})
	}
	bs, err := g.s.Process(context.Background(), testbatch.New(t, g.mem, "fleet", []string{"value"}, false, false, tr))
	if err != nil {
		t.Fatal(err)
	}
	releaseBatches(bs)
}

// drain finishes the batches in flight and releases them.
func (g *gatedChained) drain(t *testing.T) {
	bs, err := g.s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	releaseBatches(bs)
}

// hold sets the gate and starts one more batch, whose keys' pass (chained) then waits in its
// device call until the returned gate closes.
func (g *gatedChained) hold(t *testing.T) chan struct{} {
	gate := make(chan struct{})
	g.accel.keyed.gate = gate // (no pass runs: drained)
	g.process(t, 3000)
	if s := g.s; len(s.flight) != 1 || !s.flight[0].chained || s.flight[0].keyedDone == nil {
		close(gate)
		t.Fatal("the batch's keys' pass did not start chained")
	}
	return gate
}

// releaseBatches releases batches a stage returned.
func releaseBatches(bs []*batch.Batch) {
	for _, b := range bs {
		b.Release()
	}
}
