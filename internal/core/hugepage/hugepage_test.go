package hugepage

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// advise makes one pass now, the keeper's (collapses included), and returns the figures so far.
func advise() Stats {
	keeper.state.pass(nil, true)
	return keeper.state.stats()
}

// current returns the figures so far, without waiting for a running pass.
func current() Stats { return keeper.state.stats() }

// keepers counts the keeper goroutines running (by their function in the goroutines' stacks).
func keepers() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return bytes.Count(buf[:n], []byte("hugepage.Keep.func1("))
}

// gone waits for the keeper goroutines to be none: a release returns once the goroutine closed
// its done channel, which it does as it returns, so it may still be in the stacks for a moment.
func gone(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); keepers() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d keeper goroutines left after the last release", keepers())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeepNests: one keeper for the process however many hold it; a release twice counts once;
// the last release ends the goroutine; holds taken and released at once from many goroutines
// (a Keep while a release waits for the keeper to stop) leave none.
func TestKeepNests(t *testing.T) {
	gone(t)
	a, _ := Keep()
	b, _ := Keep()
	if n := keepers(); n != 1 {
		t.Fatalf("%d keepers for two holds, want 1", n)
	}
	a()
	a() // a second release of one hold does not release another's
	if n := keepers(); n != 1 {
		t.Fatalf("%d keepers while a hold remains, want 1", n)
	}
	b()
	gone(t)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				release, _ := Keep()
				release()
			}
		})
	}
	wg.Wait()
	gone(t)
	keeper.mu.Lock()
	defer keeper.mu.Unlock()
	if keeper.holders != 0 {
		t.Fatalf("%d holders after every hold was released", keeper.holders)
	}
}
