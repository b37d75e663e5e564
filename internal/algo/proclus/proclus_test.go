package proclus

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// recovery maps each found cluster to its majority planted cluster and returns the mapping and
// the purity (fraction of clustered rows whose planted label is their cluster's majority).
func recovery(r *Result, pl *Planted) (major []int32, purity float64) {
	k := len(r.Medoids)
	cnt := make([]map[int32]int, k)
	for i := range cnt {
		cnt[i] = map[int32]int{}
	}
	clustered := 0
	for row, a := range r.Assignment {
		if a >= 0 {
			cnt[a][pl.Label[row]]++
			clustered++
		}
	}
	hit := 0
	major = make([]int32, k)
	for i, m := range cnt {
		best, bn := int32(-2), -1
		for lab, n := range m {
			if n > bn || (n == bn && lab < best) {
				best, bn = lab, n
			}
		}
		major[i] = best
		hit += max(bn, 0)
	}
	return major, float64(hit) / float64(clustered)
}

// TestPlantedClustersRecovered: 5 clusters, each Gaussian (sd 2 on a 0-100 range) in its own
// 4 of 15 dimensions and uniform elsewhere, 2% uniform outliers. With this seed PROCLUS finds
// every planted cluster once, with exactly its dimensions, nearly pure, and every flagged
// outlier is a planted one. (PROCLUS is a randomised local search: other seeds may end in a
// local optimum with a higher cost; see TestLowerCostIsBetterRecovery.)
func TestPlantedClustersRecovered(t *testing.T) {
	pl, err := GeneratePlanted(20000, 15, 5, 4, 2, 0.02, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := Default()
	p.K, p.L, p.Seed = 5, 4, 3
	r, err := Run(pl.Cols, p)
	if err != nil {
		t.Fatal(err)
	}
	major, purity := recovery(r, pl)
	seen := map[int32]bool{}
	for i, m := range major {
		if m < 0 || seen[m] {
			t.Fatalf("cluster %d maps to planted %d (majorities %v): not a one-to-one recovery", i, m, major)
		}
		seen[m] = true
		if !slices.Equal(r.Dims[i], pl.Dims[m]) {
			t.Errorf("cluster %d (planted %d): dims %v, planted %v", i, m, r.Dims[i], pl.Dims[m])
		}
	}
	// Each cluster's rows include the ~2% uniform outliers that fall into its subspace box and
	// are not flagged (they are near a medoid in every subspace dimension): purity >= 0.97.
	if purity < 0.97 {
		t.Errorf("purity %.4f < 0.97", purity)
	}
	flagged := 0
	for row, a := range r.Assignment {
		if a < 0 {
			flagged++
			if pl.Label[row] >= 0 {
				t.Errorf("row %d flagged as outlier but planted in cluster %d", row, pl.Label[row])
			}
		}
	}
	if flagged == 0 || flagged != r.Outliers {
		t.Errorf("flagged %d, Outliers %d", flagged, r.Outliers)
	}
	sum := r.Outliers
	for _, s := range r.Sizes {
		sum += s
	}
	if sum != 20000 {
		t.Errorf("sizes + outliers = %d, want 20000", sum)
	}
}

// TestLowerCostIsBetterRecovery: across seeds, the run with the lowest cost recovers the planted
// subspaces (the cost is the objective PROCLUS minimises, so this checks that the objective and
// the recovery agree).
func TestLowerCostIsBetterRecovery(t *testing.T) {
	pl, _ := GeneratePlanted(8000, 12, 4, 3, 2, 0.01, 11)
	var best *Result
	for seed := uint64(1); seed <= 6; seed++ {
		p := Default()
		p.K, p.L, p.Seed = 4, 3, seed
		r, err := Run(pl.Cols, p)
		if err != nil {
			t.Fatal(err)
		}
		if best == nil || r.Cost < best.Cost {
			best = r
		}
	}
	major, purity := recovery(best, pl)
	for i, m := range major {
		if m < 0 || !slices.Equal(best.Dims[i], pl.Dims[m]) {
			t.Errorf("lowest-cost run: cluster %d -> planted %d dims %v (planted dims %v)", i, m, best.Dims[i], pl.Dims)
		}
	}
	if purity < 0.97 {
		t.Errorf("lowest-cost run purity %.4f", purity)
	}
}

// TestDeterministic: the same seed gives the same result, whatever the worker count (the sums
// are exact integers), and another seed draws another sample.
func TestDeterministic(t *testing.T) {
	pl, _ := GeneratePlanted(30000, 10, 4, 3, 3, 0.02, 5)
	p := Default()
	p.K, p.L, p.Seed = 4, 3, 9
	a, err := RunEngine(pl.Cols, p, NewCPUEngine(pl.Cols, 1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunEngine(pl.Cols, p, NewCPUEngine(pl.Cols, 7))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("1 and 7 workers differ: cost %v vs %v, medoids %v vs %v", a.Cost, b.Cost, a.Medoids, b.Medoids)
	}
	p.Seed = 10
	c, _ := Run(pl.Cols, p)
	if slices.Equal(a.Medoids, c.Medoids) {
		t.Errorf("seeds 9 and 10 chose the same medoids %v", a.Medoids)
	}
}

// TestLocalityIncrementalExact is theorem 3.2 in fixed point: the sums over the band (-1, a]
// plus (a, b] equal those over (-1, b] exactly, and both equal a brute-force reference.
func TestLocalityIncrementalExact(t *testing.T) {
	pl, _ := GeneratePlanted(5000, 6, 3, 2, 4, 0.05, 2)
	cols := pl.Cols
	sc := Scales(cols)
	e := NewCPUEngine(cols, 3)
	if err := e.Begin(sc, 1); err != nil {
		t.Fatal(err)
	}
	m := rowOf(cols, 17)
	a, b := float32(900), float32(2500)
	run := func(lo, hi float32) ([]int64, int64) {
		s, c := make([]int64, len(cols)), make([]int64, 1)
		if err := e.Locality([]Query{{Medoid: m, Lo: lo, Hi: hi}}, s, c); err != nil {
			t.Fatal(err)
		}
		return s, c[0]
	}
	s1, c1 := run(-1, a)
	s2, c2 := run(a, b)
	s3, c3 := run(-1, b)
	ref, refc := make([]int64, len(cols)), int64(0)
	for p := range cols[0] {
		dd := 0.0
		for j := range cols {
			dd += (float64(cols[j][p]) - float64(m[j])) * (float64(cols[j][p]) - float64(m[j]))
		}
		// float64 reference distance; the float32 one differs by < 1e-4 relative, and no row of
		// this data lies that close to the radius b (checked below through the counts).
		if dd <= float64(b) {
			refc++
			for j := range cols {
				ref[j] += Fixed(math.Abs(float64(cols[j][p])-float64(m[j])), sc[j])
			}
		}
	}
	if c1+c2 != c3 || c3 != refc {
		t.Fatalf("counts %d + %d vs %d, reference %d", c1, c2, c3, refc)
	}
	for j := range cols {
		if s1[j]+s2[j] != s3[j] || s3[j] != ref[j] {
			t.Errorf("dim %d: %d + %d vs %d, reference %d", j, s1[j], s2[j], s3[j], ref[j])
		}
	}
	if c1 == 0 || c2 == 0 {
		t.Fatalf("degenerate bands: %d, %d rows", c1, c2)
	}
}

func TestFindDimensions(t *testing.T) {
	X := [][]float64{
		{1, 9, 9, 9, 2},   // Z lowest at 0, 4
		{5, 5, 5, 5, 5},   // sigma = 0: Z = 0 everywhere, ties to the lowest dims 0, 1
		{9, 0.5, 9, 9, 9}, // 1 very low, then ties at 9 -> dim 0
	}
	got := FindDimensions(X, 3) // 9 in all
	if len(got[0])+len(got[1])+len(got[2]) != 9 {
		t.Fatalf("total %v, want 9 dimensions", got)
	}
	if !slices.Equal(got[1][:2], []int{0, 1}) || !slices.Contains(got[0], 0) || !slices.Contains(got[0], 4) || !slices.Contains(got[2], 1) {
		t.Errorf("got %v", got)
	}
	for _, g := range got {
		if len(g) < 2 || !slices.IsSorted(g) {
			t.Errorf("subspace %v: need >= 2 dims, ascending", g)
		}
	}
	// l = 1 still gives 2 per medoid; d = 1 gives the one dimension.
	if g := FindDimensions(X, 1); len(g[0]) != 2 || len(g[1]) != 2 || len(g[2]) != 2 {
		t.Errorf("l=1: %v", g)
	}
	if g := FindDimensions([][]float64{{3}, {4}}, 1); !reflect.DeepEqual(g, [][]int{{0}, {0}}) {
		t.Errorf("d=1: %v", g)
	}
	// l = d: every dimension.
	if g := FindDimensions(X, 5); !slices.Equal(g[2], []int{0, 1, 2, 3, 4}) {
		t.Errorf("l=d: %v", g)
	}
}

// TestEdgeCases: one dimension, one cluster, duplicates only (every distance 0, sigma = 0),
// k = rows; each runs, accounts for every row, and Assign reproduces the assignment.
func TestEdgeCases(t *testing.T) {
	oneDim := [][]float32{make([]float32, 300)}
	for i := range oneDim[0] {
		oneDim[0][i] = float32(i%3) * 50
	}
	dup := [][]float32{make([]float32, 100), make([]float32, 100), make([]float32, 100)}
	for j := range dup {
		for i := range dup[j] {
			dup[j][i] = 7
		}
	}
	small := [][]float32{{0, 1, 10, 11, 50}, {0, 1, 10, 11, 50}}
	cases := []struct {
		name string
		cols [][]float32
		k, l int
	}{
		{"one dimension", oneDim, 3, 1},
		{"one cluster", small, 1, 2},
		{"all duplicates", dup, 4, 2},
		{"k = rows", small, 5, 1},
	}
	for _, c := range cases {
		p := Default()
		p.K, p.L = c.k, c.l
		r, err := Run(c.cols, p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := len(c.cols[0])
		total := r.Outliers
		for _, s := range r.Sizes {
			total += s
		}
		if total != n || len(r.Medoids) != c.k || math.IsNaN(r.Cost) {
			t.Errorf("%s: %d rows accounted of %d, %d medoids, cost %v", c.name, total, n, len(r.Medoids), r.Cost)
		}
		re := make([]int32, n)
		if err := r.Assign(c.cols, re); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(re, r.Assignment) {
			t.Errorf("%s: Assign on the training rows differs from the assignment", c.name)
		}
		if c.k == 1 && r.Outliers != 0 {
			t.Errorf("%s: k=1 has no other medoid, so no outliers; got %d", c.name, r.Outliers)
		}
	}
}

// TestAssignNewRecords: Assign on fresh records from the same generator puts most of each planted
// cluster's rows into the cluster that holds it in training, and returns its subspace.
func TestAssignNewRecords(t *testing.T) {
	train, _ := GeneratePlanted(20000, 15, 5, 4, 2, 0.02, 3)
	p := Default()
	p.K, p.L, p.Seed = 5, 4, 3
	r, err := Run(train.Cols, p)
	if err != nil {
		t.Fatal(err)
	}
	major, _ := recovery(r, train)
	// The same seed draws the same centres and subspaces first; without outliers the rows differ.
	test, _ := GeneratePlanted(2000, 15, 5, 4, 2, 0, 3)
	got := make([]int32, 2000)
	if err := r.Assign(test.Cols, got); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i, a := range got {
		if a >= 0 && major[a] == test.Label[i] {
			ok++
			if !slices.Equal(r.Subspace(int(a)), test.Dims[test.Label[i]]) {
				t.Fatalf("row %d: subspace %v", i, r.Subspace(int(a)))
			}
		}
	}
	// Training was recovered at purity >= 0.97 (TestPlantedClustersRecovered); new rows of the
	// same clusters, without outliers, land at least as well.
	if float64(ok) < 0.97*2000 {
		t.Errorf("%d of 2000 new records in their planted cluster", ok)
	}
	if r.Subspace(-1) != nil {
		t.Error("Subspace(-1) must be nil")
	}
	// An outlier still has a nearest cluster (the density test's subspace), and names come
	// from the features.
	far := make([]float32, 15)
	for j := range far {
		far[j] = 1e4
	}
	if c, out := r.Nearest(far); !out || c < 0 || c >= 5 || r.AssignRecord(far) != -1 {
		t.Errorf("a record far from every medoid: Nearest %d, %v; AssignRecord %d", c, out, r.AssignRecord(far))
	}
	names := make([]string, 15)
	for j := range names {
		names[j] = fmt.Sprintf("f%d", j)
	}
	if got := r.SubspaceNames(0, names); len(got) != len(r.Dims[0]) || got[0] != names[r.Dims[0][0]] {
		t.Errorf("SubspaceNames(0) = %v for dims %v", got, r.Dims[0])
	}
	if err := r.Assign(test.Cols[:3], got); err == nil {
		t.Error("Assign with 3 of 15 dimensions must fail")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		mod  func(*Params)
		want string
	}{
		{func(p *Params) { p.K = 0 }, "k must be in [1, 100]"},
		{func(p *Params) { p.K = 101 }, "k must be in [1, 100]"},
		{func(p *Params) { p.L = 0 }, "l must be in [1, 15]"},
		{func(p *Params) { p.L = 16 }, "l must be in [1, 15]"},
		{func(p *Params) { p.B = 200 }, "b must be in [1, a=100]"},
		{func(p *Params) { p.MinDev = -1 }, "min-dev"},
		{func(p *Params) { p.ItrPat = 0 }, "itr-pat"},
		{func(p *Params) { p.Restarts = 0 }, "restarts must be in [1, 1000], got 0"},
		{func(p *Params) { p.Restarts = MaxRestarts + 1 }, "restarts must be in [1, 1000], got 1001"},
	}
	for _, c := range cases {
		p := Default()
		c.mod(&p)
		err := p.Validate(100, 15)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", p, err, c.want)
		}
	}
	if err := Default().Validate(100, 15); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if _, err := Run([][]float32{{1, float32(math.NaN())}}, Params{K: 1, L: 1, A: 1, B: 1, ItrPat: 1}); err == nil || !strings.Contains(err.Error(), "row 1 dimension 0") {
		t.Errorf("NaN: %v", err)
	}
	// The shape is microcluster.CheckColumns's check, its errors under proclus's sentinel.
	for _, c := range []struct {
		cols [][]float32
		want string
	}{
		{nil, "proclus: inconsistent shapes: no dimensions"},
		{[][]float32{{1, 2}, {1}}, "proclus: inconsistent shapes: dimension 1 has 1 rows, dimension 0 has 2"},
	} {
		if _, err := Prepare(c.cols); err == nil || err.Error() != c.want || !errors.Is(err, errShape) {
			t.Errorf("Prepare(%v): %v, want %q wrapping errShape", c.cols, err, c.want)
		}
	}
}

// TestFixedPointSumsAccurate checks the fixed-point claim against a direct float64 reference on
// data of very different magnitudes per dimension: every engine sum (centroid sums, spreads)
// converted back is within rows * 2^-40 * max|x_j| of the reference (Scales documents a term
// error below 2^-40 of max|x_j| at a million rows; fewer rows give finer scales) plus the
// reference's own float64 rounding (rows * 2^-52 of the sum). Then the worst case for overflow:
// every term at its bound 2*max|x| in one cluster sums to just under 2^62 and must not wrap.
func TestFixedPointSumsAccurate(t *testing.T) {
	const n = 20000
	cols := make([][]float32, 4)
	mags := []float64{1e-6, 1, 1e3, 3e7}
	for j := range cols {
		cols[j] = make([]float32, n)
		for i := range cols[j] {
			cols[j][i] = float32(mags[j] * math.Sin(float64(i*(j+3))+0.5)) // signs mixed
		}
	}
	sc := Scales(cols)
	e := NewCPUEngine(cols, 2)
	if err := e.Begin(sc, 1); err != nil {
		t.Fatal(err)
	}
	centers := [][]float32{rowOf(cols, 10), rowOf(cols, 20000-7)}
	off, dims := []int{0, 4, 8}, []int{0, 1, 2, 3, 0, 1, 2, 3}
	counts, sums := make([]int64, 2), make([]int64, 8)
	if err := e.Assign(centers, off, dims, nil, counts, sums); err != nil {
		t.Fatal(err)
	}
	asg := make([]int32, n)
	if err := e.Assignment(asg); err != nil {
		t.Fatal(err)
	}
	center := []float64{0.1e-6, 0.3, -200, 1e6, 0, 0, 0, 0}
	spread := make([]int64, 8)
	if err := e.Spread(center, off, dims, spread); err != nil {
		t.Fatal(err)
	}
	for tt, j := range dims {
		i := int32(tt / 4)
		refSum, refSpread, absSum := 0.0, 0.0, 0.0
		for p := range n {
			if asg[p] == i {
				x := float64(cols[j][p])
				refSum += x
				absSum += math.Abs(x)
				refSpread += math.Abs(x - center[tt])
			}
		}
		bound := func(ref float64) float64 { return float64(n)*0x1p-40*mags[j] + float64(n)*0x1p-52*ref }
		if d := math.Abs(Unfixed(sums[tt], sc[j]) - refSum); d > bound(absSum) {
			t.Errorf("pair %d (dim %d): centroid sum off by %g > %g", tt, j, d, bound(absSum))
		}
		if d := math.Abs(Unfixed(spread[tt], sc[j]) - refSpread); d > bound(refSpread) {
			t.Errorf("pair %d (dim %d): spread off by %g > %g", tt, j, d, bound(refSpread))
		}
	}
	if counts[0]+counts[1] != n || counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("counts %v", counts)
	}

	const m = 1<<14 - 1 // the most rows for this scale (rows < 2^14)
	same := [][]float32{slices.Repeat([]float32{1000}, m)}
	sc1 := Scales(same)
	e1 := NewCPUEngine(same, 2)
	if err := e1.Begin(sc1, 1); err != nil {
		t.Fatal(err)
	}
	c1, s1 := make([]int64, 1), make([]int64, 1)
	if err := e1.Assign([][]float32{{1000}}, []int{0, 1}, []int{0}, nil, c1, s1); err != nil {
		t.Fatal(err)
	}
	sp := make([]int64, 1)
	if err := e1.Spread([]float64{-1000}, []int{0, 1}, []int{0}, sp); err != nil {
		t.Fatal(err)
	}
	if want := float64(m) * 2000; sp[0] <= 0 || math.Abs(Unfixed(sp[0], sc1[0])-want) > 1e-6*want {
		t.Errorf("worst-case spread %d -> %g, want %g (overflow?)", sp[0], Unfixed(sp[0], sc1[0]), want)
	}
}
