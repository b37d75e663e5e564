//go:build cuda

package accel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// TestExactWeightsGPUMatchesCPU: the exact weights (topn --label-column) on the GPU (the all-rows
// pass) are bit-identical to solvingset.Weights, also with duplicated rows (a duplicate at
// another index is a neighbour at distance 0, the row itself is not), and k above the kernel's
// limit falls back to the CPU with the same result.
func TestExactWeightsGPUMatchesCPU(t *testing.T) {
	dev := openGPU(t)
	r := rand.New(rand.NewPCG(7, 8))
	const n = 4000
	cols := make([][]float32, 3)
	for j := range cols {
		cols[j] = make([]float32, n)
		for i := range cols[j] {
			cols[j][i] = float32(r.NormFloat64())
		}
		for i := 0; i < n; i += 10 {
			cols[j][i] = cols[j][i/10] // every tenth row repeats an earlier one
		}
	}
	for _, k := range []int{50, 300} {
		got, err := dev.Weights(cols, k)
		if err != nil {
			t.Fatal(err)
		}
		want := solvingset.Weights(cols, k, 0)
		bad := 0
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				if bad < 5 {
					t.Errorf("k=%d row %d: got %v, CPU %v", k, i, got[i], want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("k=%d: %d of %d weights differ", k, bad, n)
		}
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Errorf("%d calls fell back to the CPU after a device failure", f)
	}
}

// TestClusterGPUMatchesCPU: micro-clustering on the GPU (Device.Cluster, the passes of gpukern.Cluster
// from host-kept centres) gives microcluster.Cluster's clusters, anchors and
// assignment exactly: with and without uncertainty, and on data with few distinct rows, where
// clusters empty and keep their anchors.
func TestClusterGPUMatchesCPU(t *testing.T) {
	dev := openGPU(t)
	r := rand.New(rand.NewPCG(9, 10))
	const n, dims = 20000, 5
	means, sds := make([][]float32, dims), make([][]float32, dims)
	for j := range means {
		means[j], sds[j] = make([]float32, n), make([]float32, n)
		for i := range means[j] {
			means[j][i] = float32(r.NormFloat64())
			sds[j][i] = float32(r.Float64())
		}
	}
	few := make([][]float32, dims) // 40 distinct rows, q = 60 clusters: some must empty
	for j := range few {
		few[j] = make([]float32, n)
		for i := range few[j] {
			few[j][i] = means[j][i%40]
		}
	}
	cases := []struct {
		name       string
		means, sds [][]float32
		q, iters   int
	}{
		{"uncertain", means, sds, 200, 4},
		{"certain", means, nil, 50, 3},
		{"empty clusters", few, nil, 60, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantMC, wantA, err := microcluster.Cluster(c.means, c.sds, c.q, c.iters, 3, 0)
			if err != nil {
				t.Fatal(err)
			}
			gotMC, gotA, err := dev.Cluster(c.means, c.sds, c.q, c.iters, 3)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotA, wantA) {
				t.Error("assignments differ")
			}
			if !reflect.DeepEqual(gotMC, wantMC) {
				t.Error("micro-clusters differ")
			}
		})
	}
	if _, _, err := dev.Cluster(means, nil, n+1, 2, 3); err == nil {
		t.Error("q > rows accepted")
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Errorf("%d calls fell back to the CPU: the GPU path was not the one compared", f)
	}
}

// openGPU opens the GPU or skips; the test fails if a call it compares fell back to the CPU.
func openGPU(t testing.TB) *Device {
	t.Helper()
	dev, err := Open("cuda", zerolog.Nop(), Options{})
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestModelWeightsResident: scoring batches against models whose points stay resident gives
// solvingset.KNNWeights' weights bit for bit, across more models than stay resident (the least
// recently used is freed and uploaded again when it comes back), with batches of varying sizes.
func TestModelWeightsResident(t *testing.T) {
	dev := openGPU(t)
	r := rand.New(rand.NewPCG(11, 12))
	cols := func(rows, dims int) [][]float32 {
		c := make([][]float32, dims)
		for j := range c {
			c[j] = make([]float32, rows)
			for i := range c[j] {
				c[j][i] = float32(r.Float64())
			}
		}
		return c
	}
	var models []*solvingset.Model
	for i := range maxResidentPointSets + 2 {
		models = append(models, &solvingset.Model{Points: cols(300+97*i, 8), K: 5 + 7*i, WStar: math.Inf(1)})
	}
	order := []int{0, 1, 0, 2, 3, 4, 5, 0, 1, 5, 5, 2}
	for step, mi := range order {
		m := models[mi]
		Q := cols(50+31*step, 8)
		want := make([]float64, len(Q[0]))
		solvingset.KNNWeights(m.Points, Q, m.K, 0, want)
		got := make([]float64, len(Q[0]))
		if err := dev.ModelWeights(m, Q, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("step %d (model %d): query %d: GPU %v, CPU %v", step, mi, i, got[i], want[i])
			}
		}
	}
	if n := len(dev.points.sets); n != maxResidentPointSets {
		t.Errorf("%d point sets resident, want %d", n, maxResidentPointSets)
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Errorf("%d calls fell back to the CPU: the GPU path was not the one compared", f)
	}
}

// TestScoreBatchMatchesSteps: one ScoreBatch call gives what DetectRecords and ModelWeights give
// called one by one on the GPU (density verdicts equal, weights bit for bit the CPU's), without
// falling back.
func TestScoreBatchMatchesSteps(t *testing.T) {
	dev := openGPU(t)
	r := rand.New(rand.NewPCG(13, 14))
	const n, dims = 3000, 5
	means, sds := make([][]float32, dims), make([][]float32, dims)
	for j := range means {
		means[j], sds[j] = make([]float32, n), make([]float32, n)
		for i := range means[j] {
			means[j][i] = float32(r.Float64())
			sds[j][i] = float32(r.Float64() / 20)
		}
	}
	mc, _, err := microcluster.Cluster(means, sds, 40, 3, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := density.Bandwidths(mc)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := density.NewModel(mc, h)
	if err != nil {
		t.Fatal(err)
	}
	S := &solvingset.Model{Points: means, K: 50, WStar: math.Inf(1)}
	R := &solvingset.Model{Points: sds, K: 100, WStar: math.Inf(1)}
	q, qs := make([][]float32, dims), make([][]float32, dims)
	for j := range q {
		q[j], qs[j] = means[j][:1000], sds[j][:1000]
	}
	p := density.Params{Eta: 0.5, Delta: 0.5, Samples: 100, Mode: density.Independent, Seed: 1, Exact: true} // (Samples: checked, unused by the exact method)
	wantV := make([]density.Verdict, 1000)
	if err := dev.DetectRecords(dm, mc, q, qs, p, wantV); err != nil {
		t.Fatal(err)
	}
	wantS, wantR := make([]float64, 1000), make([]float64, 1000)
	solvingset.KNNWeights(S.Points, q, S.K, 0, wantS)
	solvingset.KNNWeights(R.Points, qs, R.K, 0, wantR)
	dens := &density.Scoring{Model: dm, Clusters: mc, Means: q, SDs: qs, Params: p, Out: make([]density.Verdict, 1000)}
	knn := []solvingset.Scoring{{Model: S, Queries: q, Out: make([]float64, 1000)}, {Model: R, Queries: qs, Out: make([]float64, 1000)}}
	if err := dev.ScoreBatch(dens, knn); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dens.Out, wantV) {
		t.Error("density verdicts differ from DetectRecords'")
	}
	for i := range wantS {
		if math.Float64bits(knn[0].Out[i]) != math.Float64bits(wantS[i]) || math.Float64bits(knn[1].Out[i]) != math.Float64bits(wantR[i]) {
			t.Fatalf("query %d: weights %v %v, CPU %v %v", i, knn[0].Out[i], knn[1].Out[i], wantS[i], wantR[i])
		}
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Errorf("%d calls fell back to the CPU: the GPU path was not the one compared", f)
	}
}

// TestSolvingSetGPUMatchesCPU: accel's SolvingSet on the GPUs there are (one GPU, or the
// distributed solving set over every GPU at multiGPURows rows and more) returns the CPU twin's
// top-n with bit-identical weights and w*, and neither path fell back.
func TestSolvingSetGPUMatchesCPU(t *testing.T) {
	dev := openGPU(t)
	t.Logf("%d GPU(s)", 1+len(dev.more))
	r := rand.New(rand.NewPCG(9, 10))
	for _, rows := range []int{20_000, multiGPURows} {
		cols := make([][]float32, 2)
		for j := range cols {
			cols[j] = make([]float32, rows)
			for i := range cols[j] {
				cols[j][i] = float32(r.NormFloat64() * float64(1+i%3))
			}
		}
		p := solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}
		want, err := solvingset.SolvingSet(cols, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.SolvingSet(cols, p)
		if err != nil {
			t.Fatal(err)
		}
		if math.Float64bits(got.WStar) != math.Float64bits(want.WStar) || !reflect.DeepEqual(got.Outliers, want.Outliers) {
			t.Errorf("%d rows: GPU w* %v %v, CPU %v %v", rows, got.WStar, got.Outliers, want.WStar, want.Outliers)
		}
		t.Logf("%d rows: %d iterations, |S| %d (CPU %d, %d)", rows, got.Iterations, len(got.SolvingSet), want.Iterations, len(want.SolvingSet))
	}
	if dev.Fallbacks() != 0 {
		t.Errorf("%d fallbacks: a GPU path failed", dev.Fallbacks())
	}
}

// TestScoreBatchConcurrent: scoring calls of several batches at once (the detect stage's
// overlap), against more models than stay resident, give solvingset.KNNWeights' weights bit
// for bit: a model's points in use by one call are not freed by another's upload.
func TestScoreBatchConcurrent(t *testing.T) {
	dev := openGPU(t)
	r := rand.New(rand.NewPCG(21, 22))
	cols := func(rows int) [][]float32 {
		c := make([][]float32, 8)
		for j := range c {
			c[j] = make([]float32, rows)
			for i := range c[j] {
				c[j][i] = float32(r.Float64())
			}
		}
		return c
	}
	const callers, calls = 2*maxResidentPointSets + 1, 12
	models := make([]*solvingset.Model, callers)
	queries := make([][][]float32, callers)
	wants := make([][]float64, callers)
	for i := range models {
		models[i] = &solvingset.Model{Points: cols(2000 + 101*i), K: 10, WStar: math.Inf(1)}
		queries[i] = cols(500)
		wants[i] = make([]float64, 500)
		solvingset.KNNWeights(models[i].Points, queries[i], models[i].K, 0, wants[i])
	}
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			for range calls {
				got := make([]float64, 500)
				if err := dev.ScoreBatch(nil, []solvingset.Scoring{{Model: models[i], Queries: queries[i], Out: got}}); err != nil {
					errs <- err
					return
				}
				for q := range got {
					if math.Float64bits(got[q]) != math.Float64bits(wants[i][q]) {
						errs <- fmt.Errorf("model %d, query %d: GPU %v, CPU %v", i, q, got[q], wants[i][q])
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(dev.points.sets); n > maxResidentPointSets {
		t.Errorf("%d point sets resident after the calls, want at most %d", n, maxResidentPointSets)
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Errorf("%d calls fell back to the CPU: the GPU path was not the one compared", f)
	}
}

// TestKeyedSelfWeightsGPUMatchesCPU: the key builds' k-NN calibrations on the GPU are
// solvingset.KNNWeightsSelf's bits, every set in one call, and k past the kernels (65) runs on
// the CPU with the same bits.
func TestKeyedSelfWeightsGPUMatchesCPU(t *testing.T) {
	dev := openGPU(t)
	st, err := dev.KeyedStore(3, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.SelfWeightsCovered(3, 10) || st.SelfWeightsCovered(3, 65) {
		t.Fatal("SelfWeightsCovered: want the GPU for k = 10, not for k = 65")
	}
	sets, ks, out := keyBuildSets(rand.New(rand.NewPCG(4, 23)))
	ks[7] = 65
	for _, k := range [][]int{ks[:7], ks} {
		n := len(k)
		if err := st.SelfWeights(sets[:n], k, out[:n]); err != nil {
			t.Fatal(err)
		}
		checkSelfWeights(t, fmt.Sprintf("%d sets", n), sets[:n], k, out[:n])
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Fatalf("%d calls fell back to the CPU", f)
	}
}

// TestKeyedSelfWeightsNotFiniteOnCPU: a set with a point not finite (NaN, +-inf) gets
// solvingset.KNNWeightsSelf's bits: the kernel leaves point i out by its index and never keeps
// a NaN distance, KNNWeightsSelf leaves out a zero distance (none where point i's own distance
// is NaN) and selects among the NaNs, so such a call runs on the CPU (not a device failure).
func TestKeyedSelfWeightsNotFiniteOnCPU(t *testing.T) {
	dev := openGPU(t)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		sets, ks, out := keyBuildSets(rand.New(rand.NewPCG(4, 24)))
		sets[3][1][5] = bad
		if err := dev.KeyedSelfWeights(sets, ks, out); err != nil {
			t.Fatal(err)
		}
		checkSelfWeights(t, fmt.Sprintf("a point at %v", bad), sets, ks, out)
	}
	if f := dev.Fallbacks(); f != 0 {
		t.Fatalf("%d calls fell back to the CPU: a set not finite is not a device failure", f)
	}
}

// TestKeyedStoreGPUMatchesCPU: a GPU store's scores are the CPU's bits, given as one part and
// in parts whose keys recur: records not finite and tails past the window (the
// host's share of a device call) included, with no fallback.
func TestKeyedStoreGPUMatchesCPU(t *testing.T) {
	dev, f := gpuKeyedStoreFixture(t)
	f.checkScores(t)
	if fb := dev.Fallbacks(); fb != 0 {
		t.Fatalf("%d calls fell back to the CPU: the GPU path was not the one compared", fb)
	}
}

// TestKeyedStoreDeviceFailureOnCPU: a device call that fails (here the device's store freed
// behind the store's back: every slot then holds no model there) is counted as a fallback, and
// the CPU writes every record's scores of every part, the CPU's bits.
func TestKeyedStoreDeviceFailureOnCPU(t *testing.T) {
	dev, f := gpuKeyedStoreFixture(t)
	if err := f.st.gpu.Free(); err != nil {
		t.Fatal(err)
	}
	tail, dist := f.scoreInParts(t)
	f.check(t, "after a failed device call", tail, dist)
	if fb := dev.Fallbacks(); fb != 1 {
		t.Fatalf("%d fallbacks counted, want the one failed call", fb)
	}
}

// gpuKeyedStoreFixture is newKeyedStoreFixture's 3,000 records on a GPU store.
func gpuKeyedStoreFixture(t *testing.T) (*Device, *keyedStoreFixture) {
	t.Helper()
	dev := openGPU(t)
	f := newKeyedStoreFixture(t, dev, 3000)
	if f.st.gpu == nil {
		t.Fatal("the store is not on the GPU")
	}
	return dev, f
}
