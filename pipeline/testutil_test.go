package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// Helpers shared by the pipeline's integration tests and the end-to-end benchmark: producing
// the sensor stream, running the pipeline, and the model trace that tells which model scored
// which record. Brokers, topics, reading topics back and group offsets are
// internal/testsupport's, shared with the other packages' tests.

// sensorDims is the number of features of the sensor stream.
const sensorDims = 8

// coord is a message's place in the input topic.
type coord struct {
	p   int32
	off int64
}

// sensorRecord is one produced input message and what the pipeline must make of it.
type sensorRecord struct {
	p           int32
	off         int64 // set once produced
	key, value  []byte
	time        time.Time // the Kafka message time (producer CreateTime), set once produced
	anomaly     bool
	malformed   bool
	means, sds  [sensorDims]float32 // as the JSON decoder reads them: float32(ParseFloat(text, 64))
	fingerprint [sensorDims]uint32  // bits of means: identifies the record in the detect window
}

// sensorInput is a produced input topic.
type sensorInput struct {
	topic   string
	parts   int
	records []*sensorRecord
	unkept  int // the messages of a topic whose records are not kept (streamInput); else 0
	byCoord map[coord]*sensorRecord
	end     []int64 // per partition: the offset after the last produced message
}

// messages is how many messages the topic holds: its records, or the count of a topic whose
// records are not kept.
func (in *sensorInput) messages() int { return len(in.records) + in.unkept }

// makeSensorRecords generates n messages of the sensor stream, spread round-robin over the
// partitions, and parses the valid ones as the decoder does.
func makeSensorRecords(tb testing.TB, n, parts int, seed uint64, anomalyRate, badRate float64) []*sensorRecord {
	tb.Helper()
	gen := synth.NewSensorStream(seed, anomalyRate, badRate)
	recs := make([]*sensorRecord, n)
	for i := range recs {
		key, value, anomaly, malformed := gen.Next()
		r := &sensorRecord{p: int32(i % parts), key: key, value: value, anomaly: anomaly, malformed: malformed}
		if !malformed {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(value, &fields); err != nil {
				tb.Fatalf("valid sensor message %d does not parse: %v: %s", i, err, value)
			}
			for j, f := range synth.SensorFeatures {
				m, err1 := strconv.ParseFloat(string(fields[f]), 64)
				s, err2 := strconv.ParseFloat(string(fields[f+"_sd"]), 64)
				if err1 != nil || err2 != nil {
					tb.Fatalf("valid sensor message %d: field %s: %v %v: %s", i, f, err1, err2, value)
				}
				r.means[j], r.sds[j] = float32(m), float32(s)
				r.fingerprint[j] = math.Float32bits(r.means[j])
			}
		}
		recs[i] = r
	}
	return recs
}

// newInput makes the bookkeeping of an input topic for recs (not yet produced).
func newInput(topic string, parts int, recs []*sensorRecord) *sensorInput {
	return &sensorInput{topic: topic, parts: parts, records: recs, byCoord: make(map[coord]*sensorRecord, len(recs)), end: make([]int64, parts)}
}

// produceRecords produces recs synchronously (at-most one produce in flight per call; the
// client batches per partition) and records their offsets and times in in.
func produceRecords(ctx context.Context, cl *kgo.Client, in *sensorInput, recs []*sensorRecord) error {
	krs := make([]*kgo.Record, len(recs))
	now := time.Now()
	for i, r := range recs {
		// The produce time is the Kafka message time (CreateTime, millisecond precision), which
		// the end-to-end latency is measured from.
		krs[i] = &kgo.Record{Topic: in.topic, Partition: r.p, Key: r.key, Value: r.value, Timestamp: now}
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records to %s: %w", len(recs), in.topic, err)
	}
	for i, r := range recs {
		r.off = krs[i].Offset
		r.time = time.UnixMilli(krs[i].Timestamp.UnixMilli())
		in.byCoord[coord{r.p, r.off}] = r
		in.end[r.p] = max(in.end[r.p], r.off+1)
	}
	return nil
}

// produceSensors creates nothing; it produces all of in.records in chunks.
func produceSensors(tb testing.TB, br testsupport.Broker, in *sensorInput) {
	tb.Helper()
	cl := testsupport.NewProducer(tb, br)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const chunk = 20_000
	for lo := 0; lo < len(in.records); lo += chunk {
		if err := produceRecords(ctx, cl, in, in.records[lo:min(lo+chunk, len(in.records))]); err != nil {
			tb.Fatal(err)
		}
	}
	if len(in.byCoord) != len(in.records) {
		tb.Fatalf("produced %d records but got %d distinct offsets back", len(in.records), len(in.byCoord))
	}
}

// sensorConfig is the pipeline configuration of the tests: the default one with the brokers,
// topics and group, the sensor features with their "_sd" uncertainties, on the CPU.
func sensorConfig(br testsupport.Broker, in, out, dlq, group string, emit sink.Emit) Config {
	cfg := Default()
	cfg.Device = "cpu"
	cfg.Ingest.Brokers = br.Addrs
	cfg.Ingest.Topic = in
	cfg.Ingest.GroupID = group
	cfg.Ingest.Features = synth.SensorFeatures
	cfg.Ingest.Uncertainty = &ingest.Uncertainty{Suffix: "_sd"}
	cfg.Sink.Brokers = br.Addrs
	cfg.Sink.Topic = out
	cfg.Sink.DeadLetterTopic = dlq
	cfg.Sink.Emit = emit
	cfg.Detect.FlagBy = detect.FlagByVerdicts // the tests check the paper's verdicts and the combine rule
	return cfg
}

// runUntilOut runs the pipeline of cfg until n records are out (60 s at most) and stops it
// gracefully.
func runUntilOut(t *testing.T, cfg Config, n int64) {
	t.Helper()
	r := startPipeline(t, cfg, nil)
	deadline := time.Now().Add(60 * time.Second)
	for r.p.Stats().RecordsOut.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records out after 60 s", r.p.Stats().RecordsOut.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// running is a pipeline started on its own goroutine.
type running struct {
	p       *Pipeline
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // Run's result, valid once done is closed
	started time.Time
}

// startPipeline makes the pipeline, lets hook see it before it runs (to install test hooks),
// and runs it until stop.
func startPipeline(tb testing.TB, cfg Config, hook func(*Pipeline)) *running {
	tb.Helper()
	log := zerolog.New(zerolog.NewTestWriter(tb)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	p, err := New(context.Background(), cfg, log)
	if err != nil {
		tb.Fatalf("pipeline.New: %v", err)
	}
	if hook != nil {
		hook(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(r.done)
		r.err = p.Run(ctx)
	}()
	tb.Cleanup(func() { // a test that fails early still stops the pipeline
		cancel()
		<-r.done
	})
	return r
}

// stop cancels the pipeline's context (the graceful stop) and returns Run's result.
func (r *running) stop(tb testing.TB, limit time.Duration) error {
	tb.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(limit):
		tb.Fatalf("pipeline did not stop within %s of the graceful stop", limit)
		return nil
	}
}

// waitCommitted polls the group's committed offsets until they reach in.end on every
// partition, and returns when the pipeline's counters first showed every message done (its
// records acknowledged by the sink or its dead letter written): a finer time than the commit,
// which waits for the next commit interval. It fails when Run returns first or limit passes.
func (r *running) waitCommitted(tb testing.TB, br testsupport.Broker, group string, in *sensorInput, limit time.Duration) time.Time {
	tb.Helper()
	deadline := time.After(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last []int64
	var doneAt time.Time
	st := r.p.Stats()
	stop := make(chan struct{})
	defer close(stop)
	watched := make(chan time.Time, 1)
	go func() { // a finer poll of the counters alone
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if st.RecordsOut.Load()+st.DeadLetters.Load() >= int64(in.messages()) {
				watched <- time.Now()
				return
			}
		}
	}()
	for {
		select {
		case <-r.done:
			tb.Fatalf("pipeline stopped before its offsets reached the end (committed %v, end %v): %v", last, in.end, r.err)
		case <-deadline:
			st := r.p.Stats()
			tb.Fatalf("committed offsets %v did not reach the end %v within %s (records in %d, out %d, dead letters %d)",
				last, in.end, limit, st.RecordsIn.Load(), st.RecordsOut.Load(), st.DeadLetters.Load())
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := testsupport.CommittedOffsets(ctx, br, group, in.topic, in.parts)
			cancel()
			if err != nil {
				tb.Logf("polling committed offsets: %v", err)
				continue
			}
			last = c
			atEnd := true
			for p := range c {
				atEnd = atEnd && c[p] >= in.end[p]
			}
			if atEnd {
				select {
				case doneAt = <-watched:
				default:
					doneAt = time.Now() // counters not seen first: fall back to the commit
				}
				return doneAt
			}
		}
	}
}

// modelTrace records every model that starts serving and, at that moment, the newest record
// of each partition in the detect window. The detect stage scores each batch right after
// pushing it into the window, with the model serving then (Stage.Process: collect, push,
// score), and it installs models only between batches (or, for the first model, before the
// held batches are scored). Records reach the window in offset order per partition. So model
// v >= 2 scored exactly the records of partition p with offsets above last[v][p] (up to the
// start of v+1), and model 1 scored everything before model 2. The newest record of a
// partition is found by its feature values (fingerprint) in the window's snapshot.
type modelTrace struct {
	mu     sync.Mutex
	models []*detect.Model
	last   [][]int64 // last[v-1][p]: newest offset of p pushed before model v served; -1 unknown
	err    error
}

// traceModels installs the trace on p's detect stage, keeping the pipeline's own callback.
func traceModels(p *Pipeline, in *sensorInput) *modelTrace {
	tr := &modelTrace{}
	byPrint := map[[sensorDims]uint32]*sensorRecord{}
	dup := map[[sensorDims]uint32]bool{}
	for _, r := range in.records {
		if r.malformed {
			continue
		}
		if _, ok := byPrint[r.fingerprint]; ok {
			dup[r.fingerprint] = true
		}
		byPrint[r.fingerprint] = r
	}
	for f := range dup { // a duplicated fingerprint cannot say which record it is
		delete(byPrint, f)
	}
	st := p.Detect()
	prev := p.watchModels
	p.watchModels = func(m *detect.Model) {
		if prev != nil {
			prev(m)
		}
		cols, _ := st.Window().Snapshot()
		last := make([]int64, in.parts)
		for q := range last {
			last[q] = -1
		}
		missing := in.parts
		var f [sensorDims]uint32
		for i := len(cols[0]) - 1; i >= 0 && missing > 0; i-- {
			for j := range f {
				f[j] = math.Float32bits(cols[j][i])
			}
			r, ok := byPrint[f]
			if !ok || last[r.p] >= 0 {
				continue
			}
			last[r.p] = r.off
			missing--
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if want := uint64(len(tr.models) + 1); m.Version != want && tr.err == nil {
			tr.err = fmt.Errorf("model version %d started serving, want %d (versions must be consecutive)", m.Version, want)
		}
		tr.models = append(tr.models, m)
		tr.last = append(tr.last, last)
	}
	return tr
}

// versionRange returns the models that may have scored the record at (p, off): lo == hi when
// the trace pins it down, a wider range where a partition was missing from the window.
func (tr *modelTrace) versionRange(p int32, off int64) (lo, hi int) {
	lo, hi = 1, len(tr.models)
	for v := 2; v <= len(tr.models); v++ {
		l := tr.last[v-1][p]
		switch {
		case l < 0:
			continue // unknown start: v stays possible on both sides
		case l < off:
			lo = v // v started before the record was pushed
		default:
			return lo, min(hi, v-1) // v started after it: the first known such v bounds it
		}
	}
	return lo, hi
}

// outputRecord is the part of the sink's JSON output (stages/sink/json.go) the checks read.
type outputRecord struct {
	ID              string          `json:"id"`
	Topic           string          `json:"topic"`
	Partition       int32           `json:"partition"`
	Offset          int64           `json:"offset"`
	Key             *string         `json:"key"`
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding"`
	Scores          *struct {
		Outlier         bool    `json:"outlier"`
		DensityOutlier  bool    `json:"density_outlier"`
		EtaProbability  float64 `json:"eta_probability"`
		DistanceOutlier bool    `json:"distance_outlier"`
		Weight          float64 `json:"weight"`
		WStar           float64 `json:"w_star"`
	} `json:"scores"`
	Subspace     []string `json:"subspace"`
	ModelVersion uint64   `json:"model_version"`
}
