package gpukern

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// queued is how many callers wait for l.
func (l *devLock) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// TestDevLockFirstComeFirstServed: a caller that waits for a device gets it before the holder
// takes it again (runSolvingSet unlocks after an iteration and locks at once for the next; a
// scoring call waiting meanwhile must go between them, as it did behind the owner goroutine's
// channel), and waiters get it in arrival order. With a sync.Mutex the holder took it back.
func TestDevLockFirstComeFirstServed(t *testing.T) {
	for trial := range 20 {
		var l devLock
		l.lock()
		order := make(chan int, 4)
		var wg sync.WaitGroup
		for w := 1; w <= 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.lock()
				order <- w
				l.unlock()
			}()
			waitQueued(t, &l, w)
		}
		l.unlock()
		l.lock() // the holder again, at once
		order <- 0
		l.unlock()
		wg.Wait()
		close(order)
		var got []int
		for w := range order {
			got = append(got, w)
		}
		if want := []int{1, 2, 3, 0}; !slices.Equal(got, want) {
			t.Fatalf("trial %d: the lock went to %v, want %v (the waiters in arrival order, then the holder)", trial, got, want)
		}
	}
}

// TestDevLockExcludes: callers never hold the lock together (run with -race: the counter is not
// atomic).
func TestDevLockExcludes(t *testing.T) {
	var l devLock
	var inside, total int
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				l.lock()
				inside++
				if inside != 1 {
					t.Errorf("%d callers inside", inside)
				}
				total++
				inside--
				l.unlock()
			}
		}()
	}
	wg.Wait()
	if total != 8*2000 || l.held || l.queued() != 0 {
		t.Fatalf("total %d, held %v, %d queued after every caller left", total, l.held, l.queued())
	}
}

// waitQueued waits until n callers wait for l.
func waitQueued(t *testing.T, l *devLock, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); l.queued() < n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers waiting after 10 s, want %d", l.queued(), n)
		}
	}
}
