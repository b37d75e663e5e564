package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestRunServesReadyzDuringTopicCheck (issue 23): `outlierd run` serves HTTP before it checks
// the topics. With the input topic missing, /healthz answers 200 and /readyz 503 naming the
// topic the check waits for, while the check asks the brokers again in case it was just
// created; then the run exits 1 with the error it always gave. Before, the listener started
// after the check: every request was refused until the process exited.
func TestRunServesReadyzDuringTopicCheck(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		in, out, dlq := testsupport.UniqueName("rz-in"), testsupport.UniqueName("rz-out"), testsupport.UniqueName("rz-dlq")
		testsupport.CreateTopics(t, br, map[string]int{out: 1, dlq: 1})
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		brokers := strings.Join(br.Addrs, ",")
		path := writeFile(t, "pipeline.yaml", fmt.Sprintf("ingest:\n  brokers: [%q]\n  topic: %s\n  group_id: rz\n  features: [temp, pressure]\n"+
			"sink:\n  topic: %s\n  dead_letter_topic: %s\nhttp:\n  listen: 127.0.0.1:%d\n", brokers, in, out, dlq, port))
		type result struct {
			errs string
			code int
		}
		done := make(chan result, 1)
		go func() {
			_, errs, code := outlierd(t, "run", "--config", path)
			done <- result{errs, code}
		}()
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		want := fmt.Sprintf("not ready: checking that the topics exist on %s: waiting for ingest.topic %q to appear in the brokers' metadata", brokers, in)
		var saw, healthy bool
		var last string
		var r result
	poll:
		for {
			select {
			case r = <-done:
				break poll
			case <-time.After(20 * time.Millisecond):
			}
			if st, body, err := testsupport.TryGet(base + "/readyz"); err != nil {
				last = err.Error()
			} else {
				last = fmt.Sprintf("%d %q", st, body)
				saw = saw || st == http.StatusServiceUnavailable && strings.HasPrefix(body, want)
			}
			if st, body, err := testsupport.TryGet(base + "/healthz"); err == nil && st == 200 && body == "ok\n" {
				healthy = true
			}
		}
		if !saw {
			t.Errorf("/readyz never said %q during the topic check (last: %s)", want, last)
		}
		if !healthy {
			t.Errorf("/healthz never answered 200 during the topic check")
		}
		wantErr := fmt.Sprintf("pipeline: ingest.topic: topic %q does not exist on %s (outlierd never creates its input topic)", in, brokers)
		if r.code != 1 || !strings.Contains(r.errs, wantErr) {
			t.Errorf("run: exit %d, stderr %q; want exit 1 with %q", r.code, r.errs, wantErr)
		}
	})
}
