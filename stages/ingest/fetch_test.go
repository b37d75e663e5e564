package ingest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

// TestSourceChunkRemainderClosesOnMaxWait (kfake): a batch that starts with what is left of a
// chunk the previous batch was filled from still closes MaxWait after its first record. Three
// partitions of 10 records and batches of 16: the first batch takes one chunk and 6 records of
// the next, so the second starts with 4 left over; it must come back short (14 records) within
// MaxWait, not wait for records that never come (a defect of the first chunked Next, found by
// pipeline's TestHoldStopBeforeFirstModelRealBroker: it waited until its context ended).
func TestSourceChunkRemainderClosesOnMaxWait(t *testing.T) {
	env := kfakeEnv(t)
	var msgs []itMessage
	for p := range itPartitions {
		msgs = append(msgs, makeMessages(p, 0, 10, false)...)
	}
	byOffset := map[[2]int64]itMessage{}
	for k, off := range produce(t, env, msgs) {
		for _, m := range msgs {
			if m.p == k[0] && m.i == k[1] {
				byOffset[[2]int64{int64(m.p), off}] = m
			}
		}
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := itConfig(env, fmt.Sprintf("g-remainder-%d", time.Now().UnixNano()))
	src, err := NewSource(cfg, checkpoint.New(), mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	seen := map[[2]int64]bool{}
	for len(seen) < len(msgs) {
		// Generous against a loaded machine, far below the 10 s the defect waited here.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		b, dls, err := src.Next(ctx)
		cancel()
		took := time.Since(start)
		if err != nil || dls.Len() != 0 || b == nil {
			t.Fatalf("Next after %d records: batch %v, %d dead letters, err %v", len(seen), b, dls.Len(), err)
		}
		rows, rerr := rowsOf(b, byOffset, cfg.BatchSize)
		b.Release()
		if rerr != nil {
			t.Fatal(rerr)
		}
		for _, co := range rows {
			if seen[co] {
				t.Fatalf("partition %d offset %d delivered twice", co[0], co[1])
			}
			seen[co] = true
		}
		// The first batch may wait for the group join; the others have their records at hand.
		if len(seen) > cfg.BatchSize && len(rows) < cfg.BatchSize && took > 5*time.Second {
			t.Fatalf("a short batch of %d records took %s (max_wait %s): the batch window did not close", len(rows), took, cfg.MaxWait)
		}
	}
}

func TestSourceCommitsAtGenerationEndKfake(t *testing.T) {
	testCommitsAtGenerationEnd(t, kfakeEnv(t))
}

func TestSourceCommitsAtGenerationEndRealBroker(t *testing.T) {
	testCommitsAtGenerationEnd(t, realEnv(t))
}

// testCommitsAtGenerationEnd: member A fetches and acknowledges every record but never calls
// Commit; when member B joins, A's generation ends and A commits what is done with it, so the
// partitions' next owners start after A's work instead of reading it all again. Without the
// commit at the generation's end nothing would be committed here.
func testCommitsAtGenerationEnd(t *testing.T, env kafkaEnv) {
	const per = 20
	var msgs []itMessage
	for p := range itPartitions {
		msgs = append(msgs, makeMessages(p, 0, per, false)...)
	}
	produce(t, env, msgs)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	group := fmt.Sprintf("g-genend-%d", time.Now().UnixNano())
	cfg := itConfig(env, group)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	a, err := NewSource(cfg, checkpoint.New(), mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for got := 0; got < len(msgs); {
		b, dls, err := a.Next(ctx)
		if err != nil || dls.Len() != 0 || b == nil {
			t.Fatalf("Next after %d records: batch %v, %d dead letters, err %v", got, b, dls.Len(), err)
		}
		got += b.Len()
		b.Ack()
		b.Release()
	}
	if c := committed(t, env, group); c[0] > 0 || c[1] > 0 || c[2] > 0 {
		t.Fatalf("committed %v before any Commit or rebalance", c)
	}

	b, err := NewSource(cfg, checkpoint.New(), mem, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitFor(t, ctx, "A's done offsets committed when B's join ends A's generation", func() bool {
		c := committed(t, env, group)
		return c[0] == per && c[1] == per && c[2] == per
	})
}

func TestSourceCloseCutsTheLongPollKfake(t *testing.T) { testCloseCutsTheLongPoll(t, kfakeEnv(t)) }

func TestSourceCloseCutsTheLongPollRealBroker(t *testing.T) {
	testCloseCutsTheLongPoll(t, realEnv(t))
}

// testCloseCutsTheLongPoll: with nothing left to read, every partition's fetch waits in the
// broker's long poll; Close cuts those fetches short rather than waiting them out. The median
// of 5 Closes is compared, so that one slow close on a loaded machine does not decide.
func testCloseCutsTheLongPoll(t *testing.T, env kafkaEnv) {
	produce(t, env, makeMessages(0, 0, 1, false))
	var took []time.Duration
	for i := range 5 {
		cfg := itConfig(env, fmt.Sprintf("g-close-%d-%d", time.Now().UnixNano(), i))
		src, err := NewSource(cfg, checkpoint.New(), memory.NewGoAllocator(), testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		b, _, err := src.Next(ctx) // joined, assigned, fetching
		cancel()
		if err != nil || b == nil {
			src.Close()
			t.Fatalf("Next: batch %v, err %v", b, err)
		}
		b.Release()
		time.Sleep(300 * time.Millisecond) // the fetches are now long polls
		start := time.Now()
		src.Close()
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("Close took %v", took)
	// A long poll held by the broker lasts about fetchLongPoll/2 (kafka-go keeps the rest of
	// the deadline for the round trip), and 300 ms of it have passed: waiting it out made
	// Close take 650 ms here, cutting it 1-8 ms (kfake, Kafka 4.1 on the 2-core dev machine).
	// 200 ms leaves room for a loaded machine and none for a wait.
	if med := took[len(took)/2]; med > fetchLongPoll/10 {
		t.Fatalf("median Close %v (of %v): the fetches' long polls were waited out", med, took)
	}
}
