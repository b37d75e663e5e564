package detect

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestStopDeadlineBoundsTheStateSave: at Close, the wait for the snapshot writes in flight (a
// keys' state save begun every refresh_interval) and the stop's own save of the keys' state
// (about 1.3 GB at 100,000 keys: copied, encoded, written, synced) had no deadline: the
// supervisor's kill came first. Given the stop's deadline, Close must return soon after it,
// leaving the previous complete keys' state file as it was (the cut writes removed, none taken
// for a newer one), say what was not saved, and the next start must load that file. A Close
// whose save ends in time writes its file as before.
func TestStopDeadlineBoundsTheStateSave(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 keys' models")
	}
	cfg := keyedConfig()
	cfg.StateDir = t.TempDir()
	kb := newKeyedBench(t, cfg, 10_000, nil, 0)
	t0 := time.Now()
	kb.s.Close() // (the stop's save, without a deadline: the previous complete file)
	full := time.Since(t0)
	cfg = kb.s.cfg
	d := kb.s.ext.snaps
	saved, err := d.list(keysPrefix)
	if err != nil || len(saved) == 0 {
		t.Fatalf("keys' state files %v (%v), want some", saved, err)
	}
	start := func(logs *testsupport.LogBuffer) *Stage {
		t.Helper()
		s, err := NewStageContext(context.Background(), cfg, kb.s.features, false, Deps{Log: zerolog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		if st := s.KeyStats(); st.Live != 10_000 {
			t.Fatalf("the start loaded %d warm keys, want 10000", st.Live)
		}
		return s
	}

	var logs testsupport.LogBuffer
	kb.s = start(&logs)
	for range 3 {
		kb.process(t, kb.next(t, 1000))
	}
	kb.s.saveKeys(false) // a save in flight at the stop (refresh_interval's)
	ctx, cancel := context.WithTimeout(context.Background(), full/10)
	defer cancel()
	t0 = time.Now()
	kb.s.CloseContext(ctx)
	took := time.Since(t0)
	t.Logf("a whole save at Close %v; Close with a deadline of %v and a save in flight: %v", full.Round(time.Millisecond),
		(full / 10).Round(time.Millisecond), took.Round(time.Millisecond))
	if took > full/2 {
		t.Errorf("Close took %v with a deadline of %v (a whole save at Close: %v): it waited for the saves", took.Round(time.Millisecond),
			(full / 10).Round(time.Millisecond), full.Round(time.Millisecond))
	}
	if files, err := d.list(keysPrefix); err != nil || !slices.Equal(files, saved) {
		t.Errorf("keys' state files after the cut saves %v (%v), want those before %v", files, err, saved)
	}
	ents, err := os.ReadDir(cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a cut save left %s in state_dir", e.Name())
		}
	}
	if len(logs.Lines("keys' state not saved", "deadline")) == 0 {
		t.Errorf("the log does not say the keys' state was not saved:\n%s", logs.String())
	}

	var next testsupport.LogBuffer
	s := start(&next)
	if len(next.Lines("keys' state loaded", saved[0])) != 1 || strings.Contains(next.String(), "skipped") {
		t.Errorf("the next start did not load the previous file %s:\n%s", saved[0], next.String())
	}

	// A save that ends in time: written as before.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.CloseContext(ctx)
	files, err := d.list(keysPrefix)
	if err != nil || len(files) != min(len(saved)+1, cfg.Snapshots) || files[1] != saved[0] {
		t.Errorf("keys' state files after a save in time %v (%v), want a new one before %s", files, err, saved[0])
	}
	if strings.Contains(next.String(), "not saved") {
		t.Errorf("a save in time logged:\n%s", next.String())
	}
}

// TestCloseDeadlineBoundsTheKeysPass: Close waited for the keys' pass and builds of the batches
// in flight (abandonFlight, keysQuiet) whatever its deadline: a keys' pass held in a device call
// held the stop past run.shutdown_timeout until the supervisor's kill. Given the stop's deadline,
// Close must return soon after it with the pass still held, save no keys' or alarm state (the
// pass's batch is read again after a restart: the last complete save stands), say so, and once
// the pass ends, release its batch (the checked allocator: newGatedChained) and the keys' device
// models.
func TestCloseDeadlineBoundsTheKeysPass(t *testing.T) {
	dir := t.TempDir()
	var logs testsupport.LogBuffer
	g := newGatedChainedWith(t, func(c *Config) { c.StateDir = dir }, zerolog.New(&logs))
	s := g.s
	s.saveKeys(true) // the last complete save
	keys, err := s.ext.snaps.list(keysPrefix)
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys' state files %v (%v), want some", keys, err)
	}
	alarms, _ := s.ext.snaps.list(alarmsPrefix)
	gate := g.hold(t)
	// (The deadline is 100 ms; 5 s is room for a loaded machine, the pass being held until the
	// test lets it go.)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	closed := make(chan struct{})
	go func() {
		s.CloseContext(ctx)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		close(gate)
		<-closed
		t.Fatal("Close waited for the keys' pass held in its device call past its deadline")
	}
	if len(logs.Lines("keys' pass or builds", "still running at the stop's deadline", "not saved")) != 1 {
		t.Errorf("the log does not say that the keys' pass was left running and the state not saved:\n%s", logs.String())
	}
	close(gate)
	s.ext.leftover.Wait()
	if s.keyed.dev != nil {
		t.Error("the keys' device models were not released after the pass left running ended")
	}
	k, _ := s.ext.snaps.list(keysPrefix)
	a, _ := s.ext.snaps.list(alarmsPrefix)
	if !slices.Equal(k, keys) || !slices.Equal(a, alarms) {
		t.Errorf("state files after a cut Close: keys %v, alarms %v; want the last complete save's %v, %v", k, a, keys, alarms)
	}
}

// TestAbandonDeadlineBoundsTheKeysPass: at the hard stop the pipeline's detect goroutine
// abandons the batches in flight (Abandon), which waited for their keys' pass whatever the
// deadline: one held in a device call held Run, and the stop, until the supervisor's kill.
// AbandonContext under the stop's deadline must return soon after it, as must the Close after
// it (whose wait for the same pass it left is cut as well), saving no state, and say so once
// (the Close's cut wait said it again); once the pass ends, its batch and the keys' device models
// are released.
func TestAbandonDeadlineBoundsTheKeysPass(t *testing.T) {
	dir := t.TempDir()
	var logs testsupport.LogBuffer
	g := newGatedChainedWith(t, func(c *Config) { c.StateDir = dir }, zerolog.New(&logs))
	s := g.s
	s.saveKeys(true) // the last complete save
	keys, _ := s.ext.snaps.list(keysPrefix)
	gate := g.hold(t)
	// (Deadlines of 100 ms; 5 s is room for a loaded machine, the pass being held until the
	// test lets it go.)
	returned := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		s.AbandonContext(ctx)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel2()
		s.CloseContext(ctx2)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		close(gate)
		<-returned
		t.Fatal("Abandon and Close waited for the keys' pass held in its device call past their deadlines")
	}
	if n := len(logs.Lines("keys' pass or builds", "still running at the stop's deadline")); n != 1 {
		t.Errorf("the log says %d times that the keys' pass was left running, want once (one stop, one warning):\n%s", n, logs.String())
	}
	close(gate)
	s.ext.leftover.Wait()
	if s.keyed.dev != nil {
		t.Error("the keys' device models were not released after the pass left running ended")
	}
	if k, _ := s.ext.snaps.list(keysPrefix); !slices.Equal(k, keys) {
		t.Errorf("keys' state files after a cut stop %v, want the last complete save's %v", k, keys)
	}
}

// TestCloseAfterACutAbandonLeavesTheFlightToIt: an Abandon cut by the stop's deadline leaves the
// batches in flight to a goroutine of its own (quietWithin), which drops them (s.flight) when
// their keys' pass ends; the Close after it must leave s.flight to that goroutine, as it leaves
// the rest (it read len(s.flight) for its log line while the goroutine set it: a data race, which
// go test -race reports here, the pass ending as the Close begins). The Close, given time, then
// waits for that goroutine and releases the batch and the keys' device models.
func TestCloseAfterACutAbandonLeavesTheFlightToIt(t *testing.T) {
	g := newGatedChainedWith(t, func(c *Config) { c.StateDir = t.TempDir() }, zerolog.New(&testsupport.LogBuffer{}))
	s := g.s
	gate := g.hold(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s.AbandonContext(ctx) // (the pass is held: cut at the deadline)
	if s.ext.quieting == nil {
		close(gate)
		t.Fatal("Abandon did not leave the held keys' pass to a goroutine of its own")
	}
	close(gate) // the pass ends, and the goroutine drops the batch in flight, as the Close begins
	s.CloseContext(context.Background())
	s.ext.leftover.Wait()
	if s.keyed.dev != nil {
		t.Error("the keys' device models were not released by the Close after the cut Abandon")
	}
}
