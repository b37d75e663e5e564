package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestReadyzSourceAndSink walks /readyz through the source's and the sink's part of readiness
// (issue 15: /readyz stayed 200 while nothing was consumed after an outage, and while the sink
// could not write): with lag, the source must have fetched within the stale time since the
// brokers last answered, or the lag be 0; and every write path of the sink must be writing.
func TestReadyzSourceAndSink(t *testing.T) {
	m := New()
	now := time.Unix(1_700_000_000, 0)
	m.now = func() time.Time { return now }
	m.setSourceStaleAfter(10 * time.Second)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.SetBrokerConnected(true)
	m.SetModel(ModelInfo{Version: 1, BuiltAt: now})
	steps := []struct {
		name   string
		do     func()
		status int
		body   []string
	}{
		{"lag, nothing fetched yet", func() { m.SetLag("g", "in", map[int]int64{0: 5, 1: 0}) }, 503, []string{"source not consuming", "lag"}},
		{"fetched", func() { m.Fetched(0) }, 200, []string{"ready"}},
		{"9 s later", func() { now = now.Add(9 * time.Second) }, 200, []string{"ready"}},
		{"11 s later, still lag", func() { now = now.Add(2 * time.Second) }, 503, []string{"nothing fetched for 11s"}},
		// The sink draining batches fetched earlier is not the source consuming.
		{"acknowledged outputs do not count", func() { m.AddRecordsOut(100, 1) }, 503, []string{"nothing fetched for 11s"}},
		{"only dead letters fetched (a Next of malformed records)", func() { m.Fetched(0) }, 200, []string{"ready"}},
		{"idle and caught up", func() {
			now = now.Add(time.Minute)
			m.SetLag("g", "in", map[int]int64{0: 0, 1: 0})
		}, 200, []string{"ready"}},
		{"sink fails", func() {
			m.SetSinkFailing("sink write", `sink cannot write to sink.topic "alerts": [3] Unknown Topic Or Partition`)
		}, 503, []string{`sink.topic "alerts"`}},
		{"dead letters fail too", func() {
			m.SetSinkFailing("dead-letter write", `sink cannot write to sink.dead_letter_topic "dlq": refused`)
		}, 503, []string{`sink.topic "alerts"`, `sink.dead_letter_topic "dlq"`}},
		{"outputs write again", func() { m.SetSinkFailing("sink write", "") }, 503, []string{`sink.dead_letter_topic "dlq"`}},
		{"dead letters write again", func() { m.SetSinkFailing("dead-letter write", "") }, 200, []string{"ready"}},
		{"broker lost", func() { m.SetBrokerConnected(false) }, 503, []string{"not connected", "source not consuming"}},
		// Back, but what moved before the outage does not count, nor does the lag of before:
		// the source may be waiting to rejoin its group.
		{"broker back, not consuming", func() {
			m.SetBrokerConnected(true)
			m.SetLag("g", "in", map[int]int64{0: 40})
		}, 503, []string{"nothing fetched since the brokers answered"}},
		{"consuming again", func() { m.Fetched(0) }, 200, []string{"ready"}},
		// What the source hands out while the brokers are lost was fetched before they were
		// (queued chunks), and a dead letter written once they are back was fetched before:
		// neither is the source consuming after the outage.
		{"broker lost again", func() { m.SetBrokerConnected(false) }, 503, []string{"not connected"}},
		{"a batch fetched before the outage handed out", func() { m.Fetched(0) }, 503, []string{"not connected"}},
		{"broker back", func() {
			m.SetBrokerConnected(true)
			m.SetLag("g", "in", map[int]int64{0: 40})
		}, 503, []string{"nothing fetched since the brokers answered"}},
		{"dead letters of before the outage written", func() { m.AddDeadLetters(3) }, 503, []string{"nothing fetched since the brokers answered"}},
		{"consuming once more", func() { m.Fetched(0) }, 200, []string{"ready"}},
	}
	for _, s := range steps {
		s.do()
		status, body := testsupport.Get(t, srv.URL+"/readyz")
		if status != s.status {
			t.Errorf("%s: /readyz %d (%q), want %d", s.name, status, body, s.status)
		}
		for _, sub := range s.body {
			if !strings.Contains(body, sub) {
				t.Errorf("%s: /readyz body %q lacks %q", s.name, body, sub)
			}
		}
	}
}

// TestReadyzSourceNotJudgedWithoutLag: with no lag poller (http off, or a Metrics used alone)
// there is no lag to judge the source by, and readiness is what it was.
func TestReadyzSourceNotJudgedWithoutLag(t *testing.T) {
	m := New()
	m.SetBrokerConnected(true)
	m.SetModel(ModelInfo{Version: 1, BuiltAt: time.Now()})
	if ok, why := m.Ready(); !ok {
		t.Errorf("not ready without a lag poller: %s", why)
	}
}

// TestReadyzSaysTheGroupHasNotAssigned (newuser31): restarted after a kill -9, an instance waits
// for its consumer group to assign it partitions until the killed member's session expires, and
// /readyz said only "nothing fetched since the brokers answered". With the source's join told
// (SetJoining), the reason says the group has assigned nothing yet, until it has; then, and
// without it, the reason is what it was; a fetch makes it ready.
func TestReadyzSaysTheGroupHasNotAssigned(t *testing.T) {
	m := New()
	now := time.Unix(1_700_000_000, 0)
	m.now = func() time.Time { return now }
	m.setSourceStaleAfter(10 * time.Second)
	m.SetBrokerConnected(true)
	m.SetModel(ModelInfo{Version: 1, BuiltAt: now})
	m.SetLag("g", "in", map[int]int64{0: 5})
	assigned := false
	m.SetJoining(func() string {
		if assigned {
			return ""
		}
		return `no partitions assigned yet by consumer group "g": ... ingest.session_timeout 30s ...`
	})
	for _, s := range []struct {
		name  string
		do    func()
		ready bool
		why   string
	}{
		{"joining", func() {}, false, `source not consuming: no partitions assigned yet by consumer group "g"`},
		{"assigned, nothing fetched yet", func() { assigned = true }, false, "source not consuming: nothing fetched since the brokers answered"},
		{"fetched", func() { m.Fetched(0) }, true, ""},
	} {
		s.do()
		ok, why := m.Ready()
		if ok != s.ready || !strings.Contains(why, s.why) {
			t.Errorf("%s: ready %v (%q), want %v with %q", s.name, ok, why, s.ready, s.why)
		}
	}
}
