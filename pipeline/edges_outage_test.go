package pipeline

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/sink"
)

// Tests of the pipeline's promises at its edges (issue 15, item 5), each against a broker of
// its own (startTestKafka), never the shared one, since they stop it or delete topics:
//
//	TestBrokerOutageRealBroker   the broker stops and comes back on its data: /readyz is 503
//	                             meanwhile, consuming resumes well within session_timeout of
//	                             the broker answering, nothing is lost
//	TestMissingTopicsRealBroker  a missing input, output or dead-letter topic fails the start
//	                             naming the key and the topic; sink.create_topics creates them
//	TestSinkCannotWriteRealBroker the output topic disappears while running: /readyz is 503 with
//	                             the topic named, the log names it, and sink.max_attempts
//	                             bounds the attempts; a lost dead-letter topic stops the
//	                             pipeline instead of freezing every partition

// logBuffer is a log sink the tests read back (the pipeline logs from several goroutines).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines containing every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// startLogged is startPipeline with the log also kept in a buffer the test can search.
func startLogged(t *testing.T, cfg Config) (*running, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	log := zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), logs)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	p, err := New(cfg, log)
	if err != nil {
		t.Fatalf("pipeline.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(r.done)
		r.err = p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r, logs
}

// kafkaCmd runs .ci/kafka.sh cmd for the test's own broker, with extra environment.
func (k *testKafka) kafkaCmd(t *testing.T, cmd string, env ...string) {
	t.Helper()
	c := exec.Command(kafkaScript, cmd)
	c.Env = append(append(os.Environ(), "KAFKA_PORT="+strconv.Itoa(k.port), "KAFKA_SECURITY=0"), env...)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("KAFKA_PORT=%d %s %s: %v\n%s", k.port, kafkaScript, cmd, err, out)
	}
}

// serves reports whether the broker answers metadata for topics with a leader for every
// partition (a fresh transport each time: kafka-go's caches metadata).
func serves(br testBroker, topics map[string]int) bool {
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tr := &kafka.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(br.addrs...), Timeout: time.Second, Transport: tr}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil || len(md.Topics) != len(names) {
		return false
	}
	for _, tp := range md.Topics {
		if tp.Error != nil || len(tp.Partitions) != topics[tp.Name] {
			return false
		}
		for _, p := range tp.Partitions {
			if p.Leader.Host == "" || p.Error != nil {
				return false
			}
		}
	}
	return true
}

// readySample is one reading of the pipeline's readiness.
type readySample struct {
	at    time.Time
	ready bool
	why   string
}

// sampleReady reads p's readiness every 50 ms until stop is closed.
func sampleReady(p *Pipeline, stop <-chan struct{}) <-chan []readySample {
	out := make(chan []readySample, 1)
	go func() {
		var s []readySample
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				out <- s
				return
			case <-tick.C:
				ok, why := p.Metrics().Ready()
				s = append(s, readySample{time.Now(), ok, why})
			}
		}
	}()
	return out
}

// sumCommitted is the sum of the group's committed offsets over in's partitions (-1 on error).
func sumCommitted(br testBroker, group string, in *sensorInput) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := committedOffsets(ctx, br, group, in.topic, in.parts)
	if err != nil {
		return -1
	}
	s := int64(0)
	for _, o := range c {
		s += max(o, 0)
	}
	return s
}

// TestBrokerOutageRealBroker stops the broker in the middle of a run and starts it again on
// its data (.ci/kafka.sh stop, then KAFKA_KEEP_DATA=1 start), with session_timeout at its
// default 30 s and a producer that keeps producing through the outage. It checks:
//   - /readyz turns not ready while the broker is down;
//   - the pipeline resumes (its committed offsets move again) within resumeBound of the broker
//     answering metadata again, and is not ready before that;
//   - nothing is lost: every valid record has an output (emit: all; duplicates are allowed
//     and de-duplicated by id) and every malformed one a dead letter.
//
// Before the fix, kafka-go's reader joined as a new member after the outage and the broker
// waited for the old member's session to expire: consuming resumed about 30 s after the
// broker was back, with /readyz 200 throughout.
func TestBrokerOutageRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("real broker of its own, stopped and restarted")
	}
	realBroker(t)
	k := startTestKafka(t)
	br := k.br
	const parts, total, first = 3, 6000, 2000
	in, out, dlq, group := uniqueName("in"), uniqueName("out"), uniqueName("dlq"), uniqueName("group")
	topics := map[string]int{in: parts, out: parts, dlq: 1}
	createTopics(t, br, topics)
	recs := makeSensorRecords(t, total, parts, 151, 0.01, 0.005)
	input := newInput(in, parts, recs)
	cl := newProducer(t, br)
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer pcancel()
	if err := produceRecords(pctx, cl, input, recs[:first]); err != nil {
		t.Fatal(err)
	}

	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	cfg.Detect.MinRecords = 1000
	cfg.Run.CommitInterval = 200 * time.Millisecond
	cfg.HTTP.Listen = "127.0.0.1:0" // the lag poller feeds readiness; nothing listens here
	cfg.HTTP.LagInterval = 500 * time.Millisecond
	if cfg.Ingest.SessionTimeout != 30*time.Second {
		t.Fatalf("ingest.session_timeout default %s: the bound below assumes 30 s", cfg.Ingest.SessionTimeout)
	}
	r, _ := startLogged(t, cfg)
	r.waitCommitted(t, br, group, input, 60*time.Second)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, _ := r.p.Metrics().Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			_, why := r.p.Metrics().Ready()
			t.Fatalf("not ready 20 s after everything was committed: %s", why)
		}
	}

	// The rest is produced through the outage; franz-go's producer retries until the broker
	// is back.
	produced := make(chan error, 1)
	go func() {
		for lo := first; lo < total; lo += 100 {
			if err := produceRecords(pctx, cl, input, recs[lo:min(lo+100, total)]); err != nil {
				produced <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		produced <- nil
	}()
	time.Sleep(time.Second)
	stopSampling := make(chan struct{})
	samples := sampleReady(r.p, stopSampling)
	tStop := time.Now()
	k.kafkaCmd(t, "stop")
	tStopped := time.Now()
	time.Sleep(3 * time.Second) // down for a while: heartbeats, fetches and the lag poll fail
	tStart := time.Now()
	back := make(chan time.Time, 1)
	go func() { // when the broker answers metadata for the topics again
		for !serves(br, topics) {
			time.Sleep(50 * time.Millisecond)
		}
		back <- time.Now()
	}()
	k.kafkaCmd(t, "start", "KAFKA_KEEP_DATA=1")
	var tBack time.Time
	select {
	case tBack = <-back:
	case <-time.After(60 * time.Second):
		t.Fatal("the broker does not serve the topics 60 s after its start")
	}
	// The committed offsets when the broker stopped are those it still has now (nothing could
	// be committed while it was down); consuming resumed when they move.
	base := int64(-1)
	for base < 0 && time.Since(tBack) < 5*time.Second {
		base = sumCommitted(br, group, input)
	}
	var tResume time.Time
	for deadline := tBack.Add(60 * time.Second); tResume.IsZero(); time.Sleep(50 * time.Millisecond) {
		if s := sumCommitted(br, group, input); s > base && base >= 0 {
			tResume = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets still at %d 60 s after the broker was back", base)
		}
	}
	time.Sleep(2 * time.Second) // readiness after the resumption
	close(stopSampling)
	ss := <-samples
	t.Logf("broker stopped in %s, started %s after the stop, answering %s after its start; consuming resumed %s after it answered",
		tStopped.Sub(tStop).Round(time.Millisecond), tStart.Sub(tStop).Round(time.Millisecond),
		tBack.Sub(tStart).Round(time.Millisecond), tResume.Sub(tBack).Round(time.Millisecond))

	// The bound: after the broker answers, the reader waits at most its join backoff (1 s)
	// before it joins again, then one JoinGroup/SyncGroup/OffsetFetch round, the first fetch,
	// a batch through detect and the sink, and the next commit (commit_interval 200 ms):
	// about 2-4 s measured on the shared 2-core machine. 10 s leaves room for its load and
	// is a third of session_timeout (30 s), which the stalled behaviour waited for.
	const resumeBound = 10 * time.Second
	if d := tResume.Sub(tBack); d > resumeBound {
		t.Errorf("consuming resumed %s after the broker answered again, want < %s (session_timeout %s)", d.Round(time.Millisecond), resumeBound, cfg.Ingest.SessionTimeout)
	}
	// Readiness: not ready within a few lag intervals of the stop (the lag poll's timeout is
	// 1 s, the interval 500 ms: 3 s), and from then on not ready until consuming resumed;
	// 1.5 s before the resumption is the slack for the batch fetched first to reach the
	// commit (commit_interval 200 ms, a detect and a sink write on the loaded machine).
	var firstDown time.Time
	for _, s := range ss {
		if !s.ready && !s.at.Before(tStop) {
			firstDown = s.at
			break
		}
	}
	switch {
	case firstDown.IsZero():
		t.Errorf("/readyz never reported not ready during the outage")
	case firstDown.Sub(tStopped) > 3*time.Second:
		t.Errorf("/readyz reported not ready %s after the broker stopped, want <= 3 s", firstDown.Sub(tStopped).Round(time.Millisecond))
	}
	for _, s := range ss {
		if s.ready && s.at.After(firstDown) && s.at.Before(tResume.Add(-1500*time.Millisecond)) {
			t.Errorf("/readyz ready at %s (broker back at %s, consuming resumed at %s): nothing was consumed then",
				s.at.Sub(tStop).Round(time.Millisecond), tBack.Sub(tStop).Round(time.Millisecond), tResume.Sub(tStop).Round(time.Millisecond))
			break
		}
	}
	if last := ss[len(ss)-1]; !last.ready {
		t.Errorf("not ready 2 s after consuming resumed: %s", last.why)
	}

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	r.waitCommitted(t, br, group, input, 90*time.Second)
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	outs, dups := checkAtLeastOnce(t, br, cfg, input, parts)
	ids := map[string]bool{}
	for _, o := range outs {
		for _, m := range o {
			id, _ := header(m, sink.HeaderID)
			ids[id] = true
		}
	}
	valid := 0
	for _, rec := range input.records {
		if !rec.malformed {
			valid++
		}
	}
	if len(ids) != valid {
		t.Errorf("%d distinct output ids, want one per valid record (%d)", len(ids), valid)
	}
	t.Logf("%d records, %d duplicate outputs (redelivered after the outage, same ids)", len(input.records), dups)
}
