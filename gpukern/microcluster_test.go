package gpukern_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// TestAssignParity: the GPU assignment equals microcluster.Assign exactly (same float32 distance
// sequence, ties to the lowest index).
func TestAssignParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name       string
		n, dim, q  int
		dupCentres bool // centroids repeated: exact distance ties
	}{
		{"q=1", 1000, 3, 1, false},
		{"fewer rows than a block", 100, 5, 40, false},
		{"q=200 d=10", 20011, 10, 200, false},
		{"q not multiple of 32", 5000, 4, 77, false},
		{"multi-tile q=300 d=50", 3000, 50, 300, false},
		{"d=1", 4097, 1, 33, false},
		{"tied centroids", 6000, 2, 64, true},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t, uint64(200+ci))
			X := testcols.Uniform(r, c.n, c.dim)
			C := testcols.Uniform(r, c.q, c.dim)
			if c.dupCentres {
				for j := range C {
					for i := range C[j] {
						C[j][i] = C[j][i%5]
					}
				}
			}
			want := make([]int32, c.n)
			for i := range want {
				want[i] = -1
			}
			if err := microcluster.Assign(X, C, want, 0); err != nil {
				t.Fatal(err)
			}
			got := make([]int32, c.n)
			for i := range got {
				got[i] = -7 // poison
			}
			if err := gpukern.Assign(d, X, C, got); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("row %d: GPU cluster %d, CPU %d", i, got[i], want[i])
			}
		})
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// sameFeatures fails the test unless the GPU features equal the CPU tuples bit for bit.
func sameFeatures(t *testing.T, got *gpukern.ClusterFeatures, want *microcluster.MicroClusters) {
	t.Helper()
	if !slices.Equal(got.N, want.N) {
		t.Fatalf("counts differ: GPU %v, CPU %v", got.N[:min(8, len(got.N))], want.N[:min(8, len(want.N))])
	}
	for _, f := range []struct {
		name string
		g, w [][]float64
	}{{"CF1", got.CF1, want.CF1}, {"CF2", got.CF2, want.CF2}, {"EF2", got.EF2, want.EF2}} {
		for j := range f.w {
			for c := range f.w[j] {
				if math.Float64bits(f.g[j][c]) != math.Float64bits(f.w[j][c]) {
					t.Fatalf("%s[%d][%d]: GPU %v, CPU %v", f.name, j, c, f.g[j][c], f.w[j][c])
				}
			}
		}
	}
}

// TestReduceParity: the GPU features equal microcluster.Reduce bit for bit, because both sum the
// same chunks in row order and add the chunk sums in chunk order.
func TestReduceParity(t *testing.T) {
	d := openDevice(t)
	cases := []struct {
		name      string
		n, dim, q int
		certain   bool // sds nil
		outside   bool // some rows assigned -1 or q (no cluster)
	}{
		{"one chunk", 5000, 3, 10, false, false},
		{"many chunks", 700001, 4, 200, false, true},
		{"certain data", 100000, 2, 50, true, false},
		{"q=1024 max", 30000, 2, 1024, false, true},
		{"empty clusters", 9000, 5, 300, false, false},
		{"skewed", 50000, 3, 700, false, true}, // most rows in cluster 0: long runs per sorted tile
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRand(t, uint64(300+ci))
			X := testcols.Uniform(r, c.n, c.dim)
			var E [][]float32
			if !c.certain {
				E = testcols.Uniform(r, c.n, c.dim)
			}
			A := make([]int32, c.n)
			for i := range A {
				A[i] = int32(r.IntN(c.q))
				if c.name == "empty clusters" {
					A[i] = int32(r.IntN(c.q / 3)) // two thirds of the clusters get no row
				}
				if c.name == "skewed" && r.IntN(10) != 0 {
					A[i] = 0
				}
				if c.outside && r.IntN(50) == 0 {
					A[i] = []int32{-1, int32(c.q)}[r.IntN(2)]
				}
			}
			want, err := microcluster.Reduce(X, E, A, c.q, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gpukern.Reduce(d, X, E, A, c.q, microcluster.ReduceChunkRows(len(A)))
			if err != nil {
				t.Fatal(err)
			}
			sameFeatures(t, got, want)
		})
	}
}

// TestReduceChunksParity: Reduce with chunkings other than microcluster's (chunks shorter than, equal
// to and not a multiple of the 2048-row sort tile of cf_sort, so that chunks share tiles, and one
// chunk for everything), with q below and above 256 (cf_reduce_chunk_o1 and _o4), equals a plain
// row-order reference with the same chunks bit for bit.
func TestReduceChunksParity(t *testing.T) {
	d := openDevice(t)
	const n, dim = 10000, 2
	r := newRand(t, 350)
	X := testcols.Uniform(r, n, dim)
	E := testcols.Uniform(r, n, dim)
	for _, q := range []int{37, 600} {
		A := make([]int32, n)
		for i := range A {
			A[i] = int32(r.IntN(q+2)) - 1 // -1 and q: no cluster
		}
		for _, chunk := range []int{1, 31, 1000, 2048, 3000, n} {
			want := chunkedReduce(X, E, A, q, chunk)
			got, err := gpukern.Reduce(d, X, E, A, q, chunk)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("q=%d chunk=%d", q, chunk), func(t *testing.T) { sameFeatures(t, got, want) })
		}
	}
}

// chunkedReduce is the definition Reduce implements: per chunk of chunk rows, each cluster's
// means, squared means and squared sds added in row order, then the chunk sums added in chunk
// order.
func chunkedReduce(X, E [][]float32, A []int32, q, chunk int) *microcluster.MicroClusters {
	m, err := microcluster.New(len(X), q)
	if err != nil {
		panic(err)
	}
	for lo := 0; lo < len(A); lo += chunk {
		hi := min(lo+chunk, len(A))
		for j := range X {
			s1, s2, s3 := make([]float64, q), make([]float64, q), make([]float64, q)
			for i := lo; i < hi; i++ {
				if c := A[i]; c >= 0 && int(c) < q {
					v, e := float64(X[j][i]), float64(E[j][i])
					s1[c] += v
					s2[c] += v * v
					s3[c] += e * e
					if j == 0 {
						m.N[c]++
					}
				}
			}
			for c := range q {
				m.CF1[j][c] += s1[c]
				m.CF2[j][c] += s2[c]
				m.EF2[j][c] += s3[c]
			}
		}
	}
	return m
}

// TestClusterParity runs the passes on resident data and compares them with the same loop on
// the CPU (Assign, Reduce, empty clusters keep their centre, Centroids), bit for bit.
func TestClusterParity(t *testing.T) {
	d := openDevice(t)
	const n, dim, q, iterations = 120000, 6, 200, 4
	r := newRand(t, 400)
	X := testcols.Uniform(r, n, dim)
	E := testcols.Uniform(r, n, dim)
	init := make([][]float32, dim)
	for j := range init {
		init[j] = make([]float32, q)
		for c := range init[j] {
			init[j][c] = X[j][(c*7919)%n]
		}
	}
	// CPU reference: microcluster.Cluster's loop from the same initial centres.
	cent := init
	want := make([]int32, n)
	for i := range want {
		want[i] = -1
	}
	var mc *microcluster.MicroClusters
	for range iterations {
		if err := microcluster.Assign(X, cent, want, 0); err != nil {
			t.Fatal(err)
		}
		var err error
		if mc, err = microcluster.Reduce(X, E, want, q, 0); err != nil {
			t.Fatal(err)
		}
		for j := range dim {
			for c := range q {
				if mc.N[c] == 0 {
					mc.Anchor[j][c] = float64(cent[j][c])
				}
			}
		}
		cent = mc.Centroids()
	}
	xs, err := d.Upload(X)
	if err != nil {
		t.Fatal(err)
	}
	defer xs.Free()
	es, err := d.Upload(E)
	if err != nil {
		t.Fatal(err)
	}
	defer es.Free()
	got := make([]int32, n)
	f, err := gpukern.Cluster(xs, es, init, iterations, microcluster.ReduceChunkRows(len(got)), got)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("row %d: GPU cluster %d, CPU %d", i, got[i], want[i])
	}
	sameFeatures(t, f, mc)
}
