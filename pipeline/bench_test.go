package pipeline

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// BenchmarkPipelineEndToEnd measures the whole pipeline against the real broker
// (KAFKA_BOOTSTRAP; skipped without it): the 8-feature sensor stream with "_sd" uncertainties,
// the default configuration on the CPU, emit: all to a fresh output topic.
//
//   - backlog: N records (OUTLIERD_BENCH_RECORDS, default 300,000) are produced first, then
//     the pipeline drains them. Latency is then mostly time spent queued in the backlog.
//   - steady: records are produced at a steady rate (OUTLIERD_BENCH_RATE records/s, default
//     5,000) while the pipeline runs, OUTLIERD_BENCH_STEADY_RECORDS of them (default 100,000),
//     so that latency is the pipeline's own as long as the rate is below its capacity (on a
//     shared 2-core machine with the broker on it, capacity is what is left by the others:
//     compare cpu_ms/1k_records, which does not depend on them).
//
// Metrics: records/s = N / (time of the last output - pipeline start), start-up (group join,
// first model build) included; sustained_records/s = the middle 80% of the outputs divided by
// the time between the 10th and 90th percentile output times (start-up and tail excluded);
// latency p50/p99 = output message time - input message time (both Kafka CreateTimes, in
// milliseconds), over all records and, for steady, after the first 10% (the warm-up: the
// records held until the first model exists).
//
//	.ci/with-kafka.sh go test -run '^$' -bench PipelineEndToEnd -benchtime 1x ./pipeline/
func BenchmarkPipelineEndToEnd(b *testing.B) {
	br := testsupport.RealBroker(b)
	n := envInt(b, "OUTLIERD_BENCH_RECORDS", 300_000)
	rate := envInt(b, "OUTLIERD_BENCH_RATE", 5_000)
	steadyN := envInt(b, "OUTLIERD_BENCH_STEADY_RECORDS", 100_000)
	b.Run("backlog", func(b *testing.B) { benchEndToEnd(b, br, n, 0) })
	b.Run("steady", func(b *testing.B) { benchEndToEnd(b, br, steadyN, rate) })
	b.Run("backlog-default", func(b *testing.B) { benchBacklogDefault(b, br, n) })
}

// benchBacklogDefault drains n pre-produced records with the default config, emit: outliers
// included (the target is stated for the default config). Throughput comes from the
// pipeline's own count of records written and acknowledged, sampled every 20 ms (outputs exist
// only for flagged records); latency from the outputs of the flagged records.
func benchBacklogDefault(b *testing.B, br testsupport.Broker, n int) {
	var sustained, cpu, lat []float64
	for range b.N {
		b.StopTimer()
		const parts = 3
		in, out, dlq, group := testsupport.UniqueName("bin"), testsupport.UniqueName("bout"), testsupport.UniqueName("bdlq"), testsupport.UniqueName("bgroup")
		testsupport.CreateTopics(b, br, map[string]int{in: parts, out: parts, dlq: 1})
		input, valid, sent := producedBacklog(b, br, in, n, parts)
		cfg := sensorConfig(br, in, out, dlq, group, sink.EmitOutliers)
		b.StartTimer()
		cpu0 := processCPU(b)
		r := startPipeline(b, cfg, nil)
		var t10, t90 time.Time
		stopSampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() { // when 10% and 90% of the valid records were acknowledged
			defer close(sampled)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stopSampling:
					return
				case now := <-tick.C:
					done := r.p.Stats().RecordsOut.Load()
					if t10.IsZero() && done >= int64(valid/10) {
						t10 = now
					}
					if t90.IsZero() && done >= int64(valid*9/10) {
						t90 = now
						return
					}
				}
			}
		}()
		r.waitCommitted(b, br, group, input, 10*time.Minute)
		close(stopSampling)
		<-sampled
		cpu = append(cpu, float64(processCPU(b)-cpu0)/float64(time.Millisecond)/(float64(n)/1000))
		b.StopTimer()
		if err := r.stop(b, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			b.Fatalf("graceful stop: %v", err)
		}
		if t10.IsZero() || t90.IsZero() {
			b.Fatalf("the record counter never reached 10%%/90%% of %d", valid)
		}
		sustained = append(sustained, 0.8*float64(valid)/t90.Sub(t10).Seconds())
		flagged := 0
		testsupport.ScanTopic(b, br, out, parts, func(m *kgo.Record) {
			id, _ := testsupport.Header(m, sink.HeaderID)
			c, err := parseID(id, in)
			if err != nil {
				b.Fatalf("output id %q: %v", id, err)
			}
			if ms, ok := sent[c]; ok {
				lat = append(lat, float64(m.Timestamp.UnixMilli()-ms))
				flagged++
			}
		})
		b.Logf("default config: %d valid records, %d outputs (flagged), sustained %.0f records/s", valid, flagged, sustained[len(sustained)-1])
	}
	b.ReportMetric(mean(sustained), "sustained_records/s")
	b.ReportMetric(mean(cpu), "cpu_ms/1k_records")
	b.ReportMetric(quantile(lat, 0.50), "p50_ms")
	b.ReportMetric(quantile(lat, 0.99), "p99_ms")
}

// producedBacklog produces n sensor records to topic in and returns what the drain still needs:
// the input's bookkeeping without its records (len(records) = n, all nil: waitCommitted counts
// them), the number of valid records and each record's produce time (Unix ms) by coordinate.
// The records themselves (their messages, parsed values and the coordinate index: about 300 MB
// of live heap with pointers at n = 300,000) are dropped before the drain: kept, they made the
// garbage collector mark them in every cycle and set its pace by the benchmark's data instead
// of the pipeline's (BENCHMARKS §5.2).
func producedBacklog(b *testing.B, br testsupport.Broker, in string, n, parts int) (slim *sensorInput, valid int, sent map[coord]int64) {
	input := newInput(in, parts, makeSensorRecords(b, n, parts, 11, 0.01, 0.005))
	produceSensors(b, br, input)
	sent = make(map[coord]int64, n) // no pointers: not scanned
	for _, rec := range input.records {
		if !rec.malformed {
			valid++
		}
		sent[coord{rec.p, rec.off}] = rec.time.UnixMilli()
	}
	slim = &sensorInput{topic: input.topic, parts: input.parts, records: make([]*sensorRecord, n), end: input.end}
	runtime.GC() // start the drain from the heap it keeps
	return slim, valid, sent
}

// envInt reads a positive integer knob from the environment.
func envInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// lateAfter is where the steady-state latency metrics start (see p99_after15s_ms).
const lateAfter = 15 * time.Second

// benchEndToEnd runs the pipeline over n records, pre-produced (rate 0) or produced at rate
// records/s while it runs, b.N times, and reports the metrics of the runs together.
func benchEndToEnd(b *testing.B, br testsupport.Broker, n, rate int) {
	var lat, latWarm, latLate []float64 // milliseconds; late: produced >= 15 s after the start
	var rps, sustained, cpu []float64
	for range b.N {
		b.StopTimer()
		const parts = 3
		in, out, dlq, group := testsupport.UniqueName("bin"), testsupport.UniqueName("bout"), testsupport.UniqueName("bdlq"), testsupport.UniqueName("bgroup")
		testsupport.CreateTopics(b, br, map[string]int{in: parts, out: parts, dlq: 1})
		input := newInput(in, parts, makeSensorRecords(b, n, parts, 11, 0.01, 0.005))
		if rate == 0 {
			produceSensors(b, br, input)
		}
		emit := sink.EmitAll
		if sink.Emit(os.Getenv("OUTLIERD_BENCH_EMIT")) == sink.EmitOutliers {
			// The default config's emit: latency of the flagged records only; throughput from
			// outputs is then not measured (see backlog-default for that).
			emit = sink.EmitOutliers
		}
		cfg := sensorConfig(br, in, out, dlq, group, emit)
		b.StartTimer()
		cpu0 := processCPU(b)
		var installs []time.Time // when each model started serving (written on the detect goroutine, read after Run)
		r := startPipeline(b, cfg, func(p *Pipeline) {
			prev := p.watchModels
			p.watchModels = func(m *detect.Model) {
				if prev != nil {
					prev(m)
				}
				installs = append(installs, time.Now())
			}
		})
		if rate > 0 {
			achieved := produceSteady(b, br, input, rate)
			b.Logf("steady: produced %d records at %.0f records/s (asked %d)", n, achieved, rate)
		}
		r.waitCommitted(b, br, group, input, 10*time.Minute)
		cpu = append(cpu, float64(processCPU(b)-cpu0)/float64(time.Millisecond)/(float64(n)/1000))
		b.StopTimer()
		if err := r.stop(b, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
			b.Fatalf("graceful stop: %v", err)
		}

		// Latency per valid record, from its output (deduplicated by id; emit: all gives one each).
		seen := make(map[coord]bool, n)
		var times []int64 // output times, ms
		var l, lw []float64
		var worst []int64 // the highest latency among the outputs of each second since the start, ms
		warm := n / 10
		index := make(map[*sensorRecord]int, n)
		for i, rec := range input.records {
			index[rec] = i
		}
		testsupport.ScanTopic(b, br, out, parts, func(m *kgo.Record) {
			id, _ := testsupport.Header(m, sink.HeaderID)
			c, err := parseID(id, in)
			if err != nil {
				b.Fatalf("output id %q: %v", id, err)
			}
			rec, ok := input.byCoord[c]
			if !ok || seen[c] {
				return
			}
			seen[c] = true
			ms := m.Timestamp.UnixMilli()
			times = append(times, ms)
			if sec := int((ms - r.started.UnixMilli()) / 1000); sec >= 0 {
				for len(worst) <= sec {
					worst = append(worst, 0)
				}
				worst[sec] = max(worst[sec], ms-rec.time.UnixMilli())
			}
			d := float64(ms - rec.time.UnixMilli())
			l = append(l, d)
			if index[rec] >= warm {
				lw = append(lw, d)
			}
			if rec.time.Sub(r.started) >= lateAfter {
				latLate = append(latLate, d)
			}
		})
		valid := 0
		for _, rec := range input.records {
			if !rec.malformed {
				valid++
			}
		}
		if emit == sink.EmitAll && len(seen) != valid {
			b.Fatalf("emit all: %d distinct outputs for %d valid records", len(seen), valid)
		}
		if len(times) == 0 {
			b.Fatalf("no outputs")
		}
		slices.Sort(times)
		start := r.started.UnixMilli()
		last := times[len(times)-1]
		rps = append(rps, float64(valid)/(float64(last-start)/1000))
		t10, t90 := times[len(times)/10], times[len(times)*9/10]
		sustained = append(sustained, 0.8*float64(len(times))/(float64(max(t90-t10, 1))/1000))
		lat, latWarm = append(lat, l...), append(latWarm, lw...)
		st := r.p.Stats()
		// Where latency peaks, and when models were installed: the stage installs a model on its
		// own goroutine (re-assigning the whole window), which pauses scoring.
		secs := make([]int, len(worst))
		for i := range secs {
			secs[i] = i
		}
		slices.SortFunc(secs, func(a, b int) int { return int(worst[b] - worst[a]) })
		var peaks, inst []string
		for _, sec := range secs[:min(5, len(secs))] {
			peaks = append(peaks, fmt.Sprintf("%ds: %dms", sec, worst[sec]))
		}
		for _, at := range installs {
			inst = append(inst, fmt.Sprintf("%.1fs", at.Sub(r.started).Seconds()))
		}
		b.Logf("worst seconds (output time since start: highest latency) %v; models installed at %v", peaks, inst)
		b.Logf("run: %d records, %d flagged, %d dead letters, model version %d, %d commits; last output %.2fs after start",
			valid, st.Flagged.Load(), st.DeadLetters.Load(), st.ModelVersion.Load(), st.Commits.Load(), float64(last-start)/1000)
	}
	b.ReportMetric(mean(rps), "records/s")
	b.ReportMetric(mean(sustained), "sustained_records/s")
	// CPU time of this process (the pipeline, and for steady also the producer) per 1,000
	// records: unlike records/s it does not depend on what else runs on the machine.
	b.ReportMetric(mean(cpu), "cpu_ms/1k_records")
	b.ReportMetric(quantile(lat, 0.50), "p50_ms")
	b.ReportMetric(quantile(lat, 0.99), "p99_ms")
	if rate > 0 {
		b.ReportMetric(quantile(latWarm, 0.50), "p50_warm_ms")
		b.ReportMetric(quantile(latWarm, 0.99), "p99_warm_ms")
		// Steady state: records produced once the start-up (group join, the records held for
		// the first model, and catching up with them) is long past.
		if len(latLate) > 0 {
			b.ReportMetric(quantile(latLate, 0.50), "p50_after15s_ms")
			b.ReportMetric(quantile(latLate, 0.99), "p99_after15s_ms")
		}
	}
}

// produceSteady produces in.records at rate records/s (paced) and returns the rate achieved.
// The produce time in each message is the time of its produce call.
func produceSteady(b *testing.B, br testsupport.Broker, in *sensorInput, rate int) float64 {
	return paced(b, br, len(in.records), rate, func(ctx context.Context, cl *kgo.Client, lo, hi int) error {
		return produceRecords(ctx, cl, in, in.records[lo:hi])
	})
}

// paced produces messages [0, n) with one producer, produce(lo, hi) at a time: at rate records/s
// every 5 ms what is due by then (so that a slow produce call is caught up by the next), or, at
// rate 0, in chunks of 20,000 as fast as the broker takes them. It returns the rate achieved.
func paced(b *testing.B, br testsupport.Broker, n, rate int, produce func(ctx context.Context, cl *kgo.Client, lo, hi int) error) float64 {
	cl := testsupport.NewProducer(b, br)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for sent < n {
		due := min(n, sent+20_000)
		if rate > 0 {
			<-tick.C
			if due = min(n, int(time.Since(start).Seconds()*float64(rate))); due <= sent {
				continue
			}
		}
		if err := produce(ctx, cl, sent, due); err != nil {
			b.Fatal(err)
		}
		sent = due
	}
	return float64(sent) / time.Since(start).Seconds()
}

// processCPU is the user and system CPU time this process has used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(max(len(x), 1))
}

// quantile is the q-quantile of x (nearest rank); it sorts x.
func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	slices.Sort(x)
	return x[min(len(x)-1, int(q*float64(len(x))))]
}
