package detect

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
)

// fakeAccel stands in for a GPU: in mode "mark" its density verdicts are recognisable (every
// record an outlier with eta-probability -1); in mode "fail" it scribbles on the output and
// fails. It records the models it was given.
type fakeAccel struct {
	mode      string
	models    []*Model
	clustered int // Cluster calls
}

func (f *fakeAccel) Name() string { return "fake" }
func (f *fakeAccel) SolvingSet(cols [][]float32, p solvingset.Params) (solvingset.Result, error) {
	return solvingset.SolvingSet(cols, p, nil)
}
func (f *fakeAccel) KNNWeights(S, Q [][]float32, k int, out []float64) error {
	solvingset.KNNWeights(S, Q, k, 0, out)
	return nil
}
func (f *fakeAccel) Cluster(means, sds [][]float32, q, iterations int, seed uint64) (*microcluster.MicroClusters, []int32, error) {
	f.clustered++
	if f.mode == "fail" {
		return nil, nil, errors.New("device lost")
	}
	return microcluster.Cluster(means, sds, q, iterations, seed, 0)
}
func (f *fakeAccel) DetectRecords(m *Model, means, sds [][]float32, p density.Params, out []density.Verdict) error {
	f.models = append(f.models, m)
	for i := range out {
		out[i] = density.Verdict{Outlier: true, EtaProbability: -1}
	}
	if f.mode == "fail" {
		return errors.New("device lost")
	}
	return nil
}

// TestDensityRunsOnTheAccelerator: with an accelerator the stage takes its density verdicts
// from it, given the serving model; when it fails, the CPU's verdicts replace whatever it wrote,
// so a failing device never changes a verdict.
func TestDensityRunsOnTheAccelerator(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := testConfig()
	cfg.Density.Mode = "restricted" // samples subspaces of 2 and 3 dimensions
	s, _ := readyStage(t, mem, cfg)
	d := testData(6000, 11)
	cpu := scoreWith(t, s, mem, d, 2000, 2600)

	f := &fakeAccel{mode: "mark"}
	var logged bytes.Buffer
	useAccelerator(s, f, zerolog.New(&logged))
	for _, sc := range scoreWith(t, s, mem, d, 2000, 2600) {
		if !sc.DensityOutlier || sc.EtaProbability != -1 {
			t.Fatalf("density verdict %+v did not come from the accelerator", sc)
		}
	}
	if len(f.models) != 1 || f.models[0] != s.Model() {
		t.Fatalf("accelerator called %d times, want once with the serving model", len(f.models))
	}

	f.mode = "fail"
	failed := scoreWith(t, s, mem, d, 2000, 2600)
	if len(f.models) != 2 {
		t.Fatalf("accelerator not tried: %d calls", len(f.models))
	}
	if !strings.Contains(logged.String(), `"step":"density"`) || !strings.Contains(logged.String(), "device lost") {
		t.Errorf("the failure was not logged: %q", logged.String())
	}
	for i := range cpu {
		a, b := cpu[i], failed[i]
		if a.DensityOutlier != b.DensityOutlier || a.EtaProbability != b.EtaProbability || !slices.Equal(a.Subspace, b.Subspace) ||
			a.Outlier != b.Outlier || math.Float64bits(a.Weight) != math.Float64bits(b.Weight) {
			t.Fatalf("record %d: after a device failure %+v, CPU alone %+v", i, b, a)
		}
	}
}

// TestModelClustersOnTheAccelerator: a model build micro-clusters the window on the accelerator,
// and when the accelerator fails the CPU clusters it instead, with the same model either way.
func TestModelClustersOnTheAccelerator(t *testing.T) {
	cfg := testConfig()
	d := testData(3000, 5)
	want, err := Build(d.Cols, d.SD, d.Features, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"mark", "fail"} {
		f := &fakeAccel{mode: mode}
		var logged bytes.Buffer
		got, err := buildOn(f, &accelReport{log: zerolog.New(&logged)}, d.Cols, d.SD, d.Features, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if f.clustered != 1 {
			t.Errorf("%s: the accelerator clustered %d times, want 1", mode, f.clustered)
		}
		if !reflect.DeepEqual(got.MicroClusters, want.MicroClusters) {
			t.Errorf("%s: micro-clusters differ from the CPU build's", mode)
		}
		if failed := strings.Contains(logged.String(), "micro-clustering"); failed != (mode == "fail") {
			t.Errorf("%s: log %q", mode, logged.String())
		}
	}
}

// useAccelerator makes a running stage's detectors use a, as NewStage would have with
// Deps.Accelerator, logging a's failures to log (the test switches from the CPU mid-stream).
func useAccelerator(s *Stage, a Accelerator, log zerolog.Logger) {
	s.deps.Accelerator, s.accelRe = a, &accelReport{log: log}
	s.detectors = append(modelDetectors(a, s.accelRe, s.features), s.detectors[len(s.detectors)-1])
}
