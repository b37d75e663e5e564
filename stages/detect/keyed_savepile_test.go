package detect

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// TestKeysSavesDoNotPileUp: a keys' state save is skipped while the previous one is still being
// written. Each save holds a copy of every key's state (about keys x 15 KB: 1.5 GB at 100,000
// keys) until written, and one is started each refresh_interval: on a disk slower than that
// (a stalled volume) the copies piled up without bound. The stall here is the state
// directory's lock held by the test, which every write takes.
func TestKeysSavesDoNotPileUp(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cfg := keyedConfig()
	cfg.StateDir, cfg.Snapshots = t.TempDir(), 10
	s := newFleetStage(t, cfg, []string{"value"})
	feedFleet(t, s, mem, fleet(10, 2000, 0.003, 3), 0, 2000)
	s.ext.saves.Wait()
	d := s.ext.snaps
	files := func() int {
		t.Helper()
		fs, err := d.list(keysPrefix)
		if err != nil {
			t.Fatal(err)
		}
		return len(fs)
	}
	before := files()
	d.mu.Lock() // the disk stalls: the first save waits to write
	for range 3 {
		s.saveKeys(false)
	}
	d.mu.Unlock()
	s.ext.saves.Wait()
	if got := files() - before; got != 1 {
		t.Errorf("%d keys' state files written by 3 saves during one stalled write, want 1 (the others skipped)", got)
	}
	s.Close()
}
