package pipeline

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// TestStaleScanBounded (security: a writer to the model topic grew a builder's memory without
// limit): a builder under detect.keys.max_keys 7 finds 30 keys' models of another configuration
// on the model topic (beside 10 of its own). It never holds more than 7 stale keys, nor writes
// more than 7 to its scan's record; past the bound it tombstones those it holds, then reads the
// partitions again from the first key it could not hold (a pass, counted), until every stale key
// has its tombstone: a scan from the start then finds none, and a restart reading on from the
// record finds what a scan from the start finds. Before, the scan held all 30 (and wrote them
// to the record).
func TestStaleScanBounded(t *testing.T) {
	const bound, stale = 7, 30
	f := newScanFixture(t)
	dir := t.TempDir()
	f.write(t, keysOf("old", stale, "old"))
	f.write(t, keysOf("new", 10, "new"))
	p, passes := boundedPublisher(t, f, bound)
	p.stale.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p.assigned(nil, true)
	p.modelServing()
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		p.scanStale(ctx, kafka.DefaultDialer, f.m)
	}()
	most, recorded := 0, 0
	for {
		p.stale.mu.Lock()
		done := p.stale.scanned && len(p.stale.over) == 0 && len(p.stale.found) == 0
		if p.stale.scanned {
			most = max(most, len(p.stale.found))
		}
		p.stale.mu.Unlock()
		if b, err := os.ReadFile(filepath.Join(dir, scanStateName)); err == nil && len(b) > 0 {
			if rec := p.loadScanRecord(f.m); rec != nil {
				n := 0
				for _, keys := range rec.found {
					n += len(keys)
				}
				recorded = max(recorded, n)
			}
		}
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the stale keys not all tombstoned within a minute: %d held, %d partitions still to read again", len(p.stale.found), len(p.stale.over))
		}
		p.tombstoneStale(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	<-scanned
	if most > bound || recorded > bound {
		t.Errorf("at most %d stale keys held and %d in the scan's record, want at most %d (detect.keys.max_keys)", most, recorded, bound)
	}
	if want := (stale+bound-1)/bound - 1; *passes < want {
		t.Errorf("%d passes past the bound, want at least %d", *passes, want)
	}
	if left, _ := f.scan(t, f.cfg, ""); len(left) != 0 {
		t.Errorf("a scan from the start finds %d stale keys after the passes, want none (every one tombstoned)", len(left))
	}
	p.saveAdvance(ctx, true)
	got, _ := f.scan(t, f.cfg, dir)
	full, _ := f.scan(t, f.cfg, "")
	if !maps.Equal(got, full) {
		t.Errorf("a restart reading on from the record found %d stale keys, a scan from the start %d", len(got), len(full))
	}
}

// TestStaleScanBoundedWaitsForAssignment: a builder assigned input partition 1 alone holds, at
// a bound of 3, the stale keys of partition 0 first (model partition 1 is read first): not its
// to tombstone, they fill the bound, and no pass frees room, so the passes stop (no read of
// the topic over and over) with partition 1's stale keys untouched. An assignment of both
// partitions then lets the passes go on until every stale key is tombstoned.
func TestStaleScanBoundedWaitsForAssignment(t *testing.T) {
	const bound = 3
	f := newScanFixture(t)
	f.write(t, keysOf("old", 20, "old")) // (by the last digit: 10 of input partition 0, 10 of 1)
	p, passes := boundedPublisher(t, f, bound)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p.assigned([]int32{1}, false)
	p.modelServing()
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		p.scanStale(ctx, kafka.DefaultDialer, f.m)
	}()
	state := func() (bool, int, int) { // (found is a pass's while it reads: scanned false)
		p.stale.mu.Lock()
		defer p.stale.mu.Unlock()
		if !p.stale.scanned {
			return false, -1, -1
		}
		return true, len(p.stale.found), len(p.stale.over)
	}
	for range 50 { // (2.5 s of rounds: the passes stop)
		p.tombstoneStale(ctx)
		time.Sleep(50 * time.Millisecond)
	}
	ok, held, over := state()
	if !ok || held != bound || over == 0 || *passes > 1 {
		t.Errorf("with partition 0's stale keys filling the bound: scanned %v, %d held, %d partitions to read again, %d passes; want the bound held, passes stopped (at most 1)", ok, held, over, *passes)
	}
	if left, _ := f.scan(t, f.cfg, ""); len(left) < 20-bound {
		t.Errorf("%d stale keys left on the topic while the passes waited, want at least %d (partition 1's, beyond the bound)", len(left), 20-bound)
	}
	p.assigned(nil, true)
	for {
		ok, held, over := state()
		if ok && held == 0 && over == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the assignment of every partition: %d stale keys held, %d partitions to read again", held, over)
		}
		p.tombstoneStale(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	<-scanned
	if left, _ := f.scan(t, f.cfg, ""); len(left) != 0 {
		t.Errorf("a scan from the start finds %d stale keys after the assignment, want none", len(left))
	}
}

// boundedPublisher is a key publisher of f's configuration with keys.max_keys bound, closed at
// the test's end, and the count of its stale scan's passes.
func boundedPublisher(t *testing.T, f *scanFixture, bound int) (*keyPublisher, *int) {
	t.Helper()
	cfg := f.cfg
	cfg.Detect.Keys.MaxKeys = bound
	p, err := newKeyPublisher(cfg.modelTopic(), cfg.Ingest.Columns(), cfg.Detect, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	passes := new(int)
	p.stale.onPass = func() { *passes++ }
	return p, passes
}
