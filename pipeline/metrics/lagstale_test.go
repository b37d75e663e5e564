package metrics

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// readyLagPoller is a lag poller of topic (group "g", every second) that has polled once and
// found m ready (caught up, nothing to consume), with a context for its later polls (30 s).
func readyLagPoller(t *testing.T, brokers []string, topic string, m *Metrics) (*LagPoller, context.Context) {
	t.Helper()
	l, err := NewLagPoller(LagConfig{Brokers: brokers, Topic: topic, GroupID: "g", Interval: time.Second}, m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := l.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, why := m.Ready(); !ok {
		t.Fatalf("caught up, nothing to consume: not ready (%s)", why)
	}
	return l, ctx
}

// lagSeries is how many lag series m holds.
func lagSeries(m *Metrics) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.lag)
}

// TestReadyzLagUnknownUnderBrokerErrors: the brokers answering every lag poll with an error code
// (here GROUP_AUTHORIZATION_FAILED on the committed offsets, as after an ACL change; a
// coordinator that stays unavailable alike) left the brokers "connected" and the lag as the last
// good poll found it: caught up then, /readyz stayed 200 "ready" for ever, whether the source
// consumed or not, and the lag series kept their last values. One failed poll (a coordinator
// loading for a moment) must leave readiness as it is; once no poll has succeeded for the
// source's stale time (max(3 lag_interval, 10 s)), /readyz is 503 saying the lag is unknown,
// since when and why (the poll's error), and the lag series are gone; a poll that succeeds
// again brings both back.
func TestReadyzLagUnknownUnderBrokerErrors(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	topic := testsupport.UniqueName("lagerr")
	testsupport.CreateTopics(t, br, map[string]int{topic: 2})
	var refuse atomic.Bool
	br.Kfake.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		br.Kfake.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = req.GetVersion()
		resp.ErrorCode = 30 // GROUP_AUTHORIZATION_FAILED
		for _, g := range req.(*kmsg.OffsetFetchRequest).Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, 30
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	m := New()
	now := time.Now()
	m.now = func() time.Time { return now }
	m.SetModel(ModelInfo{Version: 1, BuiltAt: now})
	l, ctx := readyLagPoller(t, br.Addrs, topic, m)

	refuse.Store(true)
	now = now.Add(5 * time.Second) // (within the stale time, 10 s at an interval of 1 s)
	if _, err := l.Poll(ctx); err == nil {
		t.Fatal("the refused lag poll did not fail")
	}
	if ok, why := m.Ready(); !ok {
		t.Errorf("one failed lag poll 5 s after a good one: not ready (%s), want ready (a coordinator loading)", why)
	}
	now = now.Add(6 * time.Second)
	if _, err := l.Poll(ctx); err == nil {
		t.Fatal("the refused lag poll did not fail")
	}
	ok, why := m.Ready()
	if ok || !strings.Contains(why, "consumer lag unknown") || !strings.Contains(why, "Group Authorization Failed") || !strings.Contains(why, "11s") {
		t.Errorf("no lag poll succeeded for 11 s (the brokers answer with an error): ready %v (%q), want not ready saying the lag is unknown for 11s and the poll's error", ok, why)
	}
	if left := lagSeries(m); left != 0 {
		t.Errorf("%d lag series kept from the last good poll 11 s ago, want none (unknown)", left)
	}

	refuse.Store(false)
	now = now.Add(time.Second)
	if _, err := l.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, why := m.Ready(); !ok {
		t.Errorf("the lag poll works again: not ready (%s)", why)
	}
}
