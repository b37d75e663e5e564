package pipeline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/internal/testsupport/cputime"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// BenchmarkPipelineDevice is the whole pipeline at GPU speed (issue 12 item 5b): kfake as the
// broker (in a child process: benchBroker), the 8-feature sensor stream with "_sd" uncertainties, the
// default configuration (flag_by: rate, emit: outliers) with `device: cuda` and with
// `device: cpu`, in one run. Per device:
//
//   - backlog: N records (OUTLIERD_BENCH_RECORDS, default 1,000,000) produced first, then
//     drained: sustained records/s between 10% and 90% of the records acknowledged (the
//     pipeline's own counter, sampled every 20 ms), and overall (start-up included);
//   - steady: records produced at OUTLIERD_BENCH_RATE records/s (default 300,000) while the
//     pipeline runs, OUTLIERD_BENCH_STEADY_RECORDS of them (default 1,500,000): the rate the
//     producer achieved, and latency (output time - produce time, Kafka CreateTimes in ms) of
//     the flagged records produced at least 2 s after the start (group join and first model
//     excluded): p50, p99.
//
// OUTLIERD_BENCH_CPUPROFILE=<prefix> writes a CPU profile of each backlog drain to
// <prefix>-<device>.prof and of each steady run to <prefix>-<device>-steady.prof;
// OUTLIERD_BENCH_TRACE=<prefix> an execution trace of each (<prefix>-<device>.trace, ...);
// OUTLIERD_BENCH_LATENCIES=<prefix> each steady run's flagged outputs, one line each (latencyDump).
// Both devices get the same messages (benchStream, generated once before the runs). The broker
// (kfake) runs in a child process, this test binary re-executed (OUTLIERD_BENCH_BROKER=inprocess:
// in the benchmark's own process, as before §4.10), and rolls its log segments at
// OUTLIERD_BENCH_SEGMENT_BYTES (default 1 MiB; see benchBroker).
//
//	eval "$(.ci/cuda.sh)"; go test -c -tags cuda -o pipeline.test ./pipeline/
//	./pipeline.test -test.run '^$' -test.bench PipelineDevice -test.benchtime 1x -test.v
func BenchmarkPipelineDevice(b *testing.B) {
	n := envInt(b, "OUTLIERD_BENCH_RECORDS", 1_000_000)
	rate := envInt(b, "OUTLIERD_BENCH_RATE", 300_000)
	steadyN := envInt(b, "OUTLIERD_BENCH_STEADY_RECORDS", 1_500_000)
	const parts = 6
	backlog := newBenchStream(n, 11)
	steady := newBenchStream(steadyN, 12)
	for _, dev := range []DeviceChoice{"cuda", "cpu"} {
		b.Run(string(dev), func(b *testing.B) {
			if dev == "cuda" {
				d, err := OpenDevice(string(dev), zerolog.Nop())
				if err != nil {
					b.Skipf("no GPU: %v", err)
				}
				d.Close()
			}
			b.Run("backlog", func(b *testing.B) { benchDeviceBacklog(b, dev, parts, backlog) })
			b.Run("steady", func(b *testing.B) { benchDeviceSteady(b, dev, parts, steady, rate) })
		})
	}
}

// benchBroker is the benchmark's broker: kfake with log segments of OUTLIERD_BENCH_SEGMENT_BYTES
// (default 1 MiB), in a child process unless OUTLIERD_BENCH_BROKER=inprocess. kfake keeps a
// segment in one byte slice that doubles as it grows, copying all of it on its single goroutine
// (a real broker appends to a file), so the segment size bounds its stalls:
//   - at kfake's default of 100 MiB, those copies held every produce and fetch for 13-20 ms runs,
//     about 100 ms in all at the steady rate's 64 MiB doubling (docs/BENCHMARKS.md §4.9, an
//     execution trace);
//   - at 8 MiB, a doubling's allocation during a GC cycle of the broker's process held its
//     goroutine in mark assist for 10-25 ms, about once a second at the steady rate: the
//     pipeline's outputs in flight then were the steady p99 (§4.10.1, both processes' traces);
//     1 MiB segments (or the broker's collector off, which slows the backlog's fetches) ended it.
//
// In the benchmark's own process the broker's log (3 GB of live heap with the runs' records) is
// marked by every GC cycle of the pipeline's process: 25-32 ms marks with assists on the
// pipeline's goroutines, the steady p99's tail (§4.10, an execution trace); a production
// pipeline's broker is another process, so the child is the default.
func benchBroker(b *testing.B) testsupport.Broker {
	seg := envInt(b, "OUTLIERD_BENCH_SEGMENT_BYTES", 1<<20)
	if os.Getenv("OUTLIERD_BENCH_BROKER") == "inprocess" {
		return testsupport.KfakeBroker(b, kfakeSegments(seg))
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), kfakeChildEnv+"="+strconv.Itoa(seg))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the broker's process: %v", err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child stops on its stdin's end
		if err := cmd.Wait(); err != nil {
			b.Errorf("the broker's process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the broker's process printed no addresses: %v", err)
	}
	return testsupport.Broker{Name: "kfake (child process)", Addrs: strings.Fields(line)}
}

// kfakeChildEnv, set, makes the test binary serve kfake (TestMain: serveKfakeChild) instead of
// running tests: the value is the log segment size in bytes.
const kfakeChildEnv = "OUTLIERD_KFAKE_CHILD_SEGMENT_BYTES"

func kfakeSegments(bytes int) kfake.Opt {
	return kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(bytes)})
}

// serveKfakeChild is the broker's process of benchBroker: one kfake broker, its addresses on
// one line of stdout, served until stdin ends, with an execution trace of the broker's process to
// <prefix>-<pid>.trace when OUTLIERD_BENCH_BROKER_TRACE=<prefix>. It returns the process's exit
// code.
func serveKfakeChild(segment string) int {
	seg, err := strconv.Atoi(segment)
	if err != nil || seg <= 0 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a positive number of bytes\n", kfakeChildEnv, segment)
		return 2
	}
	if prefix := os.Getenv("OUTLIERD_BENCH_BROKER_TRACE"); prefix != "" { // the broker's own execution trace
		f, err := os.Create(fmt.Sprintf("%s-%d.trace", prefix, os.Getpid()))
		if err != nil {
			fmt.Fprintf(os.Stderr, "broker trace: %v\n", err)
			return 1
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintf(os.Stderr, "broker trace: %v\n", err)
			return 1
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfakeSegments(seg))
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		return 1
	}
	defer c.Close()
	fmt.Println(strings.Join(c.ListenAddrs(), " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// deviceConfig is the default configuration on kfake with the device.
func deviceConfig(br testsupport.Broker, dev DeviceChoice, in, out, dlq, group string) Config {
	cfg := sensorConfig(br, in, out, dlq, group, Default().Sink.Emit)
	cfg.Device = dev
	cfg.Detect.FlagBy = detect.Default().FlagBy // sensorConfig's tests check verdicts; the default flags by rate
	return cfg
}

func benchDeviceBacklog(b *testing.B, dev DeviceChoice, parts int, stream benchStream) {
	var sustained, overall []float64
	for range b.N {
		b.StopTimer()
		br := benchBroker(b)
		in, out, dlq, group := testsupport.UniqueName("din"), testsupport.UniqueName("dout"), testsupport.UniqueName("ddlq"), testsupport.UniqueName("dgroup")
		testsupport.CreateTopics(b, br, map[string]int{in: parts, out: parts, dlq: 1})
		input := stream.input(in, parts)
		t0 := time.Now()
		input.produce(b, br, 0)
		b.Logf("%s: produced %d records to kfake in %.1fs", dev, stream.n, time.Since(t0).Seconds())
		valid := stream.valid
		cfg := deviceConfig(br, dev, in, out, dlq, group)
		stopProfile := cputime.Profile(b, string(dev))
		b.StartTimer()
		r := startPipeline(b, cfg, nil)
		t10, t90 := sampleProgress(r, valid)
		doneAt := r.waitCommitted(b, br, group, input.sensorInput, 10*time.Minute)
		b.StopTimer()
		stopProfile()
		st := r.p.Stats()
		if err := r.stop(b, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			b.Fatalf("graceful stop: %v", err)
		}
		t1, t9 := <-t10, <-t90
		if t1.IsZero() || t9.IsZero() {
			b.Fatalf("the record counter never reached 10%%/90%% of %d", valid)
		}
		sustained = append(sustained, 0.8*float64(valid)/t9.Sub(t1).Seconds())
		overall = append(overall, float64(valid)/doneAt.Sub(r.started).Seconds())
		b.Logf("%s backlog: %d valid records, %d flagged, %d dead letters, model version %d; sustained %.0f records/s, overall %.0f (start-up included)",
			dev, valid, st.Flagged.Load(), st.DeadLetters.Load(), st.ModelVersion.Load(), sustained[len(sustained)-1], overall[len(overall)-1])
	}
	b.ReportMetric(median(sustained), "sustained_records/s")
	b.ReportMetric(median(overall), "records/s")
}

// sampleProgress reports when the pipeline's acknowledged-record counter first reached 10% and
// 90% of valid (zero times if it never did before the pipeline stops).
func sampleProgress(r *running, valid int) (t10, t90 <-chan time.Time) {
	c10, c90 := make(chan time.Time, 1), make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var a, z time.Time
		defer func() { c10 <- a; c90 <- z }()
		for {
			select {
			case <-r.done:
				return
			case now := <-tick.C:
				done := r.p.Stats().RecordsOut.Load()
				if a.IsZero() && done >= int64(valid/10) {
					a = now
				}
				if done >= int64(valid*9/10) {
					z = now
					return
				}
			}
		}
	}()
	return c10, c90
}

func benchDeviceSteady(b *testing.B, dev DeviceChoice, parts int, stream benchStream, rate int) {
	// The group join (under a second on kfake) and the first model (the window's 50,000 records
	// arrive in 0.17 s at 300,000 records/s; a CPU build of them takes 0.2-0.4 s) are over by
	// then; with 5 s (the stream's whole length at the default rate) almost nothing was left.
	const warmup = 2 * time.Second
	var lat []float64
	var achieved, behind []float64
	for range b.N {
		b.StopTimer()
		br := benchBroker(b)
		in, out, dlq, group := testsupport.UniqueName("sin"), testsupport.UniqueName("sout"), testsupport.UniqueName("sdlq"), testsupport.UniqueName("sgroup")
		testsupport.CreateTopics(b, br, map[string]int{in: parts, out: parts, dlq: 1})
		input := stream.input(in, parts)
		cfg := deviceConfig(br, dev, in, out, dlq, group)
		stopProfile := cputime.Profile(b, string(dev)+"-steady")
		b.StartTimer()
		r := startPipeline(b, cfg, nil)
		got := input.produce(b, br, rate)
		lastIn := time.Now()
		doneAt := r.waitCommitted(b, br, group, input.sensorInput, 10*time.Minute)
		b.StopTimer()
		stopProfile()
		if err := r.stop(b, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			b.Fatalf("graceful stop: %v", err)
		}
		achieved = append(achieved, got)
		behind = append(behind, doneAt.Sub(lastIn).Seconds())
		var l []float64
		dump := latencyDump(b, string(dev))
		testsupport.ScanTopic(b, br, out, parts, func(m *kgo.Record) {
			id, _ := testsupport.Header(m, sink.HeaderID)
			c, err := parseID(id, in)
			if err != nil {
				b.Fatalf("output id %q: %v", id, err)
			}
			if ms, ok := input.sentAt(c); ok && time.UnixMilli(ms).Sub(r.started) >= warmup {
				l = append(l, float64(m.Timestamp.UnixMilli()-ms))
				dump(ms-r.started.UnixMilli(), m.Timestamp.UnixMilli()-ms, m.Partition)
			}
		})
		dump(-1, 0, 0)
		if len(l) == 0 {
			b.Fatal("no flagged outputs after the warm-up")
		}
		lat = append(lat, l...)
		b.Logf("%s steady: produced %d records at %.0f records/s (asked %d); all done %.2fs after the last produce; %d flagged outputs after %s: p50 %.0f ms, p99 %.0f ms",
			dev, stream.n, got, rate, behind[len(behind)-1], len(l), warmup, quantile(append([]float64(nil), l...), 0.5), quantile(append([]float64(nil), l...), 0.99))
	}
	b.ReportMetric(median(achieved), "produced_records/s")
	b.ReportMetric(median(behind), "drain_after_last_s")
	b.ReportMetric(quantile(lat, 0.50), "p50_ms")
	b.ReportMetric(quantile(lat, 0.99), "p99_ms")
}

// latencyDump writes, when OUTLIERD_BENCH_LATENCIES=<prefix> is set, one line per flagged output
// of a steady run to <prefix>-<device>.txt: its input's produce time in ms after the pipeline
// started, its latency in ms and its output partition, to place the tail's outputs on an
// execution trace (OUTLIERD_BENCH_TRACE) of the same run. A call with at < 0 closes the file.
func latencyDump(b *testing.B, dev string) func(at, latency int64, part int32) {
	prefix := os.Getenv("OUTLIERD_BENCH_LATENCIES")
	if prefix == "" {
		return func(int64, int64, int32) {}
	}
	f, err := os.Create(prefix + "-" + dev + ".txt")
	if err != nil {
		b.Fatalf("latency dump: %v", err)
	}
	w := bufio.NewWriter(f)
	return func(at, latency int64, part int32) {
		if at < 0 {
			if err := errors.Join(w.Flush(), f.Close()); err != nil {
				b.Fatalf("latency dump: %v", err)
			}
			return
		}
		fmt.Fprintf(w, "%d %d %d\n", at, latency, part)
	}
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return quantile(append([]float64(nil), x...), 0.5)
}
