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
