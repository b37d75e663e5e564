package gpukern

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeyedChunksReuseScratch: keyedChunks in a scratch kept from call to call (the store's
// Score) gives a fresh call's order and chunks, whatever the calls before it left there (more
// records, fewer, more slots, one slot).
func TestKeyedChunksReuseScratch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var sc chunkScratch
	for _, c := range []struct{ n, slots int }{{5000, 1 << 20}, {37, 5}, {3000, 100}, {1, 1}, {6000, 1 << 20}, {100, 1}} {
		slot := make([]int32, c.n)
		for i := range slot {
			slot[i] = int32(r.IntN(c.slots))
		}
		wantOrder, wantChunks := keyedChunks(slot)
		order, chunks := sc.chunksOf(slot, 0)
		if !slices.Equal(order, wantOrder) || !slices.Equal(chunks, wantChunks) {
			t.Fatalf("%d records of %d slots: the reused scratch's chunks differ from a fresh call's", c.n, c.slots)
		}
	}
}
