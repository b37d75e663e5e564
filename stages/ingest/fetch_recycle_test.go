package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestFetchEmptyKeepsRecycledBuffer (kfake): a fetch that returns no record (an idle partition's
// long poll) hands the chunk buffer it took back to the free list. Before, read took a buffer
// from the free list at the start of every fetch and dropped it when the fetch was empty, so
// an idle partition emptied the list and then made a fresh 1024-slot buffer (its slots' Decoded
// lost) at every long poll.
func TestFetchEmptyKeepsRecycledBuffer(t *testing.T) {
	env := kfakeEnv(t) // the topic's partitions are empty
	f, _ := testFetcher(env, 16, 1<<20, 16)
	f.free = make(chan []pendingMsg, fetchChunks)
	spare := make([]pendingMsg, 0, 16)
	f.free <- spare
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.fetchPartition(ctx, 1, 0, kafka.FirstOffset)
	}()
	// At least one long poll (the broker holds an idle fetch about 1 s: fetchLongPoll) ends
	// empty before the cut.
	time.Sleep(fetchLongPoll + 500*time.Millisecond)
	cancel()
	<-done
	if len(f.chunks) != 0 {
		t.Fatalf("%d chunks from an empty partition", len(f.chunks))
	}
	if len(f.free) != 1 {
		t.Fatalf("%d buffers on the free list after empty fetches, want the 1 put there", len(f.free))
	}
}
