package detect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/gpukern"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/rank"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/fanout"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
	"github.com/outlierd/outlierd/internal/testsupport/testbatch"
)

// openGPU is internal/accel's GPU for the device tests (skipped without one).
func openGPU(tb testing.TB) *accel.Device {
	tb.Helper()
	d, err := accel.Open("cuda", zerolog.Nop(), accel.Options{})
	if err != nil {
		tb.Skipf("no GPU: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// TestKeyedGPUMatchesCPU: the keyed scorer with the keys' models resident on the GPU (accel's
// store, gpukern's keyed kernels) and its keys' builds' calibrations there (keyed_self) gives
// the CPU path's scores, verdicts and windows bit for bit.
func TestKeyedGPUMatchesCPU(t *testing.T) {
	d := openGPU(t)
	checkKeyedParity(t, func(window int) KeyedModels {
		m, err := d.KeyedModels(3, window)
		if err != nil {
			t.Fatal(err)
		}
		if m.(*accel.KeyedStore).SlotBytes() == 0 {
			t.Fatal("the keyed models are not on the GPU")
		}
		return m
	})
	if f := d.Fallbacks(); f != 0 { // (the key builds' calibrations included: checkKeyedParity batches them)
		t.Fatalf("%d keyed calls fell back to the CPU", f)
	}
}

// keyedBench is a keyed stage with every key warm, for the benchmarks: 3 features, key i's
// feature a around i, b and c standard normal (BenchmarkKeyedStage's stream).
type keyedBench struct {
	s     *Stage
	names [][]byte
	r     *rand.Rand
	mem   memory.Allocator
	off   int64
	fresh int // the keys nextCold made
	// metrics: KeyStats after every Process call, as the pipeline's detect loop reads them (the
	// overlapped rows: a read that waited for the chained keys' pass would serialise it again).
	metrics bool
}

// newKeyedBench makes a stage of cfg (key_by: key) with keys warm keys: each key's window filled
// with keys.window records and its model built, on every core (keys are independent), its
// rebuild clock set at a uniform phase so that the timed batches rebuild at the steady rate (one
// build per keys.rebuild_records of a key, OUTLIERD_BENCH_REBUILD: keys.window/4 unset); its models installed on the device in uploads of
// 16,384; then 60,000 records through the stage build the global model. overlap is Deps.Overlap
// (the pipeline's on a GPU: OverlapOnGPU).
func newKeyedBench(tb testing.TB, cfg Config, keys int, a Accelerator, overlap int) *keyedBench {
	cfg.KeyBy = KeyByKey
	cfg.Keys.MaxKeys = max(cfg.Keys.MaxKeys, keys)
	if n, ok := benchCount(tb, "OUTLIERD_BENCH_REBUILD", 0); ok { // keys.rebuild_records (docs/BENCHMARKS.md §13.1.17)
		cfg.Keys.RebuildRecords = n
	}
	if t := os.Getenv("OUTLIERD_BENCH_KEYS_TAIL"); t != "" { // keys.tail (own, fleet: §13.4.2), on every keyed row
		cfg.Keys.Tail = KeysTail(t)
		if err := cfg.Validate(); err != nil {
			tb.Fatal(err)
		}
	}
	s, err := NewStage(cfg, []string{"a", "b", "c"}, false, Deps{Log: zerolog.Nop(), Accelerator: a, Overlap: overlap})
	if err != nil {
		tb.Fatal(err)
	}
	kb := &keyedBench{s: s, names: make([][]byte, keys), r: rand.New(rand.NewPCG(5, 5)), mem: memory.NewGoAllocator(), metrics: overlap > 0}
	k, w := s.keyed, cfg.Keys.Window
	states := make([]*keyState, keys)
	for i := range keys {
		kb.names[i] = []byte(fmt.Sprintf("key-%07d", i))
		states[i] = k.state(string(kb.names[i]), &s.cfg, 3)
	}
	models := make([]*Ranker, keys)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := g; i < keys; i += workers {
				st := states[i]
				for t := range w {
					st.cols[0][t] = float32(i) + float32(r.NormFloat64())
					st.cols[1][t], st.cols[2][t] = float32(r.NormFloat64()), float32(r.NormFloat64())
				}
				st.size, st.next = w, 0
				m, err := buildKeyModel(st, &s.cfg)
				if err != nil {
					panic(err)
				}
				models[i] = m
				st.since = int32(r.IntN(s.cfg.Keys.Rebuild())) // (the keys' rebuilds spread as in a long-running stage)
			}
		}()
	}
	wg.Wait()
	for i, st := range states {
		k.markWarm(st)
		st.model = models[i]
	}
	if k.dev != nil {
		for lo := 0; lo < keys; lo += 16384 {
			k.install(states[lo:min(lo+16384, keys)])
		}
	}
	for range 60 {
		kb.process(tb, kb.next(tb, 1000))
	}
	s.collect(true)
	return kb
}

func (kb *keyedBench) next(tb testing.TB, n int) *batch.Batch {
	kb.off += int64(n)
	return testbatch.New(tb, kb.mem, "bench", []string{"a", "b", "c"}, false, false, kb.rows(kb.r, kb.off-int64(n), n))
}

// rows are n records of random warm keys drawn from r, offsets from off.
func (kb *keyedBench) rows(r *rand.Rand, off int64, n int) []testbatch.Row {
	rows := make([]testbatch.Row, n)
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		k := r.IntN(len(kb.names))
		rows[i] = testbatch.Row{Offset: off + int64(i), Key: kb.names[k], Time: t0,
			Features: []float32{float32(k) + float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())}}
	}
	return rows
}

// batches is count of next's batches of n records, made on every core, each from its own
// generator seeded from kb's (the same batches whatever the scheduling): a run of thousands of
// batches took minutes on one core before its timer started (docs/BENCHMARKS.md §13.1.17). An
// error fails the benchmark here, on its own goroutine (testbatch.Build).
func (kb *keyedBench) batches(tb testing.TB, count, n int) []*batch.Batch {
	out := make([]*batch.Batch, count)
	errs := make([]error, count)
	seeds := make([]uint64, count)
	for i := range seeds {
		seeds[i] = kb.r.Uint64()
	}
	base := kb.off
	kb.off += int64(count * n)
	fanout.OnCores(count, func(i int) {
		out[i], errs[i] = testbatch.Build(kb.mem, "bench", []string{"a", "b", "c"}, false, false, kb.rows(rand.New(rand.NewPCG(seeds[i], 7)), base+int64(i*n), n))
	})
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	return out
}

// nextCold is next with cold percent of the records, on average, of keys never seen before (one
// record each: the global model scores them), the others of the warm keys.
func (kb *keyedBench) nextCold(tb testing.TB, n, cold int) *batch.Batch {
	rows := make([]testbatch.Row, n)
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		k := kb.r.IntN(len(kb.names))
		key := kb.names[k]
		if kb.r.IntN(100) < cold {
			key = []byte(fmt.Sprintf("cold-%09d", kb.fresh))
			kb.fresh++
		}
		rows[i] = testbatch.Row{Offset: kb.off, Key: key, Time: t0,
			Features: []float32{float32(k) + float32(kb.r.NormFloat64()), float32(kb.r.NormFloat64()), float32(kb.r.NormFloat64())}}
		kb.off++
	}
	return testbatch.New(tb, kb.mem, "bench", []string{"a", "b", "c"}, false, false, rows)
}

func (kb *keyedBench) process(tb testing.TB, b *batch.Batch) {
	out, err := kb.s.Process(context.Background(), b)
	if err != nil {
		tb.Fatal(err)
	}
	if kb.metrics {
		kb.s.KeyStats()
	}
	for _, o := range out {
		o.Release()
	}
}

// run passes batches through the stage, then (drain) finishes the batches in flight. It lets go
// of each batch as it passes it on (batches[i] = nil): a processed batch keeps its scores (192
// bytes a record) and held by the caller's slice they grew the live heap through the run, by
// 17 GB over a run of 4,000 batches of 20,000 (TestKeyedBenchRunDropsItsBatches).
func (kb *keyedBench) run(tb testing.TB, batches []*batch.Batch, drain bool) {
	for i, bt := range batches {
		batches[i] = nil
		kb.process(tb, bt)
	}
	if drain {
		kb.drain(tb)
	}
}

// drain finishes the batches in flight (an overlapped stage) and releases them.
func (kb *keyedBench) drain(tb testing.TB) {
	out, err := kb.s.Drain()
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range out {
		o.Release()
	}
}

// keyedBenchCache keeps the warm stages between a benchmark's runs (b.N = 1, the -benchtime
// count, -count's repetitions): warming a million keys takes longer than the timed part.
var keyedBenchCache = map[string]*keyedBench{}

// BenchmarkKeyedStageDevice: the detect stage with key_by: key at the default settings, 3
// features, every key warm (newKeyedBench), batches of random keys through Process: on the GPU
// (the global model's steps and the keys' scores on the device) for 100,000 and 1,000,000 keys
// resident (the overlapped row at 1,000,000 also in batches of 1,000, 5,000, 50,000 and 100,000:
// what an operator's ingest.batch_size buys, the stage's per-batch work spread over more records;
// docs/BENCHMARKS.md §13.1.18), and on the CPU (no accelerator) for 100,000, over the same stream. Reports records/s,
// the device memory per key (the store's slots over the keys) and the host's accounted bytes per
// key. Run with a fixed -benchtime (e.g. 50x): the warm stages are kept for the process's life.
// OUTLIERD_BENCH_SETTLE=<duration> waits that long after a run's batches are made and before it
// is timed (the host's memory settling after the warm-up and the collection the harness forces:
// the huge-page keeper's collapses, khugepaged, the runtime's scavenger; docs/BENCHMARKS.md
// §13.1.15), and every run reports the heap's huge pages as it starts and ends (huge-GB-start,
// -end: /proc/self/smaps_rollup's AnonHugePages, where it is readable).
// OUTLIERD_BENCH_CPUPROFILE=<prefix> writes a CPU profile of each timed part alone (warming a
// million keys takes longer than it) to <prefix>-<row>-<run>.prof (benchCPUProfile). The
// gpu-overlap rows run the stage as the pipeline does on a GPU (Deps.Overlap = OverlapOnGPU:
// each batch's keys' pass chained beside the other batches' work; KeyStats read after every
// batch, as the pipeline's metrics), the batches in flight finished inside the timed part. The
// cpudev rows run the GPU rows' path on a machine without one: internal/accel's CPU device
// (accel.Open("cpu")) as the accelerator, so that every device call, the keys' store's included,
// runs its CPU twin, and with cpudev-overlap the batches overlapped and the keys' passes chained
// as on a GPU (the pipeline itself overlaps only on a GPU).
func BenchmarkKeyedStageDevice(b *testing.B) {
	for _, c := range []struct {
		dev, overlap bool
		keys, batch  int
		cpudev       bool
	}{{true, false, 100000, 20000, false}, {true, false, 100000, 1000, false}, {false, false, 100000, 20000, false}, {false, false, 100000, 1000, false},
		{true, false, 1000000, 20000, false}, {true, false, 1000000, 1000, false}, {true, true, 1000000, 20000, false},
		{true, true, 1000000, 1000, false}, {true, true, 1000000, 5000, false}, {true, true, 1000000, 50000, false}, {true, true, 1000000, 100000, false},
		{false, false, 100000, 20000, true}, {false, true, 100000, 20000, true}} {
		where, overlap := "cpu", 0
		if c.dev {
			where = "gpu"
		}
		if c.cpudev {
			where = "cpudev"
		}
		if c.overlap {
			where, overlap = where+"-overlap", OverlapOnGPU
		}
		b.Run(fmt.Sprintf("%s/keys=%d/batch=%d", where, c.keys, c.batch), func(b *testing.B) {
			var a Accelerator
			if c.dev {
				a = openGPUShared(b)
			}
			if c.cpudev {
				d, err := accel.Open("cpu", zerolog.Nop(), accel.Options{})
				if err != nil {
					b.Fatal(err)
				}
				a = d
			}
			name := fmt.Sprintf("%s/%d", where, c.keys)
			kb := keyedBenchCache[name]
			if kb == nil {
				t0 := time.Now()
				kb = newKeyedBench(b, Default(), c.keys, a, overlap)
				keyedBenchCache[name] = kb
				benchPrelude(b, kb, c.batch, overlap > 0)
				runtime.GC()
				b.Logf("%d keys warm in %v", c.keys, time.Since(t0))
			}
			batches := kb.batches(b, b.N, c.batch)
			benchSettle(b)
			hugeStart := anonHugeGB()
			var before map[string]gpukern.KernelTotal
			if c.dev {
				before = gpuShared.GPU().KernelTimes()
			}
			b.ResetTimer()
			stop := benchCPUProfile(b)
			u0 := processUsage()
			kb.run(b, batches, overlap > 0)
			u := processUsage()
			cpu, sys, faults := u.cpu-u0.cpu, u.sys-u0.sys, u.faults-u0.faults
			stop()
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*c.batch), "cpu-ns/record")
			// The kernel's share and the pages it mapped: memory the runtime gave back and takes
			// again (docs/BENCHMARKS.md §13.1.17: a process's first timed run after the warm-up).
			b.ReportMetric(float64(sys.Nanoseconds())/float64(b.N*c.batch), "sys-ns/record")
			b.ReportMetric(float64(faults)/float64(b.N*c.batch), "faults/record")
			if c.dev { // where the device's time went (the timed batches only)
				var all time.Duration
				for name, kt := range gpuShared.GPU().KernelTimes() {
					d := kt.Time - before[name].Time
					all += d
					if d > 0 && strings.HasPrefix(name, "keyed") {
						b.Logf("%s: %d launches, %v", name, kt.Launches-before[name].Launches, d)
					}
				}
				b.Logf("all kernels: %v of %v", all, b.Elapsed())
			}
			if hugeStart >= 0 {
				b.ReportMetric(hugeStart, "huge-GB-start")
				b.ReportMetric(anonHugeGB(), "huge-GB-end")
			}
			st := kb.s.KeyStats()
			b.ReportMetric(float64(b.N*c.batch)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(st.DeviceBytes)/float64(c.keys), "device-bytes/key")
			b.ReportMetric(float64(st.Bytes)/float64(c.keys), "bytes/key")
			if st.Live != c.keys {
				b.Fatalf("%d keys warm of %d", st.Live, c.keys)
			}
		})
	}
}

// BenchmarkKeyedOverlapCold: the overlapped keyed stage (Deps.Overlap = OverlapOnGPU, the keys'
// passes chained, as the pipeline runs it on a GPU) on a stream of which cold percent of the
// records are of keys never seen before (the global model's) and the rest of 20,000 warm keys,
// batches of 20,000, with the chained batches' global scoring started in begin on every record
// (speculate: speculateShare 0) or with the batch's keys' pass on the rows of keys without a model
// alone (defer: 2): what deferring costs, and saves, where the global model has much of a batch's
// work (speculate's default, speculateShare, picks between them by the last batch's share). On
// internal/accel's CPU device (cpudev) and on the GPU (gpu: skipped without one). A fresh stage a
// run (the cold keys pile up). Reports records/s, CPU ns a record and the last batch's share of
// records left to the global model.
func BenchmarkKeyedOverlapCold(b *testing.B) {
	for _, where := range []string{"cpudev", "gpu"} {
		for _, cold := range []int{100, 40} {
			for _, mode := range []string{"speculate", "defer"} {
				b.Run(fmt.Sprintf("%s/cold=%d/%s", where, cold, mode), func(b *testing.B) {
					var a Accelerator
					if where == "gpu" {
						a = openGPUShared(b)
					} else {
						d, err := accel.Open("cpu", zerolog.Nop(), accel.Options{})
						if err != nil {
							b.Fatal(err)
						}
						a = d
					}
					defer func(v float64) { speculateShare = v }(speculateShare)
					speculateShare = 0
					if mode == "defer" {
						speculateShare = 2
					}
					const keys, size = 20000, 20000
					cfg := Default()
					cfg.Keys.MaxKeys = 10_000_000 // (no eviction: the share of cold records stays)
					kb := newKeyedBench(b, cfg, keys, a, OverlapOnGPU)
					defer kb.s.Close()
					batches := make([]*batch.Batch, b.N)
					for i := range batches {
						batches[i] = kb.nextCold(b, size, cold)
					}
					b.ResetTimer()
					cpu0 := processCPU()
					kb.run(b, batches, true)
					cpu := processCPU() - cpu0
					b.StopTimer()
					b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*size), "cpu-ns/record")
					b.ReportMetric(kb.s.globalShare, "global-share")
				})
			}
		}
	}
}

// instantKeyed is a KeyedModels that answers at once (raw scores from the record's values: the
// decisions' calibrations see a spread of them), for BenchmarkKeyedHostPart: the device path's
// host work alone.
type instantKeyed struct{}

func (instantKeyed) Install(slots []int32, tails []*rank.Tail, refs []*solvingset.Model, centers, units [][]float64) error {
	return nil
}

func (instantKeyed) Score(slots, rows [][]int32, x [][]float32, tail, dist [][]float64) error {
	onWorkers(len(slots), func(w int) { // (as the device's call: each part on its goroutine)
		for r := range slots[w] {
			i := r // (rows[w] nil: the part's records are x's rows in order)
			if rows[w] != nil {
				i = int(rows[w][r])
			}
			tail[w][r] = float64(x[1][i] * x[1][i])
			dist[w][r] = math.Abs(float64(x[2][i]))
		}
	})
	return nil
}

func (instantKeyed) Bytes() int64 { return 0 }
func (instantKeyed) Close() error { return nil }

// BenchmarkKeyedHostPart: BenchmarkKeyedStageDevice's stream (100,000 keys warm, batches of
// 20,000) with a keyed device that answers at once (instantKeyed) and the global model on the
// CPU: the keys' host work of the device path (lookups, the walk, the decisions, the builds, the
// recent ranks) with the global model's CPU steps beside it, on a machine without a GPU.
func BenchmarkKeyedHostPart(b *testing.B) {
	const keys, size = 100000, 20000
	kb := keyedBenchCache["host/100000"]
	if kb == nil {
		kb = newKeyedBench(b, Default(), keys, nil, 0)
		kb.s.keyed.dev = instantKeyed{}
		keyedBenchCache["host/100000"] = kb
	}
	batches := kb.batches(b, b.N, size)
	b.ResetTimer()
	stop := benchCPUProfile(b)
	cpu0 := processCPU()
	kb.run(b, batches, false)
	cpu := processCPU() - cpu0
	stop()
	b.StopTimer()
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*size), "cpu-ns/record")
}

// processCPU is the process's CPU time so far (user and system), for the benchmarks' CPU time a
// record: on a shared machine less sensitive to other load than the wall.
func processCPU() time.Duration { return processUsage().cpu }

// usage is what the process has used so far: CPU time (user and system), system time, and
// minor page faults (pages the kernel mapped on first touch: memory the runtime returned to the
// system and takes back).
type usage struct {
	cpu, sys time.Duration
	faults   int64
}

func processUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), sys: time.Duration(ru.Stime.Nano()), faults: ru.Minflt}
}

// benchPrelude runs OUTLIERD_BENCH_PRELUDE batches (a count; none when unset) of the timed size
// through a freshly warmed stage, untimed: newKeyedBench's warm-up makes every key's model
// directly and passes 60 batches of 1,000 records, so without it the first timed run is also
// the stage's first at this batch size (its scratch grown, the memory the runtime gave back
// after the warm-up taken again: docs/BENCHMARKS.md §13.1.17).
func benchPrelude(b *testing.B, kb *keyedBench, size int, overlap bool) {
	n, _ := benchCount(b, "OUTLIERD_BENCH_PRELUDE", 0)
	for range n {
		kb.process(b, kb.next(b, size))
	}
	if overlap {
		kb.drain(b)
	}
}

// benchCount is the count the environment variable name sets for a benchmark (ok false when
// unset); a value that is not an integer of at least least fails the benchmark.
func benchCount(tb testing.TB, name string, least int) (n int, ok bool) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		tb.Fatalf("%s=%q: want an integer of at least %d", name, v, least)
	}
	return n, true
}

// benchSettle waits OUTLIERD_BENCH_SETTLE (a duration; none when unset).
func benchSettle(b *testing.B) {
	v := os.Getenv("OUTLIERD_BENCH_SETTLE")
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("OUTLIERD_BENCH_SETTLE=%q: want a duration such as 30s", v)
	}
	time.Sleep(d)
}

// anonHugeGB is the process's anonymous memory on huge pages now, in GB (-1 where
// /proc/self/smaps_rollup cannot be read: not Linux).
func anonHugeGB() float64 {
	raw, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "AnonHugePages:" {
			var kb float64
			if _, err := fmt.Sscan(f[1], &kb); err == nil {
				return kb / 1e6
			}
		}
	}
	return -1
}

// benchProfiles numbers the profiles benchCPUProfile writes (a row runs once at b.N = 1, then
// at the -benchtime count, -count times).
var benchProfiles int

// benchCPUProfile is cputime.Profile of the timed part (OUTLIERD_BENCH_CPUPROFILE, _TRACE:
// <prefix>-<row>-<run>.prof / .trace, the row's name with '/' and '=' as '_').
func benchCPUProfile(b *testing.B) func() {
	if os.Getenv("OUTLIERD_BENCH_CPUPROFILE") == "" && os.Getenv("OUTLIERD_BENCH_TRACE") == "" {
		return func() {}
	}
	benchProfiles++
	row := strings.NewReplacer("/", "_", "=", "_").Replace(b.Name())
	return cputime.Profile(b, fmt.Sprintf("%s-%d", row, benchProfiles))
}

// gpuShared is one GPU for all of BenchmarkKeyedStageDevice's runs.
var gpuShared *accel.Device

func openGPUShared(b *testing.B) *accel.Device {
	if gpuShared == nil {
		d, err := accel.Open("cuda", zerolog.Nop(), accel.Options{})
		if err != nil {
			b.Skipf("no GPU: %v", err)
		}
		gpuShared = d
	}
	return gpuShared
}
