package gpukern_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// keyedFixture is a key's model as detect builds one (its window's sorted values and rank's
// spreads; R a sample of the window in a standardised space) and its rank.Tail: n window
// values of dims features around a baseline of the key's own, m points of R, k neighbours.
func keyedFixture(r *rand.Rand, n, m, dims, k int) (*gpukern.KeyedModel, *rank.Tail) {
	cols := make([][]float32, dims)
	for j := range cols {
		cols[j] = make([]float32, n)
		base, sd := float32(r.IntN(1000)), float32(1+4*r.Float64())
		for i := range cols[j] {
			cols[j][i] = base + sd*float32(r.NormFloat64())
			if i%17 == 3 { // ties: the two counts differ
				cols[j][i] = cols[j][i-1]
			}
		}
	}
	sorted := make([][]float32, dims)
	for j, c := range cols {
		sorted[j] = slices.Clone(c)
		slices.Sort(sorted[j])
	}
	tail := rank.TailOfSorted(sorted)
	km := &gpukern.KeyedModel{Sorted: sorted, Spread: tail.Spread, K: k,
		Center: make([]float64, dims), Unit: make([]float64, dims), Points: make([][]float32, dims)}
	for j := range dims {
		km.Center[j] = float64(sorted[j][(n-1)/2])
		km.Unit[j] = 0.5 + 3*r.Float64()
		km.Points[j] = make([]float32, m)
		for i := range m {
			km.Points[j][i] = float32((float64(cols[j][i]) - km.Center[j]) / km.Unit[j])
		}
	}
	return km, tail
}

// keyedQueries are records for model km: inside the window's range, exactly on window values
// (ties), just beyond the range (the tail adds u <= ln n on the device), and far beyond (past ln n
// spreads: the host's log1p).
func keyedQueries(r *rand.Rand, km *gpukern.KeyedModel, count int) [][]float32 {
	dims, n := len(km.Sorted), len(km.Sorted[0])
	q := make([][]float32, dims)
	for j := range q {
		q[j] = make([]float32, count)
		s := km.Sorted[j]
		lo, hi := s[0], s[n-1]
		for i := range q[j] {
			switch i % 5 {
			case 0:
				q[j][i] = lo + (hi-lo)*float32(r.Float64())
			case 1:
				q[j][i] = s[r.IntN(n)]
			case 2:
				q[j][i] = hi + float32(km.Spread[j]*r.Float64())
			case 3:
				q[j][i] = lo - float32(km.Spread[j]*r.Float64())
			default:
				q[j][i] = hi + float32(km.Spread[j]*(10+50*r.Float64()))
			}
		}
	}
	return q
}

// TestKeyedReferenceMatchesCPU: the keyed kernels' CPU twin gives rank.Tail.Score's tail score
// and solvingset.KNNWeights's w_k(q, R) bit for bit (so the kernel, held to the twin, gives the
// keyed scorer's CPU scores), and asks for the host exactly where rank's tail goes past ln n
// (its log1p), for models of several shapes and k up to 64.
func TestKeyedReferenceMatchesCPU(t *testing.T) {
	r := newRand(t, 21)
	var flagged, beyond int
	for _, c := range []struct{ n, m, dims, k int }{{200, 200, 3, 10}, {51, 50, 3, 10}, {150, 120, 1, 5}, {200, 180, 8, 40}, {64, 64, 2, 63}} {
		km, tail := keyedFixture(r, c.n, c.m, c.dims, c.k)
		logs := gpukern.KeyedLogs(200)
		q := keyedQueries(r, km, 500)
		wantT, wantD := make([]float64, 500), make([]float64, 500)
		tail.Score(q, wantT)
		solvingset.KNNWeights(km.Points, q2space(km, q), km.K, 1, wantD)
		for i := range wantT {
			x := make([]float32, c.dims)
			for j := range x {
				x[j] = q[j][i]
			}
			gotT, gotD, host := gpukern.KeyedScoreReference(km, x, logs)
			if math.Float64bits(gotD) != math.Float64bits(wantD[i]) {
				t.Fatalf("%+v record %d: w_k %v, solvingset %v", c, i, gotD, wantD[i])
			}
			past := false
			for j := range x {
				s := km.Sorted[j]
				u := max(float64(s[0])-float64(x[j]), float64(x[j])-float64(s[len(s)-1])) / km.Spread[j]
				past = past || u > math.Log(float64(c.n))
				if x[j] < s[0] || x[j] > s[len(s)-1] {
					beyond++
				}
			}
			if host != past {
				t.Fatalf("%+v record %d: host %v, past ln n %v", c, i, host, past)
			}
			if host {
				flagged++
				continue
			}
			if math.Float64bits(gotT) != math.Float64bits(wantT[i]) {
				t.Fatalf("%+v record %d: tail %v, rank %v", c, i, gotT, wantT[i])
			}
		}
	}
	if flagged == 0 || beyond <= flagged {
		t.Fatalf("the queries did not cover both kinds of records beyond the range: %d flagged, %d beyond", flagged, beyond)
	}
}

// q2space maps records to km's distance space as detect's distanceSpace does.
func q2space(km *gpukern.KeyedModel, q [][]float32) [][]float32 {
	out := make([][]float32, len(q))
	for j, c := range q {
		out[j] = make([]float32, len(c))
		for i, v := range c {
			out[j][i] = float32(max(-1e6, min(1e6, (float64(v)-km.Center[j])/km.Unit[j])))
		}
	}
	return out
}

// TestKeyedChunks: the records grouped by slot, each slot's in stream order, in chunks of at
// most a warp's 32 records of one slot that cover every record once.
func TestKeyedChunks(t *testing.T) {
	r := newRand(t, 5)
	slot := make([]int32, 3000)
	for i := range slot {
		slot[i] = int32(r.IntN(40))
		if i%2 == 0 {
			slot[i] = 7
		}
	}
	order, chunks := gpukern.KeyedChunks(slot)
	seen := make([]bool, len(slot))
	for c := 0; c < len(chunks); c += 3 {
		s, first, count := chunks[c], int(chunks[c+1]), int(chunks[c+2])
		if count < 1 || count > 32 {
			t.Fatalf("chunk of %d records", count)
		}
		for p := first; p < first+count; p++ {
			i := order[p]
			if slot[i] != s || seen[i] || p > first && order[p-1] >= i {
				t.Fatalf("chunk %d: record %d (slot %d) out of place", c/3, i, slot[i])
			}
			seen[i] = true
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("record %d in no chunk", i)
		}
	}
	// The order is a sort by (slot as unsigned, position), for slots of every size (a million
	// keys' slots need three bytes; -1, as unsigned, all four).
	for _, span := range []int{1, 300, 1 << 20, 1 << 31} {
		for i := range slot {
			slot[i] = int32(r.IntN(span))
			if i%97 == 0 {
				slot[i] = -1
			}
		}
		order, _ := gpukern.KeyedChunks(slot)
		want := make([]int32, len(slot))
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(uint32(slot[a]), uint32(slot[b])) })
		if !slices.Equal(order, want) {
			t.Fatalf("slots below %d: the order is not the records sorted by slot, then position", span)
		}
	}
}

// TestKeyedGrouperLayout: a part grouped at positions first.. of a call writes each record's
// values in its row (row-major at its position), lists every position once in chunks of one slot
// and at most 32 records, the part's records of a slot in their order (stream order within a
// key), the positions counted from the call's start; rows pick the records' columns (nil: the
// identity), and a grouper reused for a smaller part forgets the larger one.
func TestKeyedGrouperLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	const dims, cols = 3, 9000
	x := make([][]float32, dims)
	for j := range x {
		x[j] = make([]float32, cols)
		for i := range x[j] {
			x[j][i] = float32(j*cols + i)
		}
	}
	var g gpukern.KeyedGrouper
	for _, c := range []struct {
		n, slots, first int
		identity        bool
	}{{5000, 1 << 20, 0, false}, {3000, 40, 1234, false}, {70, 1, 17, true}, {1, 3, 8000, false}} {
		slot, rows := make([]int32, c.n), make([]int32, c.n)
		for i := range slot {
			slot[i], rows[i] = int32(r.IntN(c.slots)), int32(r.IntN(cols))
			if c.identity {
				rows[i] = int32(i)
			}
		}
		given := rows
		if c.identity {
			given = nil
		}
		xs := make([]float32, (c.first+c.n)*dims)
		order, chunks := g.Group(slot, given, x, c.first, xs)
		if len(order) != c.n {
			t.Fatalf("%+v: %d records ordered", c, len(order))
		}
		for p, rec := range order {
			for j := range dims {
				if xs[(c.first+p)*dims+j] != x[j][rows[rec]] {
					t.Fatalf("%+v: position %d feature %d holds %v, record %d's value is %v", c, c.first+p, j, xs[(c.first+p)*dims+j], rec, x[j][rows[rec]])
				}
			}
		}
		next := c.first
		seen := make([]bool, c.n)
		for t3 := 0; t3 < len(chunks); t3 += 3 {
			sl, at, cnt := chunks[t3], int(chunks[t3+1]), int(chunks[t3+2])
			if at != next || cnt < 1 || cnt > 32 {
				t.Fatalf("%+v: chunk at %d of %d records, the next position is %d", c, at, cnt, next)
			}
			for p := at; p < at+cnt; p++ {
				rec := order[p-c.first]
				if slot[rec] != sl || seen[rec] || p > at && order[p-c.first-1] > rec {
					t.Fatalf("%+v: position %d: record %d of slot %d in a chunk of slot %d (seen %v, or out of stream order)", c, p, rec, slot[rec], sl, seen[rec])
				}
				seen[rec] = true
			}
			next = at + cnt
		}
		if next != c.first+c.n {
			t.Fatalf("%+v: the chunks end at %d, not %d", c, next, c.first+c.n)
		}
	}
}
