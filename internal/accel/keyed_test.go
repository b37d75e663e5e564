package accel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// TestKeyedStoreOnCPU: without a GPU (and so after a device failure or for a model the kernels do
// not take) a KeyedStore scores every record on the CPU with its slot's model: rank.Tail.Score's
// and solvingset.KNNWeights's bits in R's space, non-finite values included, slots in any order.
func TestKeyedStoreOnCPU(t *testing.T) {
	d := &Device{name: "cpu", log: zerolog.Nop()}
	st, err := d.KeyedModels(2, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := rand.New(rand.NewPCG(4, 21))
	slots := []int32{5, 0, 2}
	tails := make([]*rank.Tail, 3)
	refs := make([]*solvingset.Model, 3)
	centers, units := make([][]float64, 3), make([][]float64, 3)
	for m := range slots {
		cols := [][]float32{make([]float32, 80), make([]float32, 80)}
		for j := range cols {
			for i := range cols[j] {
				cols[j][i] = float32(100*m) + float32(r.NormFloat64())
			}
		}
		tails[m] = rank.NewTail(cols)
		centers[m], units[m] = []float64{float64(100 * m), 0}, []float64{1, 2}
		refs[m] = &solvingset.Model{Points: space(cols, centers[m], units[m]), K: 3 + m}
	}
	if err := st.Install(slots, tails, refs, centers, units); err != nil {
		t.Fatal(err)
	}
	n := 300
	x := [][]float32{make([]float32, n), make([]float32, n)}
	which := make([]int32, n)
	model := make([]int, n)
	for i := range n {
		model[i] = r.IntN(3)
		which[i] = slots[model[i]]
		for j := range x {
			x[j][i] = float32(100*model[i]) + float32(3*r.NormFloat64())
		}
	}
	x[0][7], x[1][9] = float32(math.NaN()), float32(math.Inf(1))
	tail, dist := make([]float64, n), make([]float64, n)
	if err := st.Score(which, x, tail, dist); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := model[i]
		one := [][]float32{x[0][i : i+1], x[1][i : i+1]}
		wt, wd := make([]float64, 1), make([]float64, 1)
		tails[m].Score(one, wt)
		solvingset.KNNWeights(refs[m].Points, space(one, centers[m], units[m]), refs[m].K, 1, wd)
		if math.Float64bits(tail[i]) != math.Float64bits(wt[0]) || math.Float64bits(dist[i]) != math.Float64bits(wd[0]) {
			t.Fatalf("record %d (slot %d): %v %v, the CPU's %v %v", i, which[i], tail[i], dist[i], wt[0], wd[0])
		}
	}
}

// space maps columns to a key's distance space (detect's distanceSpace).
func space(cols [][]float32, center, unit []float64) [][]float32 {
	out := make([][]float32, len(cols))
	for j, c := range cols {
		out[j] = make([]float32, len(c))
		for i, v := range c {
			out[j][i] = float32(max(-gpukern.KeyedLimit, min(gpukern.KeyedLimit, (float64(v)-center[j])/unit[j])))
		}
	}
	return out
}

// keyBuildSets are point sets as the stage's key builds hand them over (a window of 200 in the
// distance space, some copies), and shapes past the kernels (k = 65).
func keyBuildSets(r *rand.Rand) ([][][]float32, []int, [][]float64) {
	var sets [][][]float32
	var ks []int
	var out [][]float64
	for s := range 40 {
		n := 50 + r.IntN(200)
		set := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
		for j := range set {
			for i := range set[j] {
				set[j][i] = float32(r.NormFloat64())
				if i%9 == 4 {
					set[j][i] = set[j][i-1]
				}
			}
		}
		sets, ks, out = append(sets, set), append(ks, []int{10, 1, 40}[s%3]), append(out, make([]float64, n))
	}
	return sets, ks, out
}

// checkSelfWeights fails t unless out[s] holds solvingset.KNNWeightsSelf's bits of each set.
func checkSelfWeights(t *testing.T, what string, sets [][][]float32, ks []int, out [][]float64) {
	t.Helper()
	for s, set := range sets {
		want := make([]float64, len(set[0]))
		solvingset.KNNWeightsSelf(set, ks[s], want)
		for i := range want {
			if math.Float64bits(out[s][i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s: set %d (k=%d) point %d: %v, want %v", what, s, ks[s], i, out[s][i], want[i])
			}
		}
	}
}

// TestKeyedSelfWeightsOnCPU: without a GPU, KeyedSelfWeights is solvingset.KNNWeightsSelf of
// each set; a store's SelfWeights is the device's, and says it is not covered.
func TestKeyedSelfWeightsOnCPU(t *testing.T) {
	d := &Device{name: "cpu", log: zerolog.Nop()}
	sets, ks, out := keyBuildSets(rand.New(rand.NewPCG(4, 22)))
	st, err := d.KeyedStore(3, 256)
	if err != nil {
		t.Fatal(err)
	}
	if st.SelfWeightsCovered(3, 10) {
		t.Fatal("a CPU store claims the device builds")
	}
	if err := st.SelfWeights(sets, ks, out); err != nil {
		t.Fatal(err)
	}
	checkSelfWeights(t, "on the CPU", sets, ks, out)
	if err := d.KeyedSelfWeights(sets[:1], []int{0}, out[:1]); err == nil {
		t.Fatal("k = 0 accepted")
	}
}

// TestKeyedSelfWeightsRaggedSet: a set whose features hold different numbers of points is the
// caller's error, reported as one (not handed to the CPU's KNNWeightsSelf, which panicked on a
// shorter feature, nor to the GPU, whose refusal counted as a device failure and fell back).
func TestKeyedSelfWeightsRaggedSet(t *testing.T) {
	d := &Device{name: "cpu", log: zerolog.Nop()}
	for _, set := range [][][]float32{
		{{1, 2, 3}, {1, 2}},       // a shorter feature
		{{1, 2, 3}, {1, 2, 3, 4}}, // a longer one
	} {
		out := [][]float64{make([]float64, 3)}
		if err := d.KeyedSelfWeights([][][]float32{set}, []int{1}, out); err == nil {
			t.Fatalf("features of %d and %d points accepted", len(set[0]), len(set[1]))
		}
	}
	if f := d.Fallbacks(); f != 0 {
		t.Fatalf("%d fallbacks for the caller's error", f)
	}
}
