package gpukern_test

import (
	"math"
	"testing"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/stages/detect/density"
	"github.com/outlierd/outlierd/stages/ingest/synth"
	"github.com/outlierd/outlierd/stages/microcluster"
)

// densityFixture clusters a small 'one' data set and returns the CPU model, the GPU model built
// from the same tuples and bandwidths, and the data.
func densityFixture(t testing.TB, rows, dims, q int) (*density.Model, *gpukern.DensityModel, *synth.Data) {
	t.Helper()
	p := synth.DefaultUncertainParams()
	p.Rows, p.Dims, p.Seed = rows, dims, 21
	data := synth.One(p)
	mc, _, err := microcluster.Cluster(data.Cols, data.SD, q, 4, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := density.Bandwidths(mc)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := density.NewModel(mc, h)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := gpukern.NewDensityModel(&gpukern.ClusterFeatures{CF1: mc.CF1, CF2: mc.CF2, EF2: mc.EF2, N: mc.N}, h)
	if err != nil {
		t.Fatal(err)
	}
	return cpu, gpu, data
}

// TestDensityModelMatchesCPU: the GPU model's components are built with density.NewModel's
// arithmetic, so the host densities agree bit for bit (no device needed).
func TestDensityModelMatchesCPU(t *testing.T) {
	cpu, gpu, _ := densityFixture(t, 3000, 4, 40)
	r := newRand(t, 500)
	for range 2000 {
		j := r.IntN(4)
		u := r.Float64()*1.4 - 0.2
		if g, c := gpu.Density(j, u), cpu.Density(j, u); math.Float64bits(g) != math.Float64bits(c) {
			t.Fatalf("f_%d(%v): GPU model %v, CPU model %v", j, u, g, c)
		}
	}
}

// TestDetectRecordsParity: GPU verdicts equal density.Model.DetectRecords (mode independent,
// sampled) exactly. Both draw the same xorshift64* streams in the same order and round every
// float64 op alike; only exp and log may differ in their last bit between CUDA and Go, which can
// change a verdict only if a sample's density lies within ~1e-16 (relative) of eta, an event of
// probability ~1e-16 per sample here (4e5 samples): zero tolerance is the right expectation.
func TestDetectRecordsParity(t *testing.T) {
	d := openDevice(t)
	const rows, dims, q = 3000, 5, 50
	cpu, gpu, data := densityFixture(t, rows, dims, q)
	for _, c := range []struct {
		name    string
		certain bool
		eta     float64
		first   uint64
	}{
		{"uncertain", false, 0.5, 1000},
		{"certain", true, 0.5, 0},
		{"eta=2 many flags", false, 2, 77},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 400
			means := make([][]float32, dims)
			var sds [][]float32
			if !c.certain {
				sds = make([][]float32, dims)
			}
			for j := range dims {
				means[j] = data.Cols[j][:n]
				if sds != nil {
					sds[j] = data.SD[j][:n]
				}
			}
			want := make([]density.Verdict, n)
			cp := density.Params{Eta: c.eta, Delta: 0.5, Samples: 200, Mode: density.Independent, Seed: 9, FirstIndex: c.first}
			if err := cpu.DetectRecords(means, sds, cp, want); err != nil {
				t.Fatal(err)
			}
			got := make([]gpukern.DensityVerdict, n)
			gp := gpukern.DensityParams{Eta: c.eta, Delta: 0.5, Samples: 200, Seed: 9, FirstIndex: c.first}
			if err := gpukern.DetectRecords(d, gpu, means, sds, gp, got); err != nil {
				t.Fatal(err)
			}
			flagged := 0
			for i := range n {
				w, g := want[i], got[i]
				if w.Outlier {
					flagged++
				}
				if g.Outlier != w.Outlier || math.Float64bits(g.EtaProbability) != math.Float64bits(w.EtaProbability) ||
					len(w.Subspace) != 1 || g.Dim != w.Subspace[0] {
					t.Errorf("record %d: GPU %+v, CPU %+v", i, g, w)
				}
			}
			t.Logf("%d of %d records flagged", flagged, n)
		})
	}
}

func TestDetectRecordsBadInput(t *testing.T) {
	_, gpu, data := densityFixture(t, 500, 3, 10)
	ok := gpukern.DensityParams{Eta: 0.5, Delta: 0.5, Samples: 10}
	bad := [][]float32{{0.1, float32(math.NaN())}, {0, 0}, {0, 0}}
	cases := []struct {
		name  string
		means [][]float32
		p     gpukern.DensityParams
		out   int
	}{
		{"eta=0", data.Cols, gpukern.DensityParams{Eta: 0, Delta: 0.5, Samples: 10}, 500},
		{"delta>1", data.Cols, gpukern.DensityParams{Eta: 0.5, Delta: 2, Samples: 10}, 500},
		{"samples=0", data.Cols, gpukern.DensityParams{Eta: 0.5, Delta: 0.5}, 500},
		{"dims differ", data.Cols[:2], ok, 500},
		{"out length", data.Cols, ok, 3},
		{"NaN", bad, ok, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := gpukern.DetectRecords(nil, gpu, c.means, nil, c.p, make([]gpukern.DensityVerdict, c.out)); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// BenchmarkDetectRecords: the paper's default size, 100,000 records x 10 dimensions against
// q = 200 micro-clusters, s = 800, mode independent (transfers included).
func BenchmarkDetectRecords(b *testing.B) {
	d := openDevice(b)
	_, gpu, data := densityFixture(b, 100_000, 10, 200)
	out := make([]gpukern.DensityVerdict, 100_000)
	p := gpukern.DensityParams{Eta: 0.5, Delta: 0.5, Samples: 800, Seed: 1}
	if err := gpukern.DetectRecords(d, gpu, data.Cols, data.SD, p, out); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := gpukern.DetectRecords(d, gpu, data.Cols, data.SD, p, out); err != nil {
			b.Fatal(err)
		}
	}
	flagged := 0
	for _, v := range out {
		if v.Outlier {
			flagged++
		}
	}
	b.ReportMetric(float64(flagged), "flagged")
}
