package detect

import (
	"reflect"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// fakeAccel stands in for a GPU: its density verdicts are recognisable (every record an outlier
// with eta-probability -1). It records the density models it was given and counts Cluster calls.
// The CPU fallback after a device failure is the accelerator's (internal/accel, tested there).
type fakeAccel struct {
	mu        sync.Mutex // ScoreBatch is called from several goroutines with overlap
	models    []*density.Model
	clustered int // Cluster calls
	// exact: the density test gives the CPU's verdicts (not recognisable ones).
	exact   bool
	batches int // ScoreBatch calls
}

func (f *fakeAccel) Name() string { return "fake" }
func (f *fakeAccel) SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	return solvingset.SolvingSet(cols, p, nil)
}
func (f *fakeAccel) Cluster(means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error) {
	f.clustered++
	return microcluster.Cluster(means, sds, q, iterations, seed, 0)
}
func (f *fakeAccel) ScoreBatch(dens *density.Scoring, knn []solvingset.Scoring) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	for _, s := range knn {
		solvingset.KNNWeights(s.Model.Points, s.Queries, s.Model.K, 0, s.Out)
	}
	if dens == nil {
		return nil
	}
	f.models = append(f.models, dens.Model)
	if f.exact {
		return dens.Model.DetectRecords(dens.Means, dens.SDs, dens.Params, dens.Out)
	}
	for i := range dens.Out {
		dens.Out[i] = density.Verdict{Outlier: true, EtaProbability: -1}
	}
	return nil
}

// TestOneDeviceCallPerBatch: with an accelerator the stage makes one ScoreBatch call per batch
// (the density test and the k-NN weights against S and R together), and the scores are the CPU
// stage's, field for field.
func TestOneDeviceCallPerBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cpu, _ := readyStage(t, mem, cfg)
	dev, _ := readyStage(t, mem, cfg)
	f := &fakeAccel{exact: true}
	useAccelerator(dev, f)
	d := testData(6000, 11)
	for _, r := range [][2]int{{2000, 2600}, {2600, 2601}, {3000, 4000}} {
		want := scoreWith(t, cpu, mem, d, r[0], r[1])
		got := scoreWith(t, dev, mem, d, r[0], r[1])
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rows %v: the scores with the accelerator differ from the CPU stage's", r)
		}
	}
	if f.batches != 3 { // (the Accelerator has no per-step scoring call left to make)
		t.Errorf("%d ScoreBatch calls for 3 batches, want 3", f.batches)
	}
}

// TestDensityRunsOnTheAccelerator: with an accelerator the stage takes its density verdicts
// from it, given the serving model's density.
func TestDensityRunsOnTheAccelerator(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Density.Mode = "restricted" // samples subspaces of 2 and 3 dimensions
	s, _ := readyStage(t, mem, cfg)
	d := testData(6000, 11)

	f := &fakeAccel{}
	useAccelerator(s, f)
	for _, sc := range scoreWith(t, s, mem, d, 2000, 2600) {
		if !sc.DensityOutlier || sc.EtaProbability != -1 {
			t.Fatalf("density verdict %+v did not come from the accelerator", sc)
		}
	}
	if len(f.models) != 1 || f.models[0] != s.Model().Density {
		t.Fatalf("accelerator called %d times, want once with the serving model", len(f.models))
	}
}

// TestModelClustersOnTheAccelerator: a model build micro-clusters the window on the accelerator,
// with the same model as the CPU build.
func TestModelClustersOnTheAccelerator(t *testing.T) {
	cfg := testConfig()
	d := testData(3000, 5)
	want, err := Build(d.Cols, d.SD, d.Features, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAccel{}
	got, err := buildOn(f, d.Cols, d.SD, d.Features, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f.clustered != 1 {
		t.Errorf("the accelerator clustered %d times, want 1", f.clustered)
	}
	if !reflect.DeepEqual(got.MicroClusters, want.MicroClusters) {
		t.Errorf("micro-clusters differ from the CPU build's")
	}
}

// useAccelerator makes a running stage's detectors use a, as NewStage would have with
// Deps.Accelerator (the test switches from the CPU mid-stream).
func useAccelerator(s *Stage, a Accelerator) {
	s.deps.Accelerator = a
	s.detectors = append(modelDetectors(a, s.features), s.detectors[len(s.detectors)-1])
}
