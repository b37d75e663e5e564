package ingest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

func TestSourceNoBackwardCommitKfake(t *testing.T) { testNoBackwardCommit(t, kfakeEnv(t), false) }

func TestSourceNoBackwardCommitRealBroker(t *testing.T) { testNoBackwardCommit(t, realEnv(t), false) }

func TestSourceNoBackwardCommitMovedBackKfake(t *testing.T) {
	testNoBackwardCommit(t, kfakeEnv(t), true)
}

func TestSourceNoBackwardCommitMovedBackRealBroker(t *testing.T) {
	testNoBackwardCommit(t, realEnv(t), true)
}

// testNoBackwardCommit: member A holds a batch taken alone (not yet done); B joins, takes some
// of A's partitions, consumes them further and commits; then A finishes its old batch and
// commits. A must not move B's partitions' committed offsets back to where its old batch ended:
// the group's offset would stay behind the records B has done (lag that never clears on an
// idle partition, and a re-read of B's work after a restart). Seen in CI as
// TestBuilderAndScorersRealBroker's group never committing its last records (with kafka-go's
// Reader, which also handed out messages fetched before a rebalance after it).
//
// movedBack: B leaves before A finishes, so B's partitions come back to A, whose generation then
// holds them again (keepAssigned lets them through) and whose new fetches start at B's 20, past
// A's old batch: no offset regression says that batch is stale. A's commit of it moved B's
// partitions back to 10 before each generation's start dropped what earlier generations had in
// flight.
func testNoBackwardCommit(t *testing.T, env kafkaEnv, movedBack bool) {
	var first, second []itMessage
	for p := range itPartitions {
		first = append(first, makeMessages(p, 0, 10, false)...)
		second = append(second, makeMessages(p, 10, 10, false)...)
	}
	byOffset := map[[2]int64]itMessage{}
	for _, m := range append(append([]itMessage(nil), first...), second...) {
		byOffset[[2]int64{int64(m.p), int64(m.i)}] = m
	}
	produce(t, env, first)

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	group := fmt.Sprintf("g-backward-%d", time.Now().UnixNano())
	cfg := itConfig(env, group)
	cfg.BatchSize = 100 // A's one batch holds every first record
	cfg.MaxWait = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cpA := checkpoint.New()
	a, err := NewSource(cfg, cpA, mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var assignMu sync.Mutex
	var assignments [][]int32
	a.OnAssigned(func(as Assignment) {
		assignMu.Lock()
		assignments = append(assignments, as.Partitions)
		assignMu.Unlock()
	})
	// A alone: fetch until it holds records of every partition, and keep them unfinished.
	var held [][2]int64
	heldParts := map[int64]bool{}
	for len(heldParts) < itPartitions {
		b, _, err := a.Next(ctx)
		if err != nil {
			t.Fatalf("A's first fetch: %v", err)
		}
		rows, err := rowsOf(b, byOffset, cfg.BatchSize)
		b.Record.Release()
		if err != nil {
			t.Fatal(err)
		}
		for _, co := range rows {
			held = append(held, co)
			heldParts[co[0]] = true
		}
	}

	// B joins and consumes: the partitions it takes from A, to their new end.
	bm := &member{cp: checkpoint.New(), seen: map[[2]int64]int{}, done: make(chan struct{})}
	if bm.src, err = NewSource(cfg, bm.cp, mem, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	defer bm.src.Close()
	bctx, stopB := context.WithCancel(ctx)
	go bm.run(bctx, byOffset, cfg.BatchSize, t)
	waitFor(t, ctx, "B joins and is assigned partitions", func() bool { return groupMembers(t, env, group) == 2 })
	produce(t, env, second)
	var bParts []int
	waitFor(t, ctx, "B commits its partitions' new end (20)", func() bool {
		bParts = bParts[:0]
		for p, off := range committed(t, env, group) {
			if off == 20 {
				bParts = append(bParts, p)
			}
		}
		return len(bParts) > 0
	})
	stopB()
	<-bm.done
	if err := bm.error(); err != nil {
		t.Fatal(err)
	}
	if movedBack {
		bm.src.Close() // leaves the group: A is assigned every partition again
		waitFor(t, ctx, "A assigned every partition again after B left", func() bool {
			assignMu.Lock()
			defer assignMu.Unlock()
			n := len(assignments)
			return n >= 3 && len(assignments[n-2]) < itPartitions && len(assignments[n-1]) == itPartitions
		})
	}

	// A finishes its stale batch and commits.
	for _, co := range held {
		cpA.Done(int(co[0]), co[1])
	}
	if _, err := a.Commit(ctx); err != nil {
		t.Logf("A's commit: %v", err)
	}
	after := committed(t, env, group)
	for _, p := range bParts {
		if after[p] != 20 {
			t.Errorf("partition %d: committed offset %d after A's commit of its stale batch, want B's 20 kept", p, after[p])
		}
	}
	t.Logf("B's partitions %v; committed after A: %v; A's assignments %v", bParts, after, assignments)
}
