package microcluster

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
)

// randomCols returns n rows of r uniform [0,1) means and sds, column-major.
func randomCols(n, r int, seed uint64) (means, sds [][]float32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	means, sds = make([][]float32, r), make([][]float32, r)
	for j := range r {
		means[j], sds[j] = make([]float32, n), make([]float32, n)
		for i := range n {
			means[j][i] = rng.Float32()
			sds[j][i] = 0.1 * rng.Float32()
		}
	}
	return means, sds
}

// bruteNearest is the reference: full distances, strict < so ties keep the lowest index.
func bruteNearest(means, cent [][]float32, i int) int32 {
	r := len(means)
	x, c := make([]float32, r), make([]float32, r)
	for j := range r {
		x[j] = means[j][i]
	}
	best, bestC := float32(math.Inf(1)), int32(-1)
	for k := range cent[0] {
		for j := range r {
			c[j] = cent[j][k]
		}
		if d := SquaredDistance(x, c); d < best {
			best, bestC = d, int32(k)
		}
	}
	return bestC
}

func TestAssignMatchesBruteForce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		n, r, q      int
		dupCentroids bool // duplicated centroids force exact ties
		workers      int
		outGarbage   bool
	}{
		{"r1", 500, 1, 7, false, 1, false},
		{"r10", 3000, 10, 50, false, 2, false},
		{"ties", 2000, 3, 20, true, 3, false},
		{"guesses", 2000, 5, 30, true, 4, true},
		{"q1", 100, 4, 1, false, 0, false},
		{"odd block", 131, 7, 9, false, 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			means, _ := randomCols(tc.n, tc.r, 11)
			cent, _ := randomCols(tc.q, tc.r, 12)
			if tc.dupCentroids {
				for j := range tc.r {
					for c := 1; c < tc.q; c += 2 {
						cent[j][c] = cent[j][c-1]
					}
				}
				// Some rows sit exactly on a duplicated centroid (distance 0 to two clusters).
				for i := 0; i < tc.n; i += 10 {
					for j := range tc.r {
						means[j][i] = cent[j][(i/10*2)%tc.q]
					}
				}
			}
			out := make([]int32, tc.n)
			rng := rand.New(rand.NewPCG(5, 5))
			for i := range out {
				out[i] = -1
				if tc.outGarbage { // prior contents of out must not matter
					out[i] = int32(rng.IntN(tc.q+4)) - 2
				}
			}
			if err := Assign(means, cent, out, tc.workers); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if want := bruteNearest(means, cent, i); out[i] != want {
					t.Fatalf("row %d: got cluster %d, brute force says %d", i, out[i], want)
				}
			}
		})
	}
}

func TestAssignRejectsBadShapes(t *testing.T) {
	t.Parallel()
	means, _ := randomCols(10, 2, 1)
	cent, _ := randomCols(3, 2, 2)
	if err := Assign(means, cent[:1], make([]int32, 10), 1); err == nil {
		t.Error("dimension mismatch accepted")
	}
	if err := Assign(means, cent, make([]int32, 9), 1); err == nil {
		t.Error("short out accepted")
	}
	if err := Assign(means, [][]float32{{}, {}}, make([]int32, 10), 1); err == nil {
		t.Error("zero centroids accepted")
	}
}

// naiveTuples sums in plain row order, the definition of the tuples.
func naiveTuples(means, sds [][]float32, assign []int32, q int) *MicroClusters {
	m, _ := New(len(means), q)
	for i, c := range assign {
		if c < 0 || int(c) >= q {
			continue
		}
		m.N[c]++
		for j := range means {
			v := float64(means[j][i])
			m.CF1[j][c] += v
			m.CF2[j][c] += v * v
			if sds != nil {
				e := float64(sds[j][i])
				m.EF2[j][c] += e * e
			}
		}
	}
	return m
}

func TestReduceMatchesNaiveAndIgnoresWorkers(t *testing.T) {
	t.Parallel()
	const n, r, q = 50000, 3, 17 // 50000 rows: 7 chunks of 8192, so chunk merging is exercised
	means, sds := randomCols(n, r, 3)
	rng := rand.New(rand.NewPCG(4, 4))
	assign := make([]int32, n)
	for i := range assign {
		assign[i] = int32(rng.IntN(q+1)) - 1 // -1 rows belong to no cluster
	}
	want := naiveTuples(means, sds, assign, q)
	ref, err := Reduce(means, sds, assign, q, 1)
	if err != nil {
		t.Fatal(err)
	}
	for c := range q {
		if ref.N[c] != want.N[c] {
			t.Fatalf("cluster %d: n=%d, want %d", c, ref.N[c], want.N[c])
		}
		for j := range r {
			// Chunked and plain row-order float64 sums differ only by rounding: each of at most
			// n additions errs by <= 2^-53 of the running sum, so |diff| <= n * 2^-53 * sum.
			for _, p := range [][2]float64{{ref.CF1[j][c], want.CF1[j][c]}, {ref.CF2[j][c], want.CF2[j][c]}, {ref.EF2[j][c], want.EF2[j][c]}} {
				if math.Abs(p[0]-p[1]) > n*0x1p-53*math.Abs(p[1]) {
					t.Fatalf("cluster %d dim %d: %v vs naive %v", c, j, p[0], p[1])
				}
			}
		}
	}
	for _, w := range []int{2, 3, 8} {
		got, err := Reduce(means, sds, assign, q, w)
		if err != nil {
			t.Fatal(err)
		}
		assertSameTuples(t, got, ref)
	}
	certain, err := Reduce(means, nil, assign, q, 2)
	if err != nil {
		t.Fatal(err)
	}
	for j := range r {
		for c := range q {
			if certain.EF2[j][c] != 0 {
				t.Fatalf("nil sds gave EF2 %v", certain.EF2[j][c])
			}
		}
	}
	if _, err := Reduce(means, sds, assign[:n-1], q, 1); err == nil {
		t.Error("short assignment accepted")
	}
}

// assertSameTuples requires bit-identical tuples.
func assertSameTuples(t *testing.T, got, want *MicroClusters) {
	t.Helper()
	for c := range want.N {
		if got.N[c] != want.N[c] {
			t.Fatalf("cluster %d: n %d vs %d", c, got.N[c], want.N[c])
		}
		for j := range want.CF1 {
			if got.CF1[j][c] != want.CF1[j][c] || got.CF2[j][c] != want.CF2[j][c] || got.EF2[j][c] != want.EF2[j][c] {
				t.Fatalf("cluster %d dim %d differs", c, j)
			}
		}
	}
}

func TestClusterDeterministicAndConsistent(t *testing.T) {
	t.Parallel()
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims = 20000, 4
	d := synth.Three(p)
	ref, refAssign, err := Cluster(d.Cols, d.SD, 40, 4, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{2, 5} {
		mc, assign, err := Cluster(d.Cols, d.SD, 40, 4, 9, w)
		if err != nil {
			t.Fatal(err)
		}
		assertSameTuples(t, mc, ref)
		for i := range assign {
			if assign[i] != refAssign[i] {
				t.Fatalf("workers=%d: row %d assigned %d, workers=1 says %d", w, i, assign[i], refAssign[i])
			}
		}
	}
	if ref.Total() != int64(p.Rows) {
		t.Fatalf("total %d, want %d", ref.Total(), p.Rows)
	}
	// The returned tuples are exactly the reduction of the returned assignment.
	again, err := Reduce(d.Cols, d.SD, refAssign, 40, 2)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTuples(t, again, ref)
	for j := range ref.CF1 {
		for c := range ref.N {
			if dl := ref.Delta(j, c); dl < 0 || math.IsNaN(dl) {
				t.Fatalf("Delta(%d,%d) = %v", j, c, dl)
			}
		}
	}
	other, _, err := Cluster(d.Cols, d.SD, 40, 4, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if other.CF1[0][0] == ref.CF1[0][0] && other.N[0] == ref.N[0] {
		t.Error("seeds 9 and 10 gave the same first cluster")
	}
}

func TestClusterEmptyClusterKeepsAnchor(t *testing.T) {
	t.Parallel()
	// Ten rows at two points: with q = 4 at least two initial centroids coincide, and the
	// duplicates lose every tie to the lower index, so they end empty.
	means := [][]float32{{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}}
	mc, assign, err := Cluster(means, nil, 4, 3, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	empty := 0
	for c := range mc.N {
		if mc.N[c] == 0 {
			empty++
			a0, a1 := mc.Centroid(0, c), mc.Centroid(1, c)
			if !((a0 == 0 && a1 == 0) || (a0 == 1 && a1 == 1)) {
				t.Errorf("empty cluster %d anchored at (%v,%v), not at an initial centroid", c, a0, a1)
			}
			if mc.Delta(0, c) != 0 {
				t.Errorf("empty cluster has Delta %v", mc.Delta(0, c))
			}
		}
	}
	if empty != 2 {
		t.Fatalf("%d empty clusters, want 2 (N=%v assign=%v)", empty, mc.N, assign)
	}
	// Identical members: the spread terms cancel to (at most rounding-) zero, clamped >= 0.
	for c := range mc.N {
		if mc.N[c] > 0 && mc.Delta(0, c) != 0 {
			t.Errorf("cluster %d of identical points has Delta %v", c, mc.Delta(0, c))
		}
	}
}

func TestClusterRejectsBadInput(t *testing.T) {
	t.Parallel()
	good := [][]float32{{0, 1, 2}, {3, 4, 5}}
	cases := []struct {
		name  string
		means [][]float32
		sds   [][]float32
		q, it int
	}{
		{"no dims", nil, nil, 1, 1},
		{"ragged", [][]float32{{0, 1}, {0}}, nil, 1, 1},
		{"q > n", good, nil, 4, 1},
		{"q 0", good, nil, 0, 1},
		{"iterations 0", good, nil, 2, 0},
		{"NaN", [][]float32{{0, float32(math.NaN()), 1}}, nil, 1, 1},
		{"sds shape", good, [][]float32{{1, 1, 1}}, 1, 1},
	}
	for _, tc := range cases {
		if _, _, err := Cluster(tc.means, tc.sds, tc.q, tc.it, 1, 1); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestStreamingAddRemoveRoundTrip(t *testing.T) {
	t.Parallel()
	base, baseSD := randomCols(5000, 3, 21)
	mc, _, err := Cluster(base, baseSD, 25, 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	before := mc.Clone()
	batch, batchSD := randomCols(3000, 3, 22)
	assign := make([]int32, 3000)
	if err := mc.AssignNearest(batch, assign, 2); err != nil {
		t.Fatal(err)
	}
	if err := mc.Add(batch, batchSD, assign); err != nil {
		t.Fatal(err)
	}
	if mc.Total() != 8000 {
		t.Fatalf("total after add %d", mc.Total())
	}
	bsum, _ := Reduce(batch, batchSD, assign, mc.Q(), 1)
	if err := mc.Remove(batch, batchSD, assign); err != nil {
		t.Fatal(err)
	}
	for c := range before.N {
		if mc.N[c] != before.N[c] {
			t.Fatalf("cluster %d: n %d, want %d", c, mc.N[c], before.N[c])
		}
		for j := range before.CF1 {
			for _, v := range [][3]float64{
				{mc.CF1[j][c], before.CF1[j][c], bsum.CF1[j][c]},
				{mc.CF2[j][c], before.CF2[j][c], bsum.CF2[j][c]},
				{mc.EF2[j][c], before.EF2[j][c], bsum.EF2[j][c]},
			} {
				// (a + b) - b with the batch reduced to one b per entry: two roundings, each
				// <= 2^-53 * (|a| + |b|), so the residue is at most 2^-52 * (|a| + |b|).
				if tol := 0x1p-52 * (math.Abs(v[1]) + math.Abs(v[2])); math.Abs(v[0]-v[1]) > tol {
					t.Fatalf("cluster %d dim %d: %v after add+remove, was %v (tol %g)", c, j, v[0], v[1], tol)
				}
			}
		}
	}
	// Removing again takes members the clusters no longer have (or sums that do not match).
	assign2 := make([]int32, 3000)
	for i := range assign2 {
		assign2[i] = 0
	}
	if err := mc.Remove(batch, batchSD, assign2); err == nil {
		t.Error("removing more members than cluster 0 has was accepted")
	}
}

func TestRemoveToEmptyResetsAndAnchors(t *testing.T) {
	t.Parallel()
	means := [][]float32{{0.25, 0.75}}
	mc, _ := New(1, 2)
	assign := []int32{0, 1}
	if err := mc.Add(means, nil, assign); err != nil {
		t.Fatal(err)
	}
	if err := mc.Remove([][]float32{{0.75}}, nil, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if mc.N[1] != 0 || mc.CF1[0][1] != 0 || mc.CF2[0][1] != 0 {
		t.Fatalf("emptied cluster kept sums: n=%d cf1=%v", mc.N[1], mc.CF1[0][1])
	}
	if got := mc.Centroid(0, 1); got != 0.75 {
		t.Fatalf("emptied cluster anchored at %v, want its last centre 0.75", got)
	}
}

// BenchmarkCluster is the paper's default micro-clustering: 1,000,000 x 10, q = 200, 4 passes,
// with the bounded passes (Cluster) and with every row assigned in every pass (clusterPlain).
// Reports seconds per Cluster, CPU seconds and GB/s of means read (4 passes x 2 reads: assign and
// reduce, the nominal traffic of the plain loop, so that both report on the same basis).
func BenchmarkCluster(b *testing.B) {
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims = 1_000_000, 10
	d := synth.One(p)
	for _, bc := range []struct {
		name string
		fn   func(means, sds [][]float32, q, iterations int, seed uint64, workers int) (*MicroClusters, []int32, error)
	}{{"bounded", Cluster}, {"plain", clusterPlain}} {
		b.Run(bc.name, func(b *testing.B) {
			start, cpu0 := time.Now(), cputime.Seconds()
			for range b.N {
				if _, _, err := bc.fn(d.Cols, d.SD, 200, 4, 1, 0); err != nil {
					b.Fatal(err)
				}
			}
			sec := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric((cputime.Seconds()-cpu0)/float64(b.N), "cpu-s/cluster")
			bytes := float64(p.Rows*p.Dims*4) * 4 * 2
			b.ReportMetric(sec, "s/cluster")
			b.ReportMetric(bytes/sec/1e9, "GB/s")
		})
	}
}

// BenchmarkAssign isolates one assignment pass (1,000,000 x 10 against 200 centroids).
func BenchmarkAssign(b *testing.B) {
	means, _ := randomCols(1_000_000, 10, 1)
	cent, _ := randomCols(200, 10, 2)
	out := make([]int32, 1_000_000)
	for b.Loop() {
		if err := Assign(means, cent, out, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(out))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(len(out)*200*10), "ns/row-centroid-dim")
}
