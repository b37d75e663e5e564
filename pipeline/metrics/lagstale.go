package metrics

import (
	"fmt"
	"sync"
	"time"
)

// When the lag is unknown (lag.go's polls failing) and what /readyz says then.
//
// A poll the brokers cannot be reached for turns the broker-connected state off at once (Ready:
// "not connected to the brokers"). One they answer with an error code (a coordinator loading or
// moving, the group's or topic's authorization refused after an ACL change) leaves it on: the
// brokers are there. Such an error is mostly brief (a coordinator loads in seconds), so one
// failed poll changes nothing; but the lag the last good poll found stood for as long as the
// errors lasted: caught up then, /readyz stayed 200 whether the source consumed or not, and the
// lag series showed a figure no poll had measured for minutes. So once no poll has succeeded for
// the source's stale time (max(3 lag_interval, 10 s): every poll of that time failed, three or
// more where a poll fails at once, two where each waits out its timeout of one interval), the
// lag is unknown, whether the brokers answer or not: its series are dropped (the live view shows
// no lag), and /readyz is 503 "consumer lag unknown: no lag poll succeeded for 35s (7 failed in a
// row): <the last poll's error>" in place of the source's part (which needs the lag: whether
// there is any to consume); the next good poll brings both back. (An input topic the brokers do
// not know is said at once: inputMissing.)

// lagHealth is what the polls tell of the lag's measure: when one last succeeded (ok: unix
// nanoseconds on m.now's clock, the poller's start until one does; 0: no poller), the polls that
// failed in a row since (fails) and the last one's error.
type lagHealth struct {
	mu    sync.Mutex
	ok    int64
	fails int
	err   string
}

// lagPollStarted starts the lag's clock: a poller runs (NewLagPoller).
func (m *Metrics) lagPollStarted() {
	h := &m.lagHealth
	h.mu.Lock()
	h.ok, h.fails, h.err = m.now().UnixNano(), 0, ""
	h.mu.Unlock()
}

// lagPolled notes a poll's outcome (err nil: it succeeded) and reports whether the lag is then
// unknown (lagUnknown).
func (m *Metrics) lagPolled(err error) bool {
	h := &m.lagHealth
	h.mu.Lock()
	if err == nil {
		h.ok, h.fails, h.err = m.now().UnixNano(), 0, ""
	} else {
		h.fails++
		h.err = err.Error()
	}
	h.mu.Unlock()
	_, unknown := m.lagUnknown()
	return unknown
}

// lagUnknown says why the lag is unknown: no poll has succeeded for longer than the source's
// stale time, the last one failed ("" and false otherwise, or without a poller).
func (m *Metrics) lagUnknown() (string, bool) {
	stale := time.Duration(m.sourceStaleAfter.Load())
	h := &m.lagHealth
	h.mu.Lock()
	ok, fails, err := h.ok, h.fails, h.err
	h.mu.Unlock()
	if stale <= 0 || ok == 0 || fails == 0 {
		return "", false
	}
	age := m.now().Sub(time.Unix(0, ok))
	if age <= stale {
		return "", false
	}
	return fmt.Sprintf("consumer lag unknown: no lag poll succeeded for %s (%d failed in a row): %s", age.Round(time.Second), fails, err), true
}

// dropLag forgets the lag (unknown): its series go, the live view shows none.
func (m *Metrics) dropLag() {
	m.mu.Lock()
	m.lag = nil
	m.mu.Unlock()
}
