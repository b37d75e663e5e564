package gpukern_test

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/datasets/synth"
)

// gpuNodes makes DistributedNodes over consecutive, nearly equal partitions of cols, node i on
// devs[i % len(devs)].
func gpuNodes(t testing.TB, devs []*gpukern.Device, cols [][]float32, nodes, k, m int) []solvingset.Node {
	t.Helper()
	rows := len(cols[0])
	var out []*gpukern.DistributedNode
	for i := range nodes {
		lo, hi := rows*i/nodes, rows*(i+1)/nodes
		part := make([][]float32, len(cols))
		for j := range cols {
			part[j] = cols[j][lo:hi]
		}
		n, err := gpukern.NewDistributedNode(devs[i%len(devs)], part, k, m, solvingset.PruneMargin(k))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		out = append(out, n)
	}
	return accel.SolvingSetNodes(out)
}

// cpuNodes is gpuNodes on the CPU (solvingset.CPUNode, the reference node).
func cpuNodes(cols [][]float32, nodes, k int) []solvingset.Node {
	rows := len(cols[0])
	var out []solvingset.Node
	for i := range nodes {
		lo, hi := rows*i/nodes, rows*(i+1)/nodes
		part := make([][]float32, len(cols))
		for j := range cols {
			part[j] = cols[j][lo:hi]
		}
		out = append(out, solvingset.NewCPUNode(part, k, 2))
	}
	return out
}

// allDevices opens every device (at least device 0, else the test skips).
func allDevices(t testing.TB) []*gpukern.Device {
	t.Helper()
	devs := []*gpukern.Device{openDevice(t)}
	for i := 1; ; i++ {
		d, err := gpukern.Open(i)
		if errors.Is(err, gpukern.ErrNoDevice) {
			return devs
		}
		if err != nil {
			t.Fatalf("Open(%d): %v", i, err)
		}
		t.Cleanup(func() { d.Close() })
		devs = append(devs, d)
	}
}

// TestDistributedParity: the distributed solving set on GPU nodes (1 to 3 nodes, spread over
// every device there is; several nodes may share one) returns the CPU SolvingSet's top-n rows,
// weights (bit for bit) and w*, lazy or not. Sizes are kept small enough for racecheck
// (gpucheck.sh runs the Parity tests under it).
func TestDistributedParity(t *testing.T) {
	devs := allDevices(t)
	t.Logf("%d device(s)", len(devs))
	for _, c := range []struct {
		name string
		cols [][]float32
		p    solvingset.Params
	}{
		{"g2d 12k", synth.G2D(12000, 11).Cols, solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}},
		{"10-D 8k n=25 m=37", synth.Gaussian(8000, 10, 13).Cols, solvingset.Params{K: 10, N: 25, M: 37, Seed: 3}},
		{"ties: 2-D grid", gridCols(60), solvingset.Params{K: 4, N: 7, M: 50, Seed: 4}},
		// partitions of fewer rows than m (40 or 60 at 2 and 3 nodes): a node still meets m
		// candidates of the others in a Step
		{"partitions below m", synth.Gaussian(120, 3, 17).Cols, solvingset.Params{K: 5, N: 4, M: 80, Seed: 5}},
	} {
		want, err := solvingset.SolvingSet(c.cols, c.p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range []struct {
			nodes int
			lazy  bool
		}{{1, false}, {2, true}, {3, false}, {3, true}} {
			nodes, lazy := run.nodes, run.lazy
			{
				label := fmt.Sprintf("%s nodes=%d lazy=%v", c.name, nodes, lazy)
				got, err := solvingset.DistributedSolvingSet(gpuNodes(t, devs, c.cols, nodes, c.p.K, c.p.M), len(c.cols), c.p, lazy)
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				if got.WStar != want.WStar || !slices.Equal(got.Outliers, want.Outliers) {
					t.Errorf("%s: w* %v outliers %v; CPU SolvingSet %v %v", label, got.WStar, got.Outliers, want.WStar, want.Outliers)
				}
				// Step by step: the same candidates, iteration by iteration, as CPU nodes over the
				// same partitions (the GPU nodes' proposals, done flags and lists are the CPU's).
				cpu, err := solvingset.DistributedSolvingSet(cpuNodes(c.cols, nodes, c.p.K), len(c.cols), c.p, lazy)
				if err != nil {
					t.Fatalf("%s: CPU nodes: %v", label, err)
				}
				if !slices.Equal(got.SolvingSet, cpu.SolvingSet) || got.Iterations != cpu.Iterations {
					t.Errorf("%s: solving set of %d rows in %d iterations; CPU nodes %d in %d", label, len(got.SolvingSet), got.Iterations, len(cpu.SolvingSet), cpu.Iterations)
				}
				t.Logf("%s: %d iterations, |S| %d, %d list values, %d refetches (CPU: %d, %d)", label, got.Iterations, len(got.SolvingSet),
					got.ListValues, got.Refetches, want.Iterations, len(want.SolvingSet))
			}
		}
	}
}

// BenchmarkSolvingSetDevices times SolvingSet on one GPU and the distributed solving set over J
// GPUs (one gpukern.DistributedNode per device, whole lists, as internal/accel runs it) the same way: wall time per full
// run, median of b.N runs, in two forms.
//   - uploads: what the pipeline pays (internal/accel): one device is gpukern.SolvingSet (the
//     finite check, upload, allocations and frees inside); J GPUs are gpukern.NewDistributedNodes
//     (each partition checked and uploaded, concurrently) + solvingset.DistributedSolvingSet +
//     Close.
//   - resident: the data already on the devices: one device is SolvingSet on uploaded columns
//     (its buffers still allocated and freed inside: about a millisecond); J GPUs are
//     DistributedSolvingSet on nodes built before the timer (fresh ones for every run: a run
//     moves rows into S).
//
// Data: synth.Gaussian(rows, d, 21), k = 50, n = 10, m = 100. Sizes: 10M rows (the issue's
// figures, both forms), and 500k to 5M (uploads only: where the distributed path starts to pay,
// internal/accel's multiGPURows). J: 1, 2, 4, ... up to the devices there are. Every run's top-n
// and w* must equal the one-device run's (else the benchmark fails). Per distributed run the
// supervisor's phases (solvingset.DistributedPhases) are reported, summed over the iterations.
// A sub-benchmark name selects a size: -test.bench 'SolvingSetDevices/rows=10M'.
func BenchmarkSolvingSetDevices(b *testing.B) {
	devs := allDevices(b)
	var gpus []int
	for j := 1; j <= len(devs); j *= 2 {
		gpus = append(gpus, j)
	}
	if gpus[len(gpus)-1] != len(devs) {
		gpus = append(gpus, len(devs))
	}
	p := solvingset.Params{K: 50, N: 10, M: 100, Seed: 1}
	if w, err := strconv.Atoi(os.Getenv("OUTLIERD_BENCH_WORKERS")); err == nil {
		p.Workers = w // the supervisor's goroutines for step d (0: GOMAXPROCS)
	}
	for _, dims := range []int{10, 2} {
		var all *synth.Data // generated once per dims, on first use: the sizes below are its first rows
		for _, rows := range []int{10_000_000, 500_000, 1_000_000, 2_000_000, 5_000_000} {
			name := fmt.Sprintf("rows=%s/d=%d", shortRows(rows), dims)
			forms := []string{"uploads", "resident"}
			if rows != 10_000_000 {
				forms = forms[:1]
			}
			var want *gpukern.SolvingSetResult
			b.Run(name, func(b *testing.B) {
				if all == nil {
					all = synth.Gaussian(10_000_000, dims, 21)
				}
				cols := make([][]float32, dims)
				for j := range cols {
					cols[j] = all.Cols[j][:rows]
				}
				check := func(b *testing.B, what string, wstar float64, outliers []gpukern.Outlier) {
					if want == nil {
						return
					}
					if wstar != want.WStar || !slices.Equal(outliers, want.Outliers) {
						b.Errorf("%s: w* %v outliers %v; one device %v %v", what, wstar, outliers, want.WStar, want.Outliers)
					}
				}
				for _, form := range forms {
					b.Run("one-device/"+form, func(b *testing.B) {
						var c *gpukern.Columns
						if form == "resident" {
							var err error
							if c, err = devs[0].Upload(cols); err != nil {
								b.Fatal(err)
							}
							defer c.Free()
						}
						var times []time.Duration
						var r gpukern.SolvingSetResult
						k0, kk0 := kernelTime(devs[0]), devs[0].KernelTimes()
						for range b.N {
							gp := gpuParams(p, rows)
							t0 := time.Now()
							var err error
							if form == "resident" {
								r, err = gpukern.SolvingSetResident(c, gp)
							} else {
								r, err = gpukern.SolvingSet(devs[0], cols, gp)
							}
							if err != nil {
								b.Fatal(err)
							}
							times = append(times, time.Since(t0))
						}
						if want == nil {
							want = &r
						}
						check(b, "one device "+form, r.WStar, r.Outliers)
						logKernels(b, kk0, devs[0].KernelTimes())
						b.ReportMetric(ms(median(times)), "median-ms")
						b.ReportMetric(ms(kernelTime(devs[0])-k0)/float64(b.N), "gpu0-kernel-ms")
						b.ReportMetric(float64(r.Iterations), "iterations")
						b.ReportMetric(float64(len(r.SolvingSet)), "|S|")
					})
					for _, nd := range gpus {
						b.Run(fmt.Sprintf("gpus=%d/%s", nd, form), func(b *testing.B) {
							if rows != 10_000_000 && nd == 1 {
								b.Skip("one node: only at 10M (the crossover compares J >= 2 with one device)")
							}
							margin := solvingset.PruneMargin(p.K)
							var times []time.Duration
							var runs []solvingset.DistributedResult
							var host gpukern.DistHostTimes     // node 0's, summed over the runs
							var builds, closes []time.Duration // the nodes' build (uploads form) and Close
							k0, kk0 := kernelTime(devs[0]), devs[0].KernelTimes()
							for range b.N {
								var nodes []*gpukern.DistributedNode
								var err error
								build := func() {
									if nodes, err = gpukern.NewDistributedNodes(devs[:nd], cols, p.K, p.M, margin); err != nil {
										b.Fatal(err)
									}
								}
								if form == "resident" {
									build()
								}
								t0 := time.Now()
								if form == "uploads" {
									build()
								}
								t1 := time.Now()
								r, err := solvingset.DistributedSolvingSet(accel.SolvingSetNodes(nodes), dims, p, false)
								if err != nil {
									b.Fatal(err)
								}
								t2 := time.Now()
								host = addHostTimes(host, nodes[0].HostTimes())
								cerr := gpukern.CloseDistributedNodes(nodes)
								times = append(times, time.Since(t0))
								builds, closes = append(builds, t1.Sub(t0)), append(closes, time.Since(t2))
								if cerr != nil {
									b.Fatal(cerr)
								}
								outs := make([]gpukern.Outlier, len(r.Outliers))
								for i, o := range r.Outliers {
									outs[i] = gpukern.Outlier{Row: o.Row, Weight: o.Weight}
								}
								check(b, fmt.Sprintf("%d GPUs %s", nd, form), r.WStar, outs)
								runs = append(runs, r)
							}
							// The median run's phases.
							order := make([]int, len(times))
							for i := range order {
								order[i] = i
							}
							slices.SortFunc(order, func(x, y int) int { return cmp.Compare(times[x], times[y]) })
							mr := runs[order[len(order)/2]]
							b.ReportMetric(ms(times[order[len(order)/2]]), "median-ms")
							b.ReportMetric(ms(kernelTime(devs[0])-k0)/float64(b.N), "gpu0-kernel-ms")
							b.ReportMetric(float64(mr.Iterations), "iterations")
							b.ReportMetric(ms(median(builds)), "build-ms")
							b.ReportMetric(ms(median(closes)), "close-ms")
							ph := mr.Phases
							for _, x := range []struct {
								name string
								d    time.Duration
							}{{"take", ph.Take}, {"step", ph.Step}, {"nodestep", ph.NodeStep}, {"merge", ph.Merge}, {"select", ph.Select}} {
								b.ReportMetric(ms(x.d), x.name+"-ms")
							}
							// Node 0's host side of its Steps, a run's mean: what its kernels do not explain.
							for _, x := range []struct {
								name string
								d    time.Duration
							}{{"pre", host.Pre}, {"enter", host.Enter}, {"upload", host.Upload}, {"launch", host.Launch},
								{"wait", host.Wait}, {"leave", host.Leave}, {"post", host.Post}} {
								b.ReportMetric(ms(x.d)/float64(b.N), "node0-"+x.name+"-ms")
							}
							logKernels(b, kk0, devs[0].KernelTimes())
						})
					}
				}
			})
		}
	}
}

// kernelTime is the GPU time of every kernel launched on d so far (CUDA events around each
// launch): a run's share of it against the run's wall time says how long the device waited for
// the host.
func kernelTime(d *gpukern.Device) time.Duration {
	var t time.Duration
	for _, k := range d.KernelTimes() {
		t += k.Time
	}
	return t
}

// addHostTimes adds b's phases to a's.
func addHostTimes(a, b gpukern.DistHostTimes) gpukern.DistHostTimes {
	return gpukern.DistHostTimes{Pre: a.Pre + b.Pre, Enter: a.Enter + b.Enter,
		Upload: a.Upload + b.Upload, Launch: a.Launch + b.Launch, Wait: a.Wait + b.Wait, Leave: a.Leave + b.Leave, Post: a.Post + b.Post}
}

// logKernels logs device 0's kernel time per kernel between two KernelTimes, longest first, with
// -test.v (OUTLIERD_BENCH_KERNELS=1): where the device's share of a run goes.
func logKernels(b *testing.B, before, after map[string]gpukern.KernelTotal) {
	if os.Getenv("OUTLIERD_BENCH_KERNELS") != "1" {
		return
	}
	type kt struct {
		name string
		t    gpukern.KernelTotal
	}
	var ks []kt
	for name, a := range after {
		d := gpukern.KernelTotal{Launches: a.Launches - before[name].Launches, Time: a.Time - before[name].Time}
		if d.Launches > 0 {
			ks = append(ks, kt{name, d})
		}
	}
	slices.SortFunc(ks, func(x, y kt) int { return cmp.Compare(y.t.Time, x.t.Time) })
	for _, k := range ks {
		b.Logf("device 0 %-22s %6d launches %9.2f ms (%.1f µs each)", k.name, k.t.Launches/int64(b.N), ms(k.t.Time)/float64(b.N),
			float64(k.t.Time.Microseconds())/float64(k.t.Launches))
	}
}

func shortRows(n int) string {
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dk", n/1000)
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkUploadDevices times what a distributed build's uploads cost: 10M x 10 float32 columns
// (400 MB) split over J devices as NewDistributedNodes splits them, each part uploaded by its own
// goroutine, then freed (in the timer: cuMemFree waits for the copies, and a staged upload
// returns before its last). OUTLIERD_BENCH_STAGED_MIN and
// OUTLIERD_BENCH_STAGE_COPIERS (export_cuda_test.go) choose the path, so one binary compares
// the pageable and the staged copies in one call.
func BenchmarkUploadDevices(b *testing.B) {
	devs := allDevices(b)
	const rows, dims = 10_000_000, 10
	cols := make([][]float32, dims)
	for j := range cols {
		cols[j] = make([]float32, rows)
		for i := range cols[j] {
			cols[j][i] = float32(i%1000) + float32(j)
		}
	}
	for nd := 1; nd <= len(devs); nd *= 2 {
		b.Run(fmt.Sprintf("gpus=%d", nd), func(b *testing.B) {
			var times []time.Duration
			for range b.N {
				ups := make([]*gpukern.Columns, nd)
				errs := make([]error, nd)
				t0 := time.Now()
				var wg sync.WaitGroup
				for i := range nd {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lo, hi := rows*i/nd, rows*(i+1)/nd
						part := make([][]float32, dims)
						for j := range part {
							part[j] = cols[j][lo:hi]
						}
						if ups[i], errs[i] = devs[i].Upload(part); errs[i] == nil {
							errs[i] = ups[i].Free() // waits for the copies (a staged upload returns before its last)
						}
					}()
				}
				wg.Wait()
				times = append(times, time.Since(t0))
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(ms(median(times)), "median-ms")
			b.ReportMetric(float64(rows*dims*4)/median(times).Seconds()/1e9, "GB/s")
		})
	}
}
