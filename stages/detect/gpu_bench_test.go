package detect

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
)

// BenchmarkStageDevice is the detect stage alone at GPU speed (issue 12 item 5a): batches of
// the real batch schema (8 features with uncertainties, 1000 records, the pipeline's default
// batch size) fed to Stage.Process, the default detect configuration with the window W, on the
// device (accel.Open("cuda")) and on the CPU (accel.Open("cpu")) in one run. Per (W, device):
//
//   - records/s: the steady state, the window full, model rebuilds included at the default
//     refresh (every 200,000 records, on the stage's build goroutine as in the pipeline): the
//     median over segments of 100,000 records (and the whole measured span, "overall");
//   - build_ms: buildOn of the full window, the median of a few builds, and per step (the
//     normalisation, then each detector's Build) in the log;
//   - on the GPU, the device counters over the measured span: kernel time and bytes copied
//     per 1000 records.
//
// Knobs: OUTLIERD_BENCH_REFRESH (detect.refresh_records, default the config's 200000), OUTLIERD_BENCH_BATCH (records per batch, default 1000), OUTLIERD_BENCH_WINDOWS (default "50000,1000000"), OUTLIERD_BENCH_MEASURE (records
// measured after the window is full, default 1,000,000 on the GPU and 400,000 on the CPU), OUTLIERD_BENCH_CPUPROFILE
// (a file prefix: a CPU profile of each measured span is written to <prefix>-<W>-<device>.prof).
//
//	eval "$(.ci/cuda.sh)"; go test -c -tags cuda -o stage.test ./stages/detect/
//	./stage.test -test.run '^$' -test.bench StageDevice -test.benchtime 1x
func BenchmarkStageDevice(b *testing.B) {
	windows := []int{50_000, 1_000_000}
	if s := os.Getenv("OUTLIERD_BENCH_WINDOWS"); s != "" {
		windows = nil
		for _, f := range strings.Split(s, ",") {
			w, err := strconv.Atoi(f)
			if err != nil || w < 2 {
				b.Fatalf("OUTLIERD_BENCH_WINDOWS=%q: want window sizes", s)
			}
			windows = append(windows, w)
		}
	}
	for _, w := range windows {
		for _, dev := range []string{"cuda", "cuda-sync", "cpu"} {
			b.Run(fmt.Sprintf("W=%d/%s", w, dev), func(b *testing.B) { benchStageDevice(b, w, dev) })
		}
	}
}

// openBenchDevice opens the device, skipping a cuda benchmark where no GPU is usable.
func openBenchDevice(b *testing.B, dev string) (*accel.Device, Accelerator) {
	d, err := accel.Open(dev, zerolog.Nop(), accel.Options{})
	if err != nil {
		b.Skipf("device %s: %v", dev, err)
	}
	b.Cleanup(func() { d.Close() })
	if !d.IsGPU() {
		return d, nil // the stage runs the CPU code itself (pipeline.Device.Accelerator)
	}
	return d, d
}

const benchBatch = 1000

func benchStageDevice(b *testing.B, w int, dev string) {
	// cuda: the stage as the pipeline runs it on a GPU, host and device overlapped
	// (Deps.Overlap = OverlapOnGPU); cuda-sync: one batch at a time (before issue 22).
	depth, name := 0, dev
	if dev == "cuda" {
		depth = OverlapOnGPU
	}
	dev, _ = strings.CutSuffix(dev, "-sync")
	d, a := openBenchDevice(b, dev)
	measure := 1_000_000 // five rebuilds at the default refresh
	if dev == "cpu" {
		measure = 400_000 // the CPU scores a few times slower: two rebuilds
	}
	if v, ok := benchCount(b, "OUTLIERD_BENCH_MEASURE", benchBatch); ok {
		measure = v
	}
	size := benchBatch
	if s := os.Getenv("OUTLIERD_BENCH_BATCH"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || 100*benchBatch%v != 0 {
			b.Fatalf("OUTLIERD_BENCH_BATCH=%q: want a divisor of 100,000", s)
		}
		size = v
	}
	sp := synth.DefaultUncertainParams()
	sp.Rows, sp.Dims, sp.Seed = w+measure, 8, 5
	data := synth.One(sp)
	mem := memory.NewGoAllocator()
	cfg := Default()
	cfg.Window = w
	if v, ok := benchCount(b, "OUTLIERD_BENCH_REFRESH", 0); ok { // detect.refresh_records
		cfg.RefreshRecords = v
	}
	for range b.N {
		s, err := NewStage(cfg, data.Features, true, Deps{Log: zerolog.Nop(), Accelerator: a, Overlap: depth})
		if err != nil {
			b.Fatal(err)
		}
		// Fill the window (batches of 10,000: fewer calls; the builds it triggers run as usual).
		warm := time.Now()
		feedRange(b, s, mem, data, 0, w, 10*benchBatch)
		fill, err := s.Drain()
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range fill {
			o.Record.Release()
		}
		s.collect(s.builds.running) // the window full, no build in flight: steady state starts
		b.Logf("W=%d %s: window filled in %.1fs, model version %d", w, d.Name(), time.Since(warm).Seconds(), s.builds.version)

		batches := make([]*batch.Batch, 0, measure/size)
		for lo := w; lo+size <= w+measure; lo += size {
			batches = append(batches, makeBatch(b, mem, data, lo, lo+size, true))
		}
		var k0 time.Duration
		var h0, d0 int64
		var kt0 map[string]gpukern.KernelTotal
		if d.IsGPU() {
			k0, h0, d0 = d.GPU().Counters()
			kt0 = d.GPU().KernelTimes()
		}
		v0 := s.builds.version
		stopProfile := cputime.Profile(b, fmt.Sprintf("%d-%s", w, name))
		const segment = 100 * benchBatch
		var segs []float64
		start := time.Now()
		segStart := start
		for i, bt := range batches {
			out, err := s.Process(context.Background(), bt)
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range out {
				if !o.Scores[0].Scored {
					b.Fatal("a batch went out unscored")
				}
				o.Record.Release()
			}
			if (i+1)*size%segment == 0 {
				now := time.Now()
				segs = append(segs, segment/now.Sub(segStart).Seconds())
				segStart = now
			}
		}
		rest, err := s.Flush() // the batch still in flight with overlap
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range rest {
			o.Record.Release()
		}
		elapsed := time.Since(start)
		stopProfile()
		builds := s.builds.version - v0
		n := float64(len(batches) * size)
		b.ReportMetric(median(segs), "records/s")
		b.ReportMetric(n/elapsed.Seconds(), "overall_records/s")
		b.ReportMetric(float64(builds), "builds")
		if d.IsGPU() {
			k1, h1, d1 := d.GPU().Counters()
			b.ReportMetric(float64(k1-k0)/float64(time.Millisecond)/(n/1000), "kernel_ms/1k_records")
			b.ReportMetric(float64(h1-h0)/(n/1000), "h2d_B/1k_records")
			b.ReportMetric(float64(d1-d0)/(n/1000), "d2h_B/1k_records")
			b.Logf("W=%d %s: kernel time %.0f ms of %.0f ms wall (%.1f%%), %.1f MB to the device, %.1f MB back, fallbacks %d",
				w, d.Name(), float64(k1-k0)/1e6, float64(elapsed)/1e6, 100*float64(k1-k0)/float64(elapsed), float64(h1-h0)/1e6, float64(d1-d0)/1e6, d.Fallbacks())
			b.Logf("W=%d %s: kernel time by kernel: %s", w, d.Name(), kernelSplit(kt0, d.GPU().KernelTimes()))
		}
		b.Logf("W=%d %s, batches of %d: %d records in %.2fs (%.0f records/s overall; segments of 100k: %v), %d builds during the span",
			w, d.Name(), size, int(n), elapsed.Seconds(), n/elapsed.Seconds(), roundAll(segs), builds)

		// The model build of the full window, step by step.
		cols, sds := s.win.Snapshot()
		s.Close()
		runs := 3
		if dev == "cpu" && w > 100_000 {
			runs = 1 // a CPU build of a large window takes seconds
		}
		var totals []float64
		for r := range runs {
			steps, total := timedBuild(b, a, cols, sds, data.Features, cfg)
			totals = append(totals, total)
			if r == 0 {
				b.Logf("W=%d %s: build %.1f ms: %s", w, d.Name(), total, steps)
			}
		}
		b.ReportMetric(median(totals), "build_ms")
		b.Logf("W=%d %s: builds %v ms", w, d.Name(), roundAll(totals))
	}
}

// feedRange processes rows [lo, hi) of data in batches of size.
func feedRange(b *testing.B, s *Stage, mem memory.Allocator, data *synth.Data, lo, hi, size int) {
	for i := lo; i < hi; i += size {
		out, err := s.Process(context.Background(), makeBatch(b, mem, data, i, min(i+size, hi), true))
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range out {
			o.Record.Release()
		}
	}
}

// timedBuild is buildOn with each step timed: the normalisation, then each detector's Build.
func timedBuild(b *testing.B, a Accelerator, cols, sds [][]float32, features []string, cfg Config) (string, float64) {
	start := time.Now()
	var steps []string
	if _, err := buildSteps(a, cols, sds, features, cfg, 1, func(what string, took time.Duration) {
		steps = append(steps, fmt.Sprintf("%s %.1f", what, ms(took)))
	}); err != nil {
		b.Fatal(err)
	}
	return strings.Join(steps, ", "), ms(time.Since(start))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}

func roundAll(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(int64(v*10+0.5)) / 10
	}
	return out
}

// BenchmarkWindowUpload is what a window resident on the device would save (issue 12 item 2):
// per rebuild, the GPU steps upload the normalised window twice (SolvingSet, micro-clustering)
// and its uncertainties once; a ring buffer on the device, updated with one upload per batch,
// would read it in place. For W = 50,000 and 5,000,000 (8 features with uncertainties, 'one'):
// upload_ms, the three uploads of a rebuild (the median of 5), against build_ms, the whole
// build on the GPU (timedBuild; the median of 3, one at 5M), and batch_upload_us, the upload
// of one 1000-record batch (means and uncertainties: what the ring would add per batch).
//
//	./stage.test -test.run '^$' -test.bench WindowUpload -test.benchtime 1x
func BenchmarkWindowUpload(b *testing.B) {
	for _, w := range []int{50_000, 5_000_000} {
		b.Run(fmt.Sprintf("W=%d", w), func(b *testing.B) {
			d, a := openBenchDevice(b, "cuda")
			sp := synth.DefaultUncertainParams()
			sp.Rows, sp.Dims, sp.Seed = w, 8, 5
			data := synth.One(sp)
			cfg := Default()
			cfg.Window = w
			m := &Model{}
			m.Offset, m.Scale, _ = robustNormalisation(sortedColumns(data.Cols))
			ncols := make([][]float32, len(data.Cols))
			for j := range data.Cols {
				ncols[j] = normalise(data.Cols[j], m.Offset[j], m.Scale[j], nil)
			}
			nsds := scaleSDs(data.SD, m.Scale, w)
			for range b.N {
				var up, one []float64
				for range 5 {
					t := time.Now()
					for _, c := range [][][]float32{ncols, ncols, nsds} {
						u, err := d.GPU().Upload(c)
						if err != nil {
							b.Fatal(err)
						}
						u.Free()
					}
					up = append(up, ms(time.Since(t)))
					batchCols := make([][]float32, 0, 16)
					for j := range ncols {
						batchCols = append(batchCols, ncols[j][:benchBatch])
					}
					batchCols = append(batchCols, nsds...)
					for j := 8; j < 16; j++ {
						batchCols[j] = batchCols[j][:benchBatch]
					}
					t = time.Now()
					u, err := d.GPU().Upload(batchCols)
					if err != nil {
						b.Fatal(err)
					}
					one = append(one, float64(time.Since(t))/float64(time.Microsecond))
					u.Free()
				}
				runs := 3
				if w > 1_000_000 {
					runs = 1
				}
				var builds []float64
				for r := range runs {
					steps, total := timedBuild(b, a, data.Cols, data.SD, data.Features, cfg)
					builds = append(builds, total)
					if r == 0 {
						b.Logf("W=%d %s: build %.1f ms: %s", w, d.Name(), total, steps)
					}
				}
				bytes := float64(3 * 8 * 4 * w)
				b.ReportMetric(median(up), "upload_ms")
				b.ReportMetric(bytes/median(up)/1e6, "upload_GB/s")
				b.ReportMetric(median(builds), "build_ms")
				b.ReportMetric(median(one), "batch_upload_us")
				b.Logf("W=%d: uploads %v ms, builds %v ms, batch uploads %v us", w, roundAll(up), roundAll(builds), roundAll(one))
			}
		})
	}
}

// kernelSplit formats the kernel time between two KernelTimes, largest first: "name ms (launches)".
func kernelSplit(before, after map[string]gpukern.KernelTotal) string {
	type row struct {
		name string
		t    gpukern.KernelTotal
	}
	var rows []row
	for name, a := range after {
		b := before[name]
		if n := a.Launches - b.Launches; n > 0 {
			rows = append(rows, row{name, gpukern.KernelTotal{Launches: n, Time: a.Time - b.Time}})
		}
	}
	slices.SortFunc(rows, func(x, y row) int { return int(y.t.Time - x.t.Time) })
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = fmt.Sprintf("%s %.1f ms (%d, %.1f us each)", r.name, float64(r.t.Time)/1e6, r.t.Launches, float64(r.t.Time)/1e3/float64(r.t.Launches))
	}
	return strings.Join(parts, ", ")
}
