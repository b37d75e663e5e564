package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/pipeline/metrics"
	"github.com/outlierd/outlierd/stages/sink"
)

// made is what NewWithMetrics returned.
type made struct {
	p   *Pipeline
	err error
}

// newServed starts NewWithMetrics on its own goroutine with its metrics already served, as
// cmd/outlierd does, and returns the server's base URL and NewWithMetrics's result to come.
func newServed(t *testing.T, cfg Config) (string, <-chan made) {
	t.Helper()
	return newServedCtx(t, context.Background(), cfg)
}

// newServedCtx is newServed with New's context.
func newServedCtx(t *testing.T, ctx context.Context, cfg Config) (string, <-chan made) {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()
	m := metrics.New()
	srv, err := metrics.Listen("127.0.0.1:0", m, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	out := make(chan made, 1)
	go func() {
		p, err := NewWithMetrics(ctx, cfg, log, m)
		out <- made{p, err}
	}()
	return "http://" + srv.Addr(), out
}

// awaitReadyz polls base's /readyz until its body contains want (and /healthz answers "ok"
// each time), failing when New returns first or limit passes.
func awaitReadyz(t *testing.T, base, want string, newDone <-chan made, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		st, body, err := testsupport.TryGet(base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz while New checks the topics: %v", err)
		}
		if hst, hbody, err := testsupport.TryGet(base + "/healthz"); err != nil || hst != 200 || hbody != "ok\n" {
			t.Fatalf("/healthz while New checks the topics: %d %q %v, want 200 ok", hst, hbody, err)
		}
		if st == http.StatusServiceUnavailable && strings.Contains(body, want) {
			t.Logf("/readyz: %d %q", st, body)
			return
		}
		select {
		case r := <-newDone:
			t.Fatalf("New returned (%v) before /readyz said %q (last: %d %q)", r.err, want, st, body)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said %q within %s (last: %d %q)", want, limit, st, body)
		}
	}
}

// TestReadyzDuringTopicCheck (issue 23): the HTTP listener serves while New checks the topics.
// Before, cmd/outlierd started it after New: for the whole check (up to 30 s for unreachable
// brokers) /healthz and /readyz refused connections, and a missing input topic ended the
// process before anything said why over HTTP.
//
// Missing: while New asks the brokers again in case the input topic was created a moment ago,
// /readyz is 503 naming the topic and what the check waits for and /healthz is 200; New then
// fails with the error it always gave, which /readyz gives as the reason from then on.
// Appearing: the input topic is created while New waits for it; New succeeds, /readyz moves on
// to the running pipeline's reasons (no model yet), and to 200 once a model serves.
func TestReadyzDuringTopicCheck(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		brokers := strings.Join(br.Addrs, ",")
		t.Run("missing", func(t *testing.T) {
			in, out, dlq, group := testsupport.UniqueName("rz-in"), testsupport.UniqueName("rz-out"), testsupport.UniqueName("rz-dlq"), testsupport.UniqueName("rz-group")
			testsupport.CreateTopics(t, br, map[string]int{out: 1, dlq: 1})
			base, newDone := newServed(t, sensorConfig(br, in, out, dlq, group, sink.EmitAll))
			awaitReadyz(t, base, fmt.Sprintf("not ready: checking that the topics exist on %s: waiting for ingest.topic %q to appear in the brokers' metadata",
				brokers, in), newDone, 10*time.Second)
			var r made
			select {
			case r = <-newDone:
			case <-time.After(topicCheckWait):
				t.Fatal("New did not return")
			}
			wantErr := fmt.Sprintf("pipeline: ingest.topic: topic %q does not exist on %s (outlierd never creates its input topic)", in, brokers)
			if r.err == nil || r.err.Error() != wantErr {
				t.Fatalf("New: %v, want %q", r.err, wantErr)
			}
			if st, body, err := testsupport.TryGet(base + "/readyz"); err != nil || st != 503 || body != "not ready: start failed: "+wantErr+"\n" {
				t.Errorf("/readyz after the failed check: %d %q %v, want 503 with the error", st, body, err)
			}
		})
		t.Run("appearing", func(t *testing.T) {
			defer func(d time.Duration) { metadataSettle = d }(metadataSettle)
			metadataSettle = 20 * time.Second // room to create the topic while New waits for it
			const parts = 2
			in, out, dlq, group := testsupport.UniqueName("rz-in"), testsupport.UniqueName("rz-out"), testsupport.UniqueName("rz-dlq"), testsupport.UniqueName("rz-group")
			testsupport.CreateTopics(t, br, map[string]int{out: parts, dlq: 1})
			cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
			cfg.Detect.Window, cfg.Detect.MinRecords = 1000, 500
			cfg.Run.CommitInterval = 200 * time.Millisecond
			cfg.HTTP.LagInterval = 200 * time.Millisecond
			base, newDone := newServed(t, cfg)
			awaitReadyz(t, base, fmt.Sprintf("waiting for ingest.topic %q to appear in the brokers' metadata", in), newDone, 10*time.Second)
			testsupport.CreateTopics(t, br, map[string]int{in: parts})
			var r made
			select {
			case r = <-newDone:
			case <-time.After(metadataSettle + 10*time.Second):
				t.Fatal("New did not return after the input topic was created")
			}
			if r.err != nil {
				t.Fatalf("New after the input topic appeared: %v", r.err)
			}
			if st, body, err := testsupport.TryGet(base + "/readyz"); err != nil || st != 503 || strings.Contains(body, "topic") || !strings.Contains(body, "no model serving yet") {
				t.Errorf("/readyz once the topics were checked: %d %q %v, want 503 for the running pipeline's reasons only", st, body, err)
			}
			produceSensors(t, br, newInput(in, parts, makeSensorRecords(t, 800, parts, 23, 0.01, 0)))
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- r.p.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-ran; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				st, body, err := testsupport.TryGet(base + "/readyz")
				if err == nil && st == 200 && body == "ready\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz not ready 60 s after the records were produced: %d %q %v", st, body, err)
				}
			}
		})
	})
}

// TestReadyzWhileBrokersUnreachable (issue 23): a broker that starts after outlierd (a
// Kubernetes pod beside its broker, a compose file) is waited for, up to topicCheckWait, with
// /healthz 200 (a liveness probe must not restart the process for it) and /readyz 503 saying
// that the brokers cannot be reached yet, with the error; once the broker is up, the check
// passes and New returns the pipeline.
func TestReadyzWhileBrokersUnreachable(t *testing.T) {
	port, release := testsupport.ReservePort(t) // refusing, and nobody else's, until kfake takes it
	addr := "127.0.0.1:" + strconv.Itoa(port)
	in, out, dlq := testsupport.UniqueName("rz-in"), testsupport.UniqueName("rz-out"), testsupport.UniqueName("rz-dlq")
	br := testsupport.Broker{Name: "late", Addrs: []string{addr}}
	base, newDone := newServed(t, sensorConfig(br, in, out, dlq, testsupport.UniqueName("rz-group"), sink.EmitAll))
	awaitReadyz(t, base, fmt.Sprintf("not ready: checking that the topics exist on %s: waiting for the brokers to answer about ingest.topic %q (unreachable, attempt ",
		addr, in), newDone, 10*time.Second)
	release()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(1, in, out, dlq))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case r := <-newDone:
		if r.err != nil {
			t.Fatalf("New once the broker was up: %v", r.err)
		}
		r.p.src.Close()
		r.p.snk.Close()
		r.p.dev.Close()
	case <-time.After(topicCheckWait):
		t.Fatal("New did not return once the broker was up")
	}
	if st, body, err := testsupport.TryGet(base + "/readyz"); err != nil || st != 503 || strings.Contains(body, "topic") {
		t.Errorf("/readyz once the topics were checked: %d %q %v, want 503 for the running pipeline's reasons only", st, body, err)
	}
}

// refusingAddr is a loopback address that refuses connections, held for the whole test
// (testsupport.ReservePort): no other listener can take it meanwhile.
func refusingAddr(t *testing.T) string {
	t.Helper()
	port, _ := testsupport.ReservePort(t)
	return fmt.Sprintf("127.0.0.1:%d", port)
}
