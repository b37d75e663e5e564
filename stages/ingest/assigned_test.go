package ingest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

// TestSourceAssigned: a Source hears its assignment (on kfake): alone in its group, every
// partition of its topic, which the scorers' keys' models depend on.
func TestSourceAssigned(t *testing.T) {
	env := kfakeEnv(t)
	src, err := NewSource(itConfig(env, "g-assigned"), checkpoint.New(), memory.NewGoAllocator(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var mu sync.Mutex
	var got [][]int32
	src.OnAssigned(func(a Assignment) {
		mu.Lock()
		got = append(got, a.Partitions)
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { // the group is joined by the first fetch
		if b, dl, err := src.Next(ctx); err == nil {
			if b != nil {
				b.Release()
			}
			_ = dl
		}
	}()
	want := []int32{0, 1, 2}[:itPartitions]
	for {
		mu.Lock()
		n := len(got)
		ok := n > 0 && slices.Equal(got[n-1], want)
		mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("assignments heard %v, want %v", got, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
