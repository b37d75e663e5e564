package gpukern_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// densityFixture clusters a small 'one' data set and returns the CPU model, the GPU model built
// from the same tuples and bandwidths, the micro-clusters and the data.
func densityFixture(t testing.TB, rows, dims, q int) (*density.Model, *gpukern.DensityModel, *microcluster.MicroClusters, *synth.Data) {
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
	gpu, err := gpukern.NewDensityModel(&gpukern.ClusterFeatures{CF1: mc.CF1, CF2: mc.CF2, EF2: mc.EF2, N: mc.N}, h, accel.DensityTables(cpu))
	if err != nil {
		t.Fatal(err)
	}
	return cpu, gpu, mc, data
}

// TestDensityModelMatchesCPU: the GPU model's components are built with density.NewModel's
// arithmetic, so the host densities agree bit for bit (no device needed).
func TestDensityModelMatchesCPU(t *testing.T) {
	cpu, gpu, _, _ := densityFixture(t, 3000, 4, 40)
	r := newRand(t, 500)
	for range 2000 {
		j := r.IntN(4)
		u := r.Float64()*1.4 - 0.2
		if g, c := gpu.Density(j, u), cpu.Density(j, u); math.Float64bits(g) != math.Float64bits(c) {
			t.Fatalf("f_%d(%v): GPU model %v, CPU model %v", j, u, g, c)
		}
	}
}

// exactTolerance bounds |GPU - CPU| of an exact 1-D eta-probability of a dimension whose
// superlevel set has nint intervals. Both sides compute the same z = (a - x) / psi (correctly
// rounded ops) and differ only in erfc: CUDA documents <= 5 ulp for double erfc, Go's (FreeBSD's)
// is < 1 ulp, so each Phi = erfc/2 <= 1 differs by <= 6 ulp <= 6 * 2^-53. An interval's mass is a
// difference of two of them (12 * 2^-53) plus its own rounding (<= 2^-53), and the sum over the
// intervals adds <= 2^-53 per term: <= 14 * nint * 2^-53; 16 * nint * 2^-53 leaves a margin.
func exactTolerance(nint int) float64 { return 16 * float64(max(nint, 1)) * 0x1p-53 }

// parityObject compares one GPU verdict with the CPU's. Sampled subspaces must agree bit for bit
// (see TestDetectRecordsParity). With the exact method, exact1D(j) is the CPU's exact probability
// of dimension j for this object and tol its bound: the probabilities may differ by tol; the
// verdict may differ only if some 1-D probability lies within tol of delta (the search then takes
// another path), and the subspace only if the GPU's has a CPU probability within 2 tol of the
// CPU's lowest (a near tie). It returns whether the comparison was excused by the delta rule.
func parityObject(t *testing.T, what string, w, g density.Verdict, delta float64, exact bool, exact1D func(j int) float64, dims int, tol float64) (excused bool) {
	t.Helper()
	if !exact {
		if g.Outlier != w.Outlier || math.Float64bits(g.EtaProbability) != math.Float64bits(w.EtaProbability) || !slices.Equal(g.Subspace, w.Subspace) {
			t.Errorf("%s: GPU %+v, CPU %+v", what, g, w)
		}
		return false
	}
	nearDelta := false
	for j := range dims {
		nearDelta = nearDelta || math.Abs(exact1D(j)-delta) <= tol
	}
	if g.Outlier != w.Outlier {
		if !nearDelta {
			t.Errorf("%s: verdicts differ away from delta: GPU %+v, CPU %+v", what, g, w)
		}
		return true
	}
	if math.Abs(g.EtaProbability-w.EtaProbability) > tol {
		if !nearDelta {
			t.Errorf("%s: eta-probabilities differ by %g > %g: GPU %+v, CPU %+v", what, g.EtaProbability-w.EtaProbability, tol, g, w)
		}
		return true
	}
	if !slices.Equal(g.Subspace, w.Subspace) {
		tie := len(g.Subspace) == 1 && math.Abs(exact1D(g.Subspace[0])-w.EtaProbability) <= 2*tol
		if !tie && !nearDelta {
			t.Errorf("%s: subspaces differ: GPU %+v, CPU %+v", what, g, w)
		}
		return !tie
	}
	return false
}

// densityCases are the parameter sets of the parity tests: every mode, sampled and exact, eta
// 0.5 (few flags) and 2 (many: the early stops).
func densityCases() []density.Params {
	var cs []density.Params
	for _, mode := range []density.Mode{density.Independent, density.Restricted, density.Averaging, density.Rollup} {
		for _, exact := range []bool{false, true} {
			for _, eta := range []float64{0.5, 2} {
				cs = append(cs, density.Params{Eta: eta, Delta: 0.5, Samples: 150, Mode: mode, Seed: 9, FirstIndex: 1000, Exact: exact})
			}
		}
	}
	return cs
}

func caseName(p density.Params) string {
	method := "sampled"
	if p.Exact {
		method = "exact"
	}
	return fmt.Sprintf("%s/%s/eta=%g", p.Mode, method, p.Eta)
}

// maxIntervals is the largest interval count of any dimension's superlevel set at eta.
func maxIntervals(t *testing.T, m *density.Model, eta float64) int {
	rg, err := m.Regions(eta)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, iv := range rg {
		n = max(n, len(iv))
	}
	return n
}

// TestDetectRecordsParity: GPU verdicts equal density.Model.DetectRecords for every mode, sampled
// and exact, certain and uncertain records. Sampled: both draw the same xorshift64* streams in
// the same order and round every float64 op alike; only exp and log may differ in their last bit
// between CUDA and Go, which can change a verdict only if a sample's density lies within ~1e-16
// (relative) of eta, an event of probability ~1e-16 per sample here (~1e7 samples): zero
// tolerance is the right expectation. Exact: see exactTolerance and parityObject.
func TestDetectRecordsParity(t *testing.T) {
	d := openDevice(t)
	const rows, dims, q, n = 3000, 4, 40, 300
	cpu, gpu, _, data := densityFixture(t, rows, dims, q)
	for _, certain := range []bool{false, true} {
		means := make([][]float32, dims)
		var sds [][]float32
		if !certain {
			sds = make([][]float32, dims)
		}
		for j := range dims {
			means[j] = data.Cols[j][:n]
			if sds != nil {
				sds[j] = data.SD[j][:n]
			}
		}
		for _, p := range densityCases() {
			t.Run(fmt.Sprintf("certain=%v/%s", certain, caseName(p)), func(t *testing.T) {
				want := make([]density.Verdict, n)
				if err := cpu.DetectRecords(means, sds, p, want); err != nil {
					t.Fatal(err)
				}
				got := make([]density.Verdict, n)
				if err := accel.GPUDetectRecords(d, gpu, means, sds, p, got); err != nil {
					t.Fatal(err)
				}
				tol := exactTolerance(maxIntervals(t, cpu, p.Eta))
				flagged, excused, worst := 0, 0, 0.0
				for i := range n {
					exact1D := func(j int) float64 {
						psi := 0.0
						if sds != nil {
							psi = float64(sds[j][i])
						}
						return cpu.EtaProbabilityExact(j, float64(means[j][i]), psi, p.Eta)
					}
					if want[i].Outlier {
						flagged++
					}
					if parityObject(t, fmt.Sprintf("record %d", i), want[i], got[i], p.Delta, p.Exact, exact1D, dims, tol) {
						excused++
					} else if want[i].Outlier == got[i].Outlier {
						worst = max(worst, math.Abs(got[i].EtaProbability-want[i].EtaProbability))
					}
				}
				t.Logf("%d of %d flagged; %d excused near delta; largest |GPU - CPU| eta-probability %g (tolerance %g)", flagged, n, excused, worst, tol)
			})
		}
	}
}

// TestDetectRecordsBoundsMatchPlain: on the device, sampling with the density bounds gives
// exactly what sampling every density in full gives (the same kernel's own arithmetic on both
// sides, so no exp/log difference between CUDA and Go enters): every eta-probability, subspace
// and verdict, for uncertain records, the modes that sample, and thresholds at the default and
// at the densities the records themselves see (many samples near eta).
func TestDetectRecordsBoundsMatchPlain(t *testing.T) {
	d := openDevice(t)
	const rows, dims, q, n = 3000, 4, 40, 500
	cpu, gpu, _, data := densityFixture(t, rows, dims, q)
	means, sds := make([][]float32, dims), make([][]float32, dims)
	for j := range dims {
		means[j], sds[j] = data.Cols[j][:n], data.SD[j][:n]
	}
	var f0 float64
	for j := range dims {
		f0 += cpu.Density(j, float64(means[j][0]))
	}
	for _, mode := range []density.Mode{density.Independent, density.Restricted, density.Averaging} {
		for _, eta := range []float64{0.5, f0 / dims} {
			p := density.Params{Eta: eta, Delta: 0.5, Samples: 200, Mode: mode, Seed: 3, FirstIndex: 7}
			bounded := make([]density.Verdict, n)
			if err := accel.GPUDetectRecords(d, gpu, means, sds, p, bounded); err != nil {
				t.Fatal(err)
			}
			plain := make([]density.Verdict, n)
			gpukern.SetDensityPlain(true)
			err := accel.GPUDetectRecords(d, gpu, means, sds, p, plain)
			gpukern.SetDensityPlain(false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if bounded[i].Outlier != plain[i].Outlier || bounded[i].EtaProbability != plain[i].EtaProbability ||
					!slices.Equal(bounded[i].Subspace, plain[i].Subspace) {
					t.Fatalf("%s eta %g record %d: bounded %+v, plain %+v", mode, eta, i, bounded[i], plain[i])
				}
			}
		}
	}
}

// TestKeepDensityModel: a resident model gives the same verdicts as one uploaded per call, and a
// call then uploads only the records (means and sds) and the exact regions, once the first call
// that samples has brought the bounds table (never for the exact independent method); after
// DropDensityModel the model is uploaded per call again.
func TestKeepDensityModel(t *testing.T) {
	d := openDevice(t)
	const rows, dims, q, n = 3000, 4, 40, 400
	cpu, _, mc, data := densityFixture(t, rows, dims, q)
	gpu, err := accel.DensityModelOf(cpu, mc)
	if err != nil {
		t.Fatal(err)
	}
	means, sds := make([][]float32, dims), make([][]float32, dims)
	for j := range dims {
		means[j], sds[j] = data.Cols[j][:n], data.SD[j][:n]
	}
	for _, p := range []density.Params{
		{Eta: 0.5, Delta: 0.5, Samples: 100, Mode: density.Restricted, Seed: 2},
		{Eta: 0.5, Delta: 0.5, Samples: 100, Mode: density.Independent, Seed: 2, Exact: true},
	} {
		perCall := make([]density.Verdict, n)
		_, up0, _ := d.Counters()
		if err := accel.GPUDetectRecords(d, gpu, means, sds, p, perCall); err != nil {
			t.Fatal(err)
		}
		_, up1, _ := d.Counters()
		if err := gpukern.KeepDensityModel(d, gpu); err != nil {
			t.Fatal(err)
		}
		resident := make([]density.Verdict, n)
		if err := accel.GPUDetectRecords(d, gpu, means, sds, p, resident); err != nil { // may bring the table
			t.Fatal(err)
		}
		_, up2, _ := d.Counters()
		if err := accel.GPUDetectRecords(d, gpu, means, sds, p, resident); err != nil {
			t.Fatal(err)
		}
		_, up3, _ := d.Counters()
		if err := gpukern.DropDensityModel(d, gpu); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if perCall[i].Outlier != resident[i].Outlier || perCall[i].EtaProbability != resident[i].EtaProbability {
				t.Fatalf("%s record %d: per call %+v, resident %+v", caseName(p), i, perCall[i], resident[i])
			}
		}
		lo, hi, off, err := gpu.RegionsForTest(accel.DensityParams(p))
		if err != nil {
			t.Fatal(err)
		}
		wantResident := int64(2*dims*n*4 + (len(lo)+len(hi))*8 + len(off)*8)
		if keepAndFirst := up2 - up1 - wantResident; p.Exact && keepAndFirst > int64(3*dims*len(mc.N)*8) {
			t.Errorf("%s: keeping the model and the first call uploaded %d B beyond the records: more than the model's 3 x %d x q floats (no bounds table for the exact method)", caseName(p), keepAndFirst, dims)
		}
		if got := up3 - up2; got != wantResident {
			t.Errorf("%s: a call with the resident model uploaded %d B, want %d (records and regions only)", caseName(p), got, wantResident)
		}
		if up1-up0 <= wantResident {
			t.Errorf("%s: a call without it uploaded only %d B", caseName(p), up1-up0)
		}
		t.Logf("%s: %d B up per call, %d B with the model resident", caseName(p), up1-up0, up3-up2)
	}
}

// TestDetectClustersParity: cluster granularity against density.Model.DetectClusters (the
// clusters' centroids and sqrt(Delta) as objects, stream index = cluster index, empty clusters
// untested), every mode, sampled and exact; tolerances as TestDetectRecordsParity. The fixture
// asks for more clusters than the data fill, so that some are empty.
func TestDetectClustersParity(t *testing.T) {
	d := openDevice(t)
	const dims = 4
	cpu, gpu, mc, _ := densityFixture(t, 2000, dims, 160)
	empty := 0
	for _, n := range mc.N {
		if n == 0 {
			empty++
		}
	}
	t.Logf("%d clusters, %d empty", mc.Q(), empty)
	for _, p := range densityCases() {
		t.Run(caseName(p), func(t *testing.T) {
			want, err := cpu.DetectClusters(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := accel.GPUDetectClusters(d, gpu, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d verdicts, want %d", len(got), len(want))
			}
			tol := exactTolerance(maxIntervals(t, cpu, p.Eta))
			flagged, excused := 0, 0
			for c := range want {
				if mc.N[c] == 0 {
					if got[c].Outlier || got[c].EtaProbability != 1 || got[c].Subspace != nil {
						t.Errorf("empty cluster %d: %+v, want untested", c, got[c])
					}
					continue
				}
				exact1D := func(j int) float64 {
					return cpu.EtaProbabilityExact(j, mc.Centroid(j, c), math.Sqrt(mc.Delta(j, c)), p.Eta)
				}
				if want[c].Outlier {
					flagged++
				}
				if parityObject(t, fmt.Sprintf("cluster %d", c), want[c], got[c], p.Delta, p.Exact, exact1D, dims, tol) {
					excused++
				}
			}
			t.Logf("%d of %d clusters flagged; %d excused near delta", flagged, len(want), excused)
		})
	}
}

// TestDensityCounters: a detection adds its kernel time and exactly its transfers to the
// device's running totals: up the records, the model (3 r k float64) and the region offsets
// (r+1 int64, plus the intervals when exact); down 20 bytes per record.
func TestDensityCounters(t *testing.T) {
	d := openDevice(t)
	const dims, n = 3, 500
	cpu, gpu, mc, data := densityFixture(t, 2000, dims, 30)
	k := 0
	for _, c := range mc.N {
		if c > 0 {
			k++
		}
	}
	means, sds := make([][]float32, dims), make([][]float32, dims)
	for j := range dims {
		means[j], sds[j] = data.Cols[j][:n], data.SD[j][:n]
	}
	kt0, up0, down0 := d.Counters()
	p := density.Params{Eta: 0.5, Delta: 0.5, Samples: 50, Mode: density.Averaging, Seed: 3}
	if err := accel.GPUDetectRecords(d, gpu, means, sds, p, make([]density.Verdict, n)); err != nil {
		t.Fatal(err)
	}
	kt1, up1, down1 := d.Counters()
	// Records (means, sds), model (mu, coef, inv2), region offsets, and the density bounds
	// (lower, upper per cell; origin, inverse step per dimension).
	cells := cpu.Bounds().Cells
	wantUp := int64(2*dims*n*4 + 3*dims*k*8 + (dims+1)*8 + 2*dims*(cells+2)*8 + 2*dims*8)
	if up1-up0 != wantUp || down1-down0 != int64(n*20) {
		t.Errorf("bytes up %d, down %d; want %d, %d", up1-up0, down1-down0, wantUp, n*20)
	}
	if kt1-kt0 <= 0 || kt1-kt0 > time.Minute {
		t.Errorf("kernel time %v, want > 0 and plausible", kt1-kt0)
	}
	t.Logf("kernel %v, %d B up, %d B down", kt1-kt0, up1-up0, down1-down0)
}

func TestDetectRecordsBadInput(t *testing.T) {
	_, gpu, _, data := densityFixture(t, 500, 3, 10)
	ok := density.Params{Eta: 0.5, Delta: 0.5, Samples: 10}
	bad := [][]float32{{0.1, float32(math.NaN())}, {0, 0}, {0, 0}}
	cases := []struct {
		name  string
		means [][]float32
		p     density.Params
		out   int
	}{
		{"eta=0", data.Cols, density.Params{Eta: 0, Delta: 0.5, Samples: 10}, 500},
		{"delta>1", data.Cols, density.Params{Eta: 0.5, Delta: 2, Samples: 10}, 500},
		{"samples=0", data.Cols, density.Params{Eta: 0.5, Delta: 0.5}, 500},
		{"unknown mode", data.Cols, density.Params{Eta: 0.5, Delta: 0.5, Samples: 10, Mode: 7}, 500},
		{"dims differ", data.Cols[:2], ok, 500},
		{"out length", data.Cols, ok, 3},
		{"NaN", bad, ok, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := accel.GPUDetectRecords(nil, gpu, c.means, nil, c.p, make([]density.Verdict, c.out)); err == nil {
				t.Fatal("no error")
			}
		})
	}
	if _, err := accel.GPUDetectClusters(nil, gpu, density.Params{Eta: -1, Delta: 0.5, Samples: 10}); err == nil {
		t.Error("DetectClusters eta=-1: no error")
	}
	if _, err := accel.GPUDetectClusters(nil, nil, ok); err == nil {
		t.Error("DetectClusters nil model: no error")
	}
	// Exhaustive roll-up is refused above density.MaxRollupDims, as on the CPU.
	_, wide, _, wdata := densityFixture(t, 300, density.MaxRollupDims+1, 5)
	rollup := density.Params{Eta: 0.5, Delta: 0.5, Samples: 10, Mode: density.Rollup}
	if err := accel.GPUDetectRecords(nil, wide, wdata.Cols, nil, rollup, make([]density.Verdict, 300)); err == nil {
		t.Error("roll-up at r=21: no error")
	}
}

// benchDensity runs DetectRecords b.N times on rows x dims 'one' records against q = 200
// clusters (transfers included) and reports records/s and the kernel's share from the device
// counters.
func benchDensity(b *testing.B, rows, dims int, p density.Params) {
	d := openDevice(b)
	_, gpu, _, data := densityFixture(b, rows, dims, 200)
	gp, out := accel.DensityParams(p), make([]gpukern.DensityVerdict, rows)
	if err := gpukern.DetectRecords(d, gpu, data.Cols, data.SD, gp, out); err != nil { // warm-up, regions
		b.Fatal(err)
	}
	k0, _, _ := d.Counters()
	b.ResetTimer()
	for range b.N {
		if err := gpukern.DetectRecords(d, gpu, data.Cols, data.SD, gp, out); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	k1, _, _ := d.Counters()
	flagged := 0
	for _, v := range out {
		if v.Outlier {
			flagged++
		}
	}
	b.ReportMetric(float64(flagged), "flagged")
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64((k1-k0).Microseconds())/1e3/float64(b.N), "kernel-ms/op")
}

// BenchmarkDetectRecords: the paper's default size, 100,000 records x 10 dimensions against
// q = 200 micro-clusters, s = 800, eta = delta = 0.5, sampled, per mode. Exhaustive roll-up runs
// on 5-D records (31 subspaces, 80 subspace dimensions per sample for an inlier): at 10-D an
// inlier tests 1023 subspaces (5120 subspace dimensions per sample), about 270 s per 100,000.
func BenchmarkDetectRecords(b *testing.B) {
	for _, mode := range []density.Mode{density.Independent, density.Restricted, density.Averaging, density.Rollup} {
		dims := 10
		if mode == density.Rollup {
			dims = 5
		}
		b.Run(fmt.Sprintf("%s-%dd", mode, dims), func(b *testing.B) {
			benchDensity(b, 100_000, dims, density.Params{Eta: 0.5, Delta: 0.5, Samples: 800, Mode: mode, Seed: 1})
		})
	}
	// The paper's loop (no density bounds) for the case, in the same run: same verdicts.
	b.Run("independent-10d-plain", func(b *testing.B) {
		gpukern.SetDensityPlain(true)
		defer gpukern.SetDensityPlain(false)
		benchDensity(b, 100_000, 10, density.Params{Eta: 0.5, Delta: 0.5, Samples: 800, Seed: 1})
	})
}

// BenchmarkDetectRecordsExact: the exact 1-D method, mode independent, 1,000,000 records x 10.
func BenchmarkDetectRecordsExact(b *testing.B) {
	benchDensity(b, 1_000_000, 10, density.Params{Eta: 0.5, Delta: 0.5, Samples: 800, Seed: 1, Exact: true})
}

// BenchmarkDetectClusters: cluster granularity, q = 200 clusters of 100,000 x 10, s = 800,
// sampled, the modes whose cost is linear or quadratic in r (one thread per cluster: 200 threads,
// so this is latency, not throughput; roll-up at 10-D would run 1023 subspaces in one thread).
func BenchmarkDetectClusters(b *testing.B) {
	d := openDevice(b)
	_, gpu, _, _ := densityFixture(b, 100_000, 10, 200)
	for _, mode := range []density.Mode{density.Independent, density.Restricted, density.Averaging} {
		b.Run(mode.String(), func(b *testing.B) {
			p := density.Params{Eta: 0.5, Delta: 0.5, Samples: 800, Mode: mode, Seed: 1}
			for range b.N {
				if _, err := gpukern.DetectClusters(d, gpu, accel.DensityParams(p)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDetectRecordsStreamIndexParity: records that carry their own stream indices
// (DensityParams.Index, the pipeline's record identities) draw the same samples on the GPU as on
// the CPU: the sampled verdicts and eta-probabilities are equal (zero tolerance, as in
// TestDetectRecordsParity, whose reasoning applies sample for sample).
func TestDetectRecordsStreamIndexParity(t *testing.T) {
	d := openDevice(t)
	const rows, dims, q, n = 3000, 4, 40, 300
	cpu, gpu, _, data := densityFixture(t, rows, dims, q)
	means, sds := make([][]float32, dims), make([][]float32, dims)
	for j := range dims {
		means[j], sds[j] = data.Cols[j][:n], data.SD[j][:n]
	}
	r := newRand(t, 77)
	index := make([]uint64, n)
	for i := range index {
		index[i] = r.Uint64()
	}
	for _, mode := range []density.Mode{density.Restricted, density.Averaging} {
		p := density.Params{Eta: 2, Delta: 0.5, Samples: 150, Mode: mode, Seed: 9, FirstIndex: 1000, Index: index}
		want := make([]density.Verdict, n)
		if err := cpu.DetectRecords(means, sds, p, want); err != nil {
			t.Fatal(err)
		}
		got := make([]density.Verdict, n)
		if err := accel.GPUDetectRecords(d, gpu, means, sds, p, got); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if got[i].Outlier != want[i].Outlier || got[i].EtaProbability != want[i].EtaProbability {
				t.Fatalf("%s record %d: GPU %+v, CPU %+v", mode, i, got[i], want[i])
			}
		}
	}
}
