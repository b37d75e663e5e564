package gpukern

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestKeyedChunksReuseScratch: keyedChunks in a scratch kept from call to call (a KeyedGrouper's)
// gives a fresh call's order and chunks, whatever the calls before it left there (more
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

// TestCheckChunks: the chunks of parts grouped at consecutive firsts pass ScoreGrouped's check
// (counted), and a list that would upload wrongly is refused: a ragged part (every later part's
// triples shifted), a position no chunk covers (its scores would be the device scratch's stale
// bits), a position in two chunks, a count of 0 or past a warp's 32, a slot not the store's, and chunks
// of fewer records than the values give (records of another width than the store's).
func TestCheckChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 21))
	var gs [3]KeyedGrouper
	sizes := []int{70, 0, 41}
	var chunks [][]int32
	x, first := [][]float32{make([]float32, 70)}, 0
	xs := make([]float32, 111)
	want := 0
	for w, n := range sizes {
		slot := make([]int32, n)
		for i := range slot {
			slot[i] = int32(r.IntN(3))
		}
		_, c := gs[w].Group(slot, nil, x, first, xs)
		chunks = append(chunks, slices.Clone(c))
		first += n
		want += len(c) / 3
	}
	if got, err := checkChunks(chunks, first, 3); err != nil || got != want {
		t.Fatalf("the groupers' chunks: %d chunks, %v; want %d, nil", got, err, want)
	}
	edit := func(f func(c [][]int32) [][]int32) [][]int32 {
		c := make([][]int32, len(chunks))
		for w := range chunks {
			c[w] = slices.Clone(chunks[w])
		}
		return f(c)
	}
	for _, c := range []struct {
		what   string
		chunks [][]int32
		n      int
	}{
		{"a ragged part", edit(func(c [][]int32) [][]int32 { c[0] = append(c[0], 1); return c }), first},
		{"a chunk left out", edit(func(c [][]int32) [][]int32 { c[0] = c[0][3:]; return c }), first},
		{"the last chunk left out", edit(func(c [][]int32) [][]int32 { c[2] = c[2][:len(c[2])-3]; return c }), first},
		{"a chunk twice", edit(func(c [][]int32) [][]int32 { c[2] = append(c[2][:3:3], c[2]...); return c }), first},
		{"a count of 0", edit(func(c [][]int32) [][]int32 { c[0][2] = 0; return c }), first},
		{"a count past 32", [][]int32{{0, 0, 33}}, 33},
		{"a negative slot", edit(func(c [][]int32) [][]int32 { c[2][0] = -1; return c }), first},
		{"a slot past the store's", edit(func(c [][]int32) [][]int32 { c[2][0] = 3; return c }), first},
		{"more records than the chunks cover", chunks, 2 * first},
		{"fewer records than the chunks cover", chunks, first - 1},
	} {
		if _, err := checkChunks(c.chunks, c.n, 3); err == nil {
			t.Errorf("%s: accepted", c.what)
		}
	}
}

// TestKeyedScoresLayout: KeyedScores reads a download laid out as keyed.cu writes it (n tail
// scores' bits, n distances', then n int32 host flags, two a word: position p at byte 16n + 4p),
// the flags at odd and even positions, for n odd and even, a store reused for fewer records.
func TestKeyedScoresLayout(t *testing.T) {
	var o KeyedScores
	for _, n := range []int{8, 1, 2, 5, 7} {
		o.resize(n)
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&o.back[0])), 8*len(o.back))
		le := binary.LittleEndian
		for p := range n {
			le.PutUint64(raw[8*p:], math.Float64bits(float64(p)+0.5))
			le.PutUint64(raw[8*(n+p):], math.Float64bits(-float64(p)))
			le.PutUint32(raw[16*n+4*p:], uint32(p%3/2)) // (set at p = 2, 5: even and odd)
		}
		for p := range n {
			if o.Tail(p) != float64(p)+0.5 || o.Dist(p) != -float64(p) || o.Host(p) != (p%3 == 2) {
				t.Fatalf("n %d position %d: %v %v %v", n, p, o.Tail(p), o.Dist(p), o.Host(p))
			}
		}
	}
}
