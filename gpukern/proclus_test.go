package gpukern_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/testsupport/testcols"
)

// sameResult fails the test unless the GPU result equals the CPU's field for field (medoids,
// dimensions, radii, assignment, sizes, costs bit for bit, iterations).
func sameResult(t *testing.T, name string, cpu, gpu *proclus.Result) {
	t.Helper()
	if reflect.DeepEqual(cpu, gpu) {
		return
	}
	diff := 0
	for i := range cpu.Assignment {
		if cpu.Assignment[i] != gpu.Assignment[i] {
			diff++
		}
	}
	t.Errorf("%s: GPU differs from CPU: medoids %v / %v, dims %v / %v, cost %v / %v, best %v / %v, iterations %d / %d, %d assignments differ",
		name, cpu.Medoids, gpu.Medoids, cpu.Dims, gpu.Dims, cpu.Cost, gpu.Cost, cpu.BestCost, gpu.BestCost, cpu.Iterations, gpu.Iterations, diff)
}

// TestProclusParity: GPU-FAST-PROCLUS gives the CPU's result exactly on planted clusters, uniform
// data, negative and large values, one dimension, one cluster, all-duplicate rows (every distance
// 0, sigma = 0) and row counts that are not a multiple of a warp or a block.
func TestProclusParity(t *testing.T) {
	d := openDevice(t)
	planted, err := proclus.GeneratePlanted(20000, 15, 5, 4, 2, 0.02, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := newRand(t, 41)
	uniform := testcols.Uniform(r, 4097, 7)
	shifted := testcols.Uniform(r, 3001, 5)
	for j := range shifted {
		for i := range shifted[j] {
			shifted[j][i] = (shifted[j][i] - 0.5) * 1e6 // negative and large: fixed-point signs and scales
		}
	}
	oneDim := testcols.Uniform(r, 999, 1)
	dup := make([][]float32, 3)
	for j := range dup {
		dup[j] = slices.Repeat([]float32{2.5}, 300)
	}
	def := proclus.Default()
	with := func(k, l int, seed uint64) proclus.Params {
		p := def
		p.K, p.L, p.Seed = k, l, seed
		return p
	}
	cases := []struct {
		name string
		cols [][]float32
		p    proclus.Params
	}{
		{"planted 20000x15 k=5 l=4", planted.Cols, with(5, 4, 3)},
		{"planted other seed", planted.Cols, with(5, 4, 1)},
		{"uniform 4097x7 k=8 l=3", uniform, with(8, 3, 2)},
		{"negative large values", shifted, with(6, 2, 5)},
		{"one dimension", oneDim, with(4, 1, 1)},
		{"one cluster", uniform, with(1, 2, 1)},
		{"all duplicates", dup, with(3, 2, 1)},
	}
	for _, c := range cases {
		cpu, err := proclus.Run(c.cols, c.p)
		if err != nil {
			t.Fatalf("%s: CPU: %v", c.name, err)
		}
		gpu, err := accel.GPUProclus(d, c.cols, c.p)
		if err != nil {
			t.Fatalf("%s: GPU: %v", c.name, err)
		}
		sameResult(t, c.name, cpu, gpu)
	}
}

// TestProclusParityResident: several (k, l) settings on one resident data set (the distance cache
// grows and is reused between runs, its rows recomputed per run) each equal the CPU's.
func TestProclusParityResident(t *testing.T) {
	d := openDevice(t)
	pl, err := proclus.GeneratePlanted(30011, 10, 6, 3, 3, 0.01, 8)
	if err != nil {
		t.Fatal(err)
	}
	data, err := proclus.Prepare(pl.Cols)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := d.UploadProclus(pl.Cols)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Free()
	for _, kl := range [][2]int{{3, 2}, {6, 3}, {9, 4}, {4, 5}} {
		p := proclus.Default()
		p.K, p.L, p.Seed = kl[0], kl[1], uint64(kl[0])
		cpu, err := proclus.Run(pl.Cols, p)
		if err != nil {
			t.Fatal(err)
		}
		gpu, err := accel.RunProclus(pd, data, p)
		if err != nil {
			t.Fatal(err)
		}
		sameResult(t, "resident", cpu, gpu)
	}
}

// TestProclusEngineParity compares the engines' integers directly on random queries, including
// bands that start at the medoid (-1) and bands over cached distances.
func TestProclusEngineParity(t *testing.T) {
	d := openDevice(t)
	r := newRand(t, 43)
	cols := testcols.Uniform(r, 10007, 6)
	pd, err := d.UploadProclus(cols)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Free()
	cpu, gpu := proclus.NewCPUEngine(cols, 3), accel.ProclusEngine(pd.ProclusRun)
	sc := proclus.Scales(cols)
	for _, e := range []proclus.Engine{cpu, gpu} {
		if err := e.Begin(sc, 4); err != nil {
			t.Fatal(err)
		}
	}
	med := func(row int) []float32 {
		m := make([]float32, len(cols))
		for j := range cols {
			m[j] = cols[j][row]
		}
		return m
	}
	for round, fresh := range []bool{true, false} {
		qs := []proclus.Query{
			{Slot: 0, Fresh: fresh, Medoid: med(5), Lo: -1, Hi: 0.3},
			{Slot: 3, Fresh: fresh, Medoid: med(9000), Lo: 0.2, Hi: 0.5},
		}
		var s [2][]int64
		var c [2][]int64
		for i, e := range []proclus.Engine{cpu, gpu} {
			s[i], c[i] = make([]int64, 2*len(cols)), make([]int64, 2)
			if err := e.Locality(qs, s[i], c[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(s[0], s[1]) || !slices.Equal(c[0], c[1]) || c[0][0] == 0 || c[0][1] == 0 {
			t.Errorf("round %d: locality CPU %v %v, GPU %v %v", round, c[0], s[0], c[1], s[1])
		}
	}
	centers := [][]float32{med(1), med(2), med(3)}
	off, dims := []int{0, 2, 3, 6}, []int{0, 4, 2, 1, 3, 5}
	radius := []float64{0.2, 0.1, 0.15}
	for _, rad := range [][]float64{nil, radius} {
		var cnt, sum [2][]int64
		var asg [2][]int32
		for i, e := range []proclus.Engine{cpu, gpu} {
			cnt[i], sum[i], asg[i] = make([]int64, 3), make([]int64, 6), make([]int32, 10007)
			if err := e.Assign(centers, off, dims, rad, cnt[i], sum[i]); err != nil {
				t.Fatal(err)
			}
			if err := e.Assignment(asg[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(cnt[0], cnt[1]) || !slices.Equal(sum[0], sum[1]) || !slices.Equal(asg[0], asg[1]) {
			t.Errorf("assign (radius %v): counts %v / %v, sums %v / %v", rad, cnt[0], cnt[1], sum[0], sum[1])
		}
		var sp [2][]int64
		center := []float64{0.5, 0.25, 0.125, 0.7, 0.1, 0.9}
		for i, e := range []proclus.Engine{cpu, gpu} {
			sp[i] = make([]int64, 6)
			if err := e.Spread(center, off, dims, sp[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(sp[0], sp[1]) {
			t.Errorf("spread (radius %v): %v / %v", rad, sp[0], sp[1])
		}
	}
}

// TestProclusMillion: the benchmark's data, 1,000,000 x 15 with 10 planted clusters in 5 of 15
// dimensions (the paper's generator: sd 5 on [0, 100], 1% outliers): the GPU equals the CPU with
// 3 restarts (run side by side on the device), and the planted subspaces recovered are logged
// (BENCHMARKS.md quotes them).
func TestProclusMillion(t *testing.T) {
	d := openDevice(t)
	if testing.Short() {
		t.Skip("short")
	}
	pl := millionPlanted(t)
	p := proclus.Default()
	p.Restarts = 3
	cpu, err := proclus.Run(pl.Cols, p)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := accel.GPUProclus(d, pl.Cols, p)
	if err != nil {
		t.Fatal(err)
	}
	sameResult(t, "1M x 15", cpu, gpu)
	logRecovery(t, gpu, pl)
}

func millionPlanted(t testing.TB) *proclus.Planted {
	pl, err := proclus.GeneratePlanted(1_000_000, 15, 10, 5, 5, 0.01, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// logRecovery logs, per found cluster, its majority planted cluster, purity and whether the
// dimensions equal the planted ones, and the precision of the outlier flags.
func logRecovery(t testing.TB, r *proclus.Result, pl *proclus.Planted) {
	k := len(r.Medoids)
	cnt := make([]map[int32]int, k)
	for i := range cnt {
		cnt[i] = map[int32]int{}
	}
	flagged, trueOut := 0, 0
	for row, a := range r.Assignment {
		if a >= 0 {
			cnt[a][pl.Label[row]]++
		} else {
			flagged++
			if pl.Label[row] < 0 {
				trueOut++
			}
		}
	}
	found, exact := map[int32]bool{}, 0
	for i, m := range cnt {
		best, bn := int32(-2), 0
		for lab, n := range m {
			if n > bn || (n == bn && lab < best) {
				best, bn = lab, n
			}
		}
		match := best >= 0 && slices.Equal(r.Dims[i], pl.Dims[best])
		if match && !found[best] {
			exact++
		}
		found[best] = true
		t.Logf("cluster %d: %d rows, majority planted %d (purity %.4f), dims %v, planted dims match %v", i, r.Sizes[i], best, float64(bn)/float64(max(r.Sizes[i], 1)), r.Dims[i], match)
	}
	t.Logf("recovered %d of %d planted clusters with exact dimensions; cost %.4f, %d iterations; %d outliers flagged, %d of them planted outliers",
		exact, len(pl.Dims), r.Cost, r.Iterations, flagged, trueOut)
}

// BenchmarkProclus: 1,000,000 x 15 planted (as TestProclusMillion), per (k, l) setting, GPU on
// resident data (the upload is timed once, separately) and the CPU engine (GOMAXPROCS workers)
// from the same binary.
func BenchmarkProclus(b *testing.B) {
	pl := millionPlanted(b)
	settings := [][2]int{{5, 3}, {10, 5}, {15, 7}}
	b.Run("upload", func(b *testing.B) {
		d := openDevice(b)
		for range b.N {
			// The host check and scales (proclus.Prepare), then the copy: UploadProclus did both.
			if _, err := proclus.Prepare(pl.Cols); err != nil {
				b.Fatal(err)
			}
			pd, err := d.UploadProclus(pl.Cols)
			if err != nil {
				b.Fatal(err)
			}
			pd.Free()
		}
	})
	for _, kl := range settings {
		p := proclus.Default()
		p.K, p.L, p.Restarts = kl[0], kl[1], 1 // one run per setting (BenchmarkProclusRestarts times restarts)
		b.Run(benchName("gpu", kl), func(b *testing.B) {
			d := openDevice(b)
			data, err := proclus.Prepare(pl.Cols)
			if err != nil {
				b.Fatal(err)
			}
			pd, err := d.UploadProclus(pl.Cols)
			if err != nil {
				b.Fatal(err)
			}
			defer pd.Free()
			var res *proclus.Result
			if res, err = accel.RunProclus(pd, data, p); err != nil { // warm-up: JIT, the distance cache allocation
				b.Fatal(err)
			}
			k0, _, _ := d.Counters()
			b.ResetTimer()
			for range b.N {
				if res, err = accel.RunProclus(pd, data, p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			k1, _, _ := d.Counters()
			b.ReportMetric(float64(res.Iterations), "iterations")
			b.ReportMetric(float64((k1-k0).Microseconds())/1000/float64(b.N), "kernel-ms/op")
		})
		if os.Getenv("GPUKERN_SKIP_CPU") == "1" {
			continue
		}
		b.Run(benchName("cpu", kl), func(b *testing.B) {
			var res *proclus.Result
			for range b.N {
				var err error
				if res, err = proclus.Run(pl.Cols, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Iterations), "iterations")
		})
	}
}

// BenchmarkProclusRestarts: issue 24's restarts at 1,000,000 x 15 (the data of BenchmarkProclus,
// the defaults k = 10, l = 5, seed 1): 1, the default and twice the default restarts, on the GPU
// over data resident on the device (accel.ProclusConcurrentRuns restarts at a time, and the
// default also one at a time: what running them side by side gains) and on the CPU engine
// (GOMAXPROCS workers, the restarts one after the other) from the same binary.
func BenchmarkProclusRestarts(b *testing.B) {
	pl := millionPlanted(b)
	data, err := proclus.Prepare(pl.Cols)
	if err != nil {
		b.Fatal(err)
	}
	counts := []int{1, proclus.DefaultRestarts, 2 * proclus.DefaultRestarts}
	cases := []struct {
		restarts, concurrent int
	}{{counts[0], accel.ProclusConcurrentRuns}, {counts[1], accel.ProclusConcurrentRuns}, {counts[1], 1}, {counts[2], accel.ProclusConcurrentRuns}}
	for _, c := range cases {
		p := proclus.Default()
		p.Restarts = c.restarts
		b.Run(fmt.Sprintf("gpu-r%d-c%d", c.restarts, c.concurrent), func(b *testing.B) {
			d := openDevice(b)
			pd, err := d.UploadProclus(pl.Cols)
			if err != nil {
				b.Fatal(err)
			}
			defer pd.Free()
			var res *proclus.Result
			if res, err = accel.RunProclusWith(pd, data, p, c.concurrent); err != nil { // warm-up: JIT, run states
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if res, err = accel.RunProclusWith(pd, data, p, c.concurrent); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(res.Restart), "kept-restart")
		})
	}
	if os.Getenv("GPUKERN_SKIP_CPU") == "1" {
		return
	}
	for _, r := range counts {
		p := proclus.Default()
		p.Restarts = r
		b.Run(fmt.Sprintf("cpu-r%d", r), func(b *testing.B) {
			var res *proclus.Result
			for range b.N {
				if res, err = data.Run(p, proclus.NewCPUEngine(pl.Cols, 0)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Restart), "kept-restart")
		})
	}
}

// timedEngine wraps an engine and adds up the wall time of each method (each call returns after
// its results are on the host, so this is the pass's time including its transfers).
type timedEngine struct {
	proclus.Engine
	locality, assign, spread time.Duration
}

func (e *timedEngine) Locality(qs []proclus.Query, sums, counts []int64) error {
	st := time.Now()
	defer func() { e.locality += time.Since(st) }()
	return e.Engine.Locality(qs, sums, counts)
}

func (e *timedEngine) Assign(centers [][]float32, off, dims []int, radius []float64, counts, sums []int64) error {
	st := time.Now()
	defer func() { e.assign += time.Since(st) }()
	return e.Engine.Assign(centers, off, dims, radius, counts, sums)
}

func (e *timedEngine) Spread(center []float64, off, dims []int, sums []int64) error {
	st := time.Now()
	defer func() { e.spread += time.Since(st) }()
	return e.Engine.Spread(center, off, dims, sums)
}

// TestProclusBreakdown logs where a GPU run's time goes at 1,000,000 x 15 per (k, l) setting:
// the localities, assignments and spreads (each with its transfers) and the rest (host control
// flow, the greedy pick). It asserts the parity of the timed run with the untimed one.
func TestProclusBreakdown(t *testing.T) {
	d := openDevice(t)
	if testing.Short() {
		t.Skip("short")
	}
	pl := millionPlanted(t)
	pd, err := d.UploadProclus(pl.Cols)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Free()
	data, err := proclus.Prepare(pl.Cols)
	if err != nil {
		t.Fatal(err)
	}
	for _, kl := range [][2]int{{5, 3}, {10, 5}, {15, 7}} {
		p := proclus.Default()
		p.K, p.L, p.Restarts = kl[0], kl[1], 1
		want, err := accel.RunProclus(pd, data, p) // also the warm-up
		if err != nil {
			t.Fatal(err)
		}
		te := &timedEngine{Engine: accel.ProclusEngine(pd.ProclusRun)}
		st := time.Now()
		got, err := data.Run(p, te)
		total := time.Since(st)
		if err != nil {
			t.Fatal(err)
		}
		sameResult(t, "timed", want, got)
		rest := total - te.locality - te.assign - te.spread
		t.Logf("k=%d l=%d: %.2f ms in all: localities %.2f, assignments %.2f, spreads %.2f, rest %.2f ms (%d iterations)",
			kl[0], kl[1], ms(total), ms(te.locality), ms(te.assign), ms(te.spread), ms(rest), got.Iterations)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func benchName(dev string, kl [2]int) string { return fmt.Sprintf("%s-k%d-l%d", dev, kl[0], kl[1]) }
