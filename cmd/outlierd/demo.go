package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/configs"
	"github.com/outlierd/outlierd/internal/accel"
	"github.com/outlierd/outlierd/internal/algo/quality"
	"github.com/outlierd/outlierd/internal/datasets/synth"
	"github.com/outlierd/outlierd/pipeline"
	"github.com/outlierd/outlierd/pipeline/metrics"
)

// runDemo runs the main job with nothing else installed: an in-process Kafka-protocol broker
// (kfake), a synthetic sensor producer with injected anomalies (known ground truth), the
// pipeline with configs/demo.yaml, and a live summary scored against the ground truth, until
// SIGINT or SIGTERM.
func runDemo(args []string, stdout, stderr io.Writer, opt accel.Options) error {
	sig := catchStop(newLogger(stderr), "", "the demo's pipeline is not drained (nothing is lost: its broker lives in this process)")
	defer sig.release()
	return demo(sig.ctx, args, stdout, stderr, opt)
}

// demo is runDemo until ctx ends (the browser test ends it).
func demo(ctx context.Context, args []string, stdout, stderr io.Writer, opt accel.Options) error {
	fs := newFlagSet("demo", stdout, stderr)
	duration := fs.Duration("duration", 0, "stop after this long (0: run until Ctrl-C)")
	rate := fs.Int("rate", 5000, fmt.Sprintf("records per second the producer sends, at most %d", demoMaxRate))
	anomalies := fs.Float64("anomaly-rate", 0.01, "fraction of readings that are anomalies")
	bad := fs.Float64("malformed-rate", 0.001, "fraction of messages that are malformed (go to the dead-letter topic)")
	seed := fs.Uint64("seed", 1, "producer seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *rate < 1 || *rate > demoMaxRate {
		return usageError{fmt.Errorf("--rate must be in [1, %d] records per second, got %d", demoMaxRate, *rate)}
	}
	for name, v := range map[string]float64{"anomaly-rate": *anomalies, "malformed-rate": *bad} {
		if !(v >= 0 && v <= 1) { // (NaN too)
			return usageError{fmt.Errorf("--%s is a fraction of the messages, in [0, 1], got %g", name, v)}
		}
	}
	if *duration < 0 {
		return usageError{fmt.Errorf("--duration must be >= 0 (0: until Ctrl-C), got %s", *duration)}
	}
	log := newLogger(stderr).Level(zerolog.WarnLevel)

	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}

	port, err := freePort()
	if err != nil {
		return fmt.Errorf("finding a free port for the demo broker: %w", err)
	}
	brokers := "127.0.0.1:" + strconv.Itoa(port)
	os.Setenv("DEMO_BROKERS", brokers)
	data, err := configs.FS.ReadFile("demo.yaml")
	if err != nil {
		return err
	}
	cfg, err := pipeline.LoadConfigBytes("configs/demo.yaml", data)
	if err != nil {
		return err
	}
	cluster, err := kfake.NewCluster(kfake.Ports(port), kfake.SeedTopics(3, cfg.Ingest.Topic, cfg.Sink.Topic, cfg.Sink.DeadLetterTopic))
	if err != nil {
		return fmt.Errorf("starting the in-process broker: %w", err)
	}
	defer cluster.Close()
	fmt.Fprintf(stderr, "outlierd demo: in-process Kafka on %s; %d records/s, %.1f%% anomalies, %.2f%% malformed; topics %s -> %s (dead letters: %s)\n",
		brokers, *rate, 100**anomalies, 100**bad, cfg.Ingest.Topic, cfg.Sink.Topic, cfg.Sink.DeadLetterTopic)

	noteCompanion(log, string(cfg.Device), opt)
	p, err := pipeline.New(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil { // Ctrl-C during the start
			return nil
		}
		return err
	}
	fmt.Fprintf(stderr, "outlierd demo: detection on %s\n", p.DeviceName())
	if cfg.HTTP.Enabled() { // demo.yaml: a free port, printed here
		srv, err := metrics.Listen(cfg.HTTP.Listen, p.Metrics(), log)
		if err != nil {
			return err
		}
		defer shutdownHTTP(srv, log)
		fmt.Fprintf(stderr, "outlierd demo: live view on http://%s/ (metrics: /metrics; health: /healthz, /readyz)\n", srv.Addr())
	}
	var wg sync.WaitGroup
	var prodErr, pipeErr, sumErr error
	var produced, producedAnomalies atomic.Int64
	prodCtx, stopProd := context.WithCancel(ctx)
	defer stopProd()
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		prodErr = produce(prodCtx, brokers, cfg.Ingest.Topic, *rate, synth.NewSensorStream(*seed, *anomalies, *bad), &produced, &producedAnomalies)
	}()
	sum := &demoSummary{start: time.Now()}
	sumCtx, stopSum := context.WithCancel(context.Background())
	var sumWG sync.WaitGroup
	sumWG.Add(1)
	go func() { // reads the outputs and scores them against the ground truth
		defer sumWG.Done()
		sumErr = sum.consume(sumCtx, brokers, cfg.Sink.Topic)
	}()
	tickDone := make(chan struct{})
	go func() { // live line
		defer close(tickDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sumCtx.Done():
				return
			case <-t.C:
				sum.live(stderr, p.Stats(), produced.Load())
			}
		}
	}()
	pipeErr = p.Run(ctx)
	stopProd()
	wg.Wait()
	// Let the summary reader catch up with everything the pipeline wrote.
	deadline := time.Now().Add(10 * time.Second)
	for sum.seen.Load() < p.Stats().RecordsOut.Load() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stopSum()
	sumWG.Wait()
	<-tickDone
	if isTerminal(stderr) {
		fmt.Fprintln(stderr)
	}
	sum.final(stdout, p.Stats(), produced.Load(), producedAnomalies.Load())
	if prodErr != nil && !errors.Is(prodErr, context.Canceled) {
		return fmt.Errorf("producer: %w", prodErr)
	}
	if sumErr != nil && !errors.Is(sumErr, context.Canceled) {
		return fmt.Errorf("summary reader: %w", sumErr)
	}
	return pipeErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// demoMaxRate bounds --rate: one in-process broker and a pipeline on one host take far less
// (about 5,000-100,000 records/s), and the producer holds a tick's records (rate x demoTick).
const demoMaxRate = 1_000_000

// demoTick is how often the producer sends what its rate has come to since the last send.
const demoTick = 20 * time.Millisecond

// demoCatchUp is the most a producer behind sends at once: a quarter second's records
// (250,000 messages at demoMaxRate).
const demoCatchUp = 250 * time.Millisecond

// demoDue is how many records a producer at rate records/s has sent after elapsed: rate x
// elapsed in integers (no overflow at demoMaxRate for centuries), truncated.
func demoDue(rate int, elapsed time.Duration) int64 {
	r := int64(rate)
	return r*int64(elapsed/time.Second) + r*int64(elapsed%time.Second)/int64(time.Second)
}

// produce sends the sensor stream at a steady rate, in small batches: at each tick, what the
// rate is due by then (so --rate 1 sends one a second, not one a tick). A producer behind (a
// slow write) catches up by at most demoCatchUp's records at once, and lets the rest go.
func produce(ctx context.Context, brokers, topic string, rate int, s *synth.SensorStream, produced, anomalies *atomic.Int64) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 500,
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	t := time.NewTicker(demoTick)
	defer t.Stop()
	buf := make([]kafka.Message, demoDue(rate, demoCatchUp)+1)
	start, sent := time.Now(), int64(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due := demoDue(rate, time.Since(start))
		sent = max(sent, due-int64(len(buf)))
		msgs := buf[:due-sent]
		if len(msgs) == 0 {
			continue
		}
		n := 0
		for i := range msgs {
			k, v, a, _ := s.Next()
			msgs[i] = kafka.Message{Key: k, Value: v}
			if a {
				n++
			}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		sent = due
		produced.Add(int64(len(msgs)))
		anomalies.Add(int64(n))
	}
}

// demoSummary counts the outputs (emit: all) against the ground truth in their payloads.
type demoSummary struct {
	start          time.Time
	mu             sync.Mutex
	conf           quality.Confusion
	unscored       int64
	seen           atomic.Int64
	lastOut        int64
	lastFlag       int64
	lastT          time.Time
	lastLiveLength int
}

type demoOutput struct {
	Payload struct {
		Anomaly bool `json:"anomaly"`
	} `json:"payload"`
	Scores *struct {
		Outlier bool `json:"outlier"`
	} `json:"scores"`
}

func (d *demoSummary) consume(ctx context.Context, brokers, topic string) error {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, Topic: topic, GroupID: "outlierd-demo-summary",
		MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond, StartOffset: kafka.FirstOffset})
	defer r.Close()
	seen := map[string]bool{} // output ids: a retried write may duplicate an output
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return err
		}
		var o demoOutput
		if err := json.Unmarshal(m.Value, &o); err != nil {
			return fmt.Errorf("output at partition %d offset %d is not JSON: %w", m.Partition, m.Offset, err)
		}
		var id string
		for _, h := range m.Headers {
			if h.Key == "outlierd-id" {
				id = string(h.Value)
			}
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		d.mu.Lock()
		switch {
		case o.Scores == nil:
			d.unscored++
		case o.Scores.Outlier && o.Payload.Anomaly:
			d.conf.TP++
		case o.Scores.Outlier:
			d.conf.FP++
		case o.Payload.Anomaly:
			d.conf.FN++
		default:
			d.conf.TN++
		}
		d.mu.Unlock()
		d.seen.Add(1)
	}
}

func (d *demoSummary) live(w io.Writer, st *pipeline.Stats, produced int64) {
	now := time.Now()
	out, flag := st.RecordsOut.Load(), st.Flagged.Load()
	dt := now.Sub(d.lastT).Seconds()
	if d.lastT.IsZero() {
		dt = now.Sub(d.start).Seconds()
	}
	rps, fps := float64(out-d.lastOut)/dt, float64(flag-d.lastFlag)/dt
	d.lastOut, d.lastFlag, d.lastT = out, flag, now
	d.mu.Lock()
	c := d.conf
	d.mu.Unlock()
	var q labelQuality
	q.setCounts(c)
	line := fmt.Sprintf("%5.0fs  produced %d  scored %d (%.0f/s)  flagged %d (%.0f/s)  dead letters %d  model v%d  precision %s  recall %s",
		now.Sub(d.start).Seconds(), produced, out, rps, flag, fps, st.DeadLetters.Load(), st.ModelVersion.Load(), demoFigure(q.Precision), demoFigure(q.Recall))
	if isTerminal(w) {
		fmt.Fprintf(w, "\r%-*s", d.lastLiveLength, line)
		d.lastLiveLength = len(line)
	} else if int(now.Sub(d.start).Seconds())%5 == 0 {
		fmt.Fprintln(w, line)
	}
}

func (d *demoSummary) final(w io.Writer, st *pipeline.Stats, produced, anomalies int64) {
	d.mu.Lock()
	c := d.conf
	unscored := d.unscored
	d.mu.Unlock()
	el := time.Since(d.start).Seconds()
	fmt.Fprintf(w, "\noutlierd demo summary (%.0f s)\n", el)
	fmt.Fprintf(w, "  produced        %d messages (%s)\n", produced, plural(anomalies, "injected anomaly", "injected anomalies"))
	fmt.Fprintf(w, "  scored          %d records (%.0f records/s), %d before the first model went out unscored\n", st.RecordsOut.Load(), float64(st.RecordsOut.Load())/el, unscored)
	fmt.Fprintf(w, "  dead letters    %s\n", plural(st.DeadLetters.Load(), "malformed message", "malformed messages"))
	fmt.Fprintf(w, "  model version   %d\n", st.ModelVersion.Load())
	fmt.Fprintf(w, "  flagged         %d (true positives %d, false positives %d, missed %d)\n", c.TP+c.FP, c.TP, c.FP, c.FN)
	var q labelQuality
	q.setCounts(c)
	fmt.Fprintf(w, "  precision       %s\n  recall          %s\n  F1              %s\n", demoFigure(q.Precision), demoFigure(q.Recall), demoFigure(q.F1))
}

// demoFigure is a figure of the demo's lines at 3 decimals, "-" while it is not defined
// (labelQuality.setCounts: precision before anything is flagged, recall before an injected
// anomaly is scored, F1 before either): 0.000 there read as a detector that misses everything.
func demoFigure(v *figure) string {
	if !v.defined() {
		return "-"
	}
	return strconv.FormatFloat(float64(*v), 'f', 3, 64)
}
