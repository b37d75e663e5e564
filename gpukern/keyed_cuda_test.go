//go:build cuda

package gpukern_test

import (
	"math"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
)

// TestKeyedStoreMatchesReference: keyed_score gives KeyedScoreReference's scores and host flags
// bit for bit for records of many keys in one launch: 300 keys of several n, m and k (k up to
// 40, the 64-slot queue), batches with one record of a key and with more than a warp's 32 (a
// key's records split over chunks), slots past the first allocation (the store grows, the slots
// copied), and again after models are re-installed in place (a key's rebuild); and the same
// records given in parts to ScoreGrouped, the parts' slots overlapping, give Score's bits.
func TestKeyedStoreMatchesReference(t *testing.T) {
	d := openDevice(t)
	const dims, window = 3, 200
	st, err := d.NewKeyedStore(gpukern.KeyedShape{Dims: dims, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Free()
	r := newRand(t, 2121)
	logs := gpukern.KeyedLogs(window)
	var call keyedCaller
	const keys = 300
	models := make([]*gpukern.KeyedModel, keys)
	slots := make([]int32, keys)
	build := func() {
		for i := range models {
			n := 51 + r.IntN(150)
			k := []int{10, 1, 31, 40}[i%4]
			models[i], _ = keyedFixture(r, n, min(n, 20+r.IntN(181)), dims, k)
			slots[i] = int32(i * 7) // up to 2093: past the first 1024 slots
		}
		if err := st.Install(slots, models); err != nil {
			t.Fatal(err)
		}
	}
	check := func(round int) {
		for _, size := range []int{1, 97, 5000} {
			key := make([]int, size)
			slot := make([]int32, size)
			x := make([][]float32, dims)
			for j := range x {
				x[j] = make([]float32, size)
			}
			for i := range size {
				key[i] = r.IntN(keys)
				if i%3 == 0 {
					key[i] = 5 // one key with many records: more than one chunk
				}
				slot[i] = slots[key[i]]
				q := keyedQueries(r, models[key[i]], 5)
				for j := range dims {
					x[j][i] = q[j][i%5]
				}
			}
			tail, dist, host := make([]float64, size), make([]float64, size), make([]bool, size)
			if err := call.score(st, slot, x, tail, dist, host); err != nil {
				t.Fatal(err)
			}
			flagged := 0
			for i := range size {
				xi := []float32{x[0][i], x[1][i], x[2][i]}
				wt, wd, wh := gpukern.KeyedScoreReference(models[key[i]], xi, logs)
				if math.Float64bits(dist[i]) != math.Float64bits(wd) || host[i] != wh || !wh && math.Float64bits(tail[i]) != math.Float64bits(wt) {
					t.Fatalf("round %d batch %d record %d (key %d, k %d): GPU %v %v %v, reference %v %v %v", round, size, i, key[i], models[key[i]].K, tail[i], dist[i], host[i], wt, wd, wh)
				}
				if wh {
					flagged++
				}
			}
			if size > 97 && (flagged == 0 || flagged == size) {
				t.Fatalf("batch %d: %d records for the host: the queries miss a case", size, flagged)
			}
			// The same records in three parts (every third record, by row: key 5's many records
			// in the first, most other keys' in all three), each grouped on its own, in one
			// ScoreGrouped: the one part's bits.
			parts := 3
			var gs [3]gpukern.KeyedGrouper
			var chunks [][]int32
			orders, rowsOf, from := make([][]int32, parts), make([][]int32, parts), make([]int, parts+1)
			for w := range parts {
				for i := w; i < size; i += parts {
					rowsOf[w] = append(rowsOf[w], int32(i))
				}
				from[w+1] = from[w] + len(rowsOf[w])
			}
			xs := make([]float32, size*dims)
			for w := range parts {
				ps := make([]int32, len(rowsOf[w]))
				for r, i := range rowsOf[w] {
					ps[r] = slot[i]
				}
				var c []int32
				orders[w], c = gs[w].Group(ps, rowsOf[w], x, from[w], xs)
				chunks = append(chunks, c)
			}
			var out gpukern.KeyedScores
			if err := st.ScoreGrouped(chunks, xs, &out); err != nil {
				t.Fatal(err)
			}
			for w := range parts {
				for p, r := range orders[w] {
					i := rowsOf[w][r]
					at := from[w] + p
					if math.Float64bits(out.Dist(at)) != math.Float64bits(dist[i]) || out.Host(at) != host[i] || !host[i] && math.Float64bits(out.Tail(at)) != math.Float64bits(tail[i]) {
						t.Fatalf("round %d batch %d record %d in part %d: grouped %v %v %v, Score %v %v %v", round, size, i, w, out.Tail(at), out.Dist(at), out.Host(at), tail[i], dist[i], host[i])
					}
				}
			}
		}
	}
	build()
	check(0)
	build() // every key rebuilt: the slots overwritten in place
	check(1)
}

// keyedCaller scores records x (column-major) against the models in slots slot in one call, the
// records in one part (KeyedGrouper, ScoreGrouped) placed back in their order: tail[i] (unless
// host[i]), dist[i] and host[i] are record i's. Its memory is kept from call to call.
type keyedCaller struct {
	g   gpukern.KeyedGrouper
	out gpukern.KeyedScores
	xs  []float32
}

func (c *keyedCaller) score(st *gpukern.KeyedStore, slot []int32, x [][]float32, tail, dist []float64, host []bool) error {
	if len(c.xs) < len(slot)*len(x) {
		c.xs = make([]float32, len(slot)*len(x))
	}
	xs := c.xs[:len(slot)*len(x)]
	order, chunks := c.g.Group(slot, nil, x, 0, xs)
	if err := st.ScoreGrouped([][]int32{chunks}, xs, &c.out); err != nil {
		return err
	}
	for p, i := range order {
		tail[i], dist[i], host[i] = c.out.Tail(p), c.out.Dist(p), c.out.Host(p)
	}
	return nil
}

// BenchmarkKeyedScore: keyed_score alone (one call: grouping, upload, one launch, download)
// for batches of 20,000 records of random keys among 100,000 resident, 3 features, window 200, k 10.
func BenchmarkKeyedScore(b *testing.B) {
	d := openDevice(b)
	const dims, window, keys, batch = 3, 200, 100000, 20000
	st, err := d.NewKeyedStore(gpukern.KeyedShape{Dims: dims, Window: window})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Free()
	r := newRand(b, 3)
	m, _ := keyedFixture(r, window, window, dims, 10)
	slots := make([]int32, keys)
	models := make([]*gpukern.KeyedModel, keys)
	for i := range slots {
		slots[i], models[i] = int32(i), m
	}
	if err := st.Install(slots, models); err != nil {
		b.Fatal(err)
	}
	slot := make([]int32, batch)
	for i := range slot {
		slot[i] = int32(r.IntN(keys))
	}
	x := keyedQueries(r, m, batch)
	tail, dist, host := make([]float64, batch), make([]float64, batch), make([]bool, batch)
	var call keyedCaller
	b.ResetTimer()
	for range b.N {
		if err := call.score(st, slot, x, tail, dist, host); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
}

// TestKeyedSelfWeightsMatchesReference: keyed_self gives KeyedSelfReference's weights bit for bit
// for many sets in one launch (keyedSelfSets: 2 to 300 points, k 1 to 64 and past n-1, copies,
// ties, clamped points, a set of one point repeated), for 1, 3 and 5 features, and again for a
// smaller call after a larger one (the kept scratch).
func TestKeyedSelfWeightsMatchesReference(t *testing.T) {
	d := openDevice(t)
	r := newRand(t, 2124)
	for _, c := range []struct{ count, dims int }{{400, 3}, {57, 1}, {120, 5}, {3, 3}} {
		sets, ks := keyedSelfSets(r, c.count, c.dims)
		out := make([][]float64, len(sets))
		for s, set := range sets {
			out[s] = make([]float64, len(set[0]))
		}
		if err := d.KeyedSelfWeights(sets, ks, out); err != nil {
			t.Fatal(err)
		}
		for s, set := range sets {
			want := make([]float64, len(set[0]))
			gpukern.KeyedSelfReference(set, ks[s], want)
			for i := range want {
				if math.Float64bits(out[s][i]) != math.Float64bits(want[i]) {
					t.Fatalf("%d sets of %d features: set %d (n=%d k=%d) point %d: kernel %v, twin %v", c.count, c.dims, s, len(want), ks[s], i, out[s][i], want[i])
				}
			}
		}
	}
	if err := d.KeyedSelfWeights([][][]float32{{{1, 2}}}, []int{65}, [][]float64{make([]float64, 2)}); err == nil {
		t.Fatal("k = 65 accepted (the kernels select at most 64)")
	}
}

// TestKeyedSelfWeightsNaNMatchesReference: keyed_self keeps no NaN distance, as its twin
// (TestKeyedSelfReferenceNaN's set, and the same with +-inf coordinates).
func TestKeyedSelfWeightsNaNMatchesReference(t *testing.T) {
	d := openDevice(t)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		set := [][]float32{{0, 1, 2, 3, 4, 5}, {0, 1, bad, 3, 4, 5}}
		for _, k := range []int{1, 2, 5} {
			got, want := []float64{0, 0, 0, 0, 0, 0}, make([]float64, 6)
			if err := d.KeyedSelfWeights([][][]float32{set}, []int{k}, [][]float64{got}); err != nil {
				t.Fatal(err)
			}
			gpukern.KeyedSelfReference(set, k, want)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("a point at %v, k=%d: point %d: kernel %v, twin %v", bad, k, i, got[i], want[i])
				}
			}
		}
	}
}
