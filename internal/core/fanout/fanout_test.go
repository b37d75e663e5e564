package fanout

import (
	"sync/atomic"
	"testing"
)

func TestEachRunsEveryIndexOnce(t *testing.T) {
	for _, c := range []struct{ workers, n int }{{0, 5}, {1, 7}, {4, 1000}, {64, 3}, {3, 0}} {
		hits := make([]atomic.Int32, c.n)
		Each(c.workers, c.n, func(i int) { hits[i].Add(1) })
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("workers %d, n %d: index %d ran %d times", c.workers, c.n, i, h)
			}
		}
	}
}

func TestEachInOrderOnOneWorker(t *testing.T) {
	var got []int
	Each(1, 5, func(i int) { got = append(got, i) })
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
	if len(got) != 5 {
		t.Fatalf("ran %d of 5", len(got))
	}
}

func TestEachWorkerOrdinals(t *testing.T) {
	for _, c := range []struct{ workers, n, want int }{{0, 5, 1}, {1, 7, 1}, {4, 1000, 4}, {64, 3, 3}, {3, 0, 0}} {
		hits := make([]atomic.Int32, c.n)
		// busy[w] counts worker w's calls in flight: more than one means two goroutines share w.
		busy := make([]atomic.Int32, max(c.workers, 1))
		EachWorker(c.workers, c.n, func(w, i int) {
			if w < 0 || w >= c.want {
				t.Errorf("workers %d, n %d: ordinal %d outside [0, %d)", c.workers, c.n, w, c.want)
				return
			}
			if busy[w].Add(1) != 1 {
				t.Errorf("workers %d, n %d: worker %d ran two calls at once", c.workers, c.n, w)
			}
			hits[i].Add(1)
			busy[w].Add(-1)
		})
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("workers %d, n %d: index %d ran %d times", c.workers, c.n, i, h)
			}
		}
	}
}

// TestEachWorkerOneIterationInline: a single iteration runs on the caller's goroutine whatever
// workers says (no goroutine, so nothing allocated), as the solving set's small inputs need.
func TestEachWorkerOneIterationInline(t *testing.T) {
	ran := 0
	f := func(w, i int) { ran += 1 + w + i }
	if a := testing.AllocsPerRun(100, func() { EachWorker(8, 1, f) }); a != 0 {
		t.Errorf("one iteration on 8 workers: %.0f allocations a call, want 0 (a goroutine started)", a)
	}
	if ran != 101 {
		t.Errorf("f ran %d times with w = i = 0, want 101", ran)
	}
}
