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
	cfg := f.cfg
	cfg.Detect.Keys.MaxKeys = bound
	p, err := newKeyPublisher(cfg.modelTopic(), cfg.Ingest.Columns(), cfg.Detect, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.stale.dir = dir
	passes := 0
	p.stale.onPass = func() { passes++ }
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
	if want := (stale+bound-1)/bound - 1; passes < want {
		t.Errorf("%d passes past the bound, want at least %d", passes, want)
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
