package metrics

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

func TestPartitionLag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		hw, start, committed int64
		fromEarliest         bool
		want                 int64
	}{
		{"committed", 100, 0, 60, true, 40},
		{"caught up", 100, 0, 100, true, 0},
		{"no commit, earliest", 100, 10, -1, true, 90},
		{"no commit, latest", 100, 10, -1, false, 0},
		{"commit below retention", 100, 50, 20, true, 50},
		{"commit below retention, latest", 100, 50, 20, false, 50},
		{"empty partition", 0, 0, -1, true, 0},
		{"commit past the end (truncated log)", 10, 0, 15, true, 0},
	}
	for _, tc := range tests {
		if got := partitionLag(tc.hw, tc.start, tc.committed, tc.fromEarliest); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestNewLagPollerValidates(t *testing.T) {
	t.Parallel()
	_, err := NewLagPoller(LagConfig{}, nil, zerolog.Nop())
	if err == nil {
		t.Fatal("empty config: no error")
	}
	for _, sub := range []string{"no brokers", "topic", "interval", "nil Metrics"} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error %q does not mention %q", err, sub)
		}
	}
}

// TestLagPoller measures a known lag on an in-process kfake cluster and, when KAFKA_BOOTSTRAP
// is set, on the real broker there; on kfake it also checks that a stopped cluster turns the
// broker-connected state (and /readyz) off.
func TestLagPoller(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		br := testsupport.KfakeBroker(t)
		c, addrs := br.Kfake, br.Addrs // addrs before Close: ListenAddrs blocks on a closed cluster
		m := testLag(t, br)
		c.Close()
		l, err := NewLagPoller(LagConfig{Brokers: addrs, Topic: "t", GroupID: "g", Interval: time.Second}, m, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := l.Poll(ctx); err == nil {
			t.Fatal("poll of a stopped cluster: no error")
		}
		if ok, why := m.Ready(); ok || !strings.Contains(why, "not connected") {
			t.Fatalf("after the cluster stopped: ready %v (%s)", ok, why)
		}
	})
	t.Run("kafka", func(t *testing.T) {
		testLag(t, testsupport.RealBroker(t))
	})
}

// testLag writes 10, 20 and 0 records to the three partitions of a new topic, commits
// partition 0 at offset 4 for a group, and checks the lag both start positions give.
func testLag(t *testing.T, br testsupport.Broker) *Metrics {
	brokers := br.Addrs
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("lag")
	group := topic + "-group"
	testsupport.CreateTopics(t, br, map[string]int{topic: 3})
	var recs []*kgo.Record
	for p, n := range []int{10, 20, 0} {
		for range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("x")})
		}
	}
	testsupport.Produce(t, br, recs...)
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	// A simple commit (generation -1, no member): the group has no live members. A fresh
	// broker answers "not coordinator" until its offsets topic exists: retry briefly.
	for {
		oc, err := cl.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1,
			Topics: map[string][]kafka.OffsetCommit{topic: {{Partition: 0, Offset: 4}}}})
		if err == nil {
			for _, p := range oc.Topics[topic] {
				err = errors.Join(err, p.Error)
			}
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, kafka.NotCoordinatorForGroup) && !errors.Is(err, kafka.GroupCoordinatorNotAvailable) &&
			!errors.Is(err, kafka.GroupLoadInProgress) {
			t.Fatalf("commit: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	m := New()
	for _, tc := range []struct {
		fromEarliest bool
		want         map[int]int64
	}{
		{true, map[int]int64{0: 6, 1: 20, 2: 0}},
		{false, map[int]int64{0: 6, 1: 0, 2: 0}},
	} {
		l, err := NewLagPoller(LagConfig{Brokers: brokers, Topic: topic, GroupID: group, FromEarliest: tc.fromEarliest, Interval: time.Second}, m, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("from earliest %v: lag %v, want %v", tc.fromEarliest, got, tc.want)
		}
		m.mu.Lock()
		published := maps.Clone(m.lag)
		m.mu.Unlock()
		if !maps.Equal(published, tc.want) {
			t.Errorf("published lag %v, want %v", published, tc.want)
		}
		// The series name the group: a builder polls its own group's lag (pipeline.BuilderGroup)
		// and its scorers theirs, on the same topic and partitions. Without the label one
		// deployment's series of the two groups were one (max by (topic, partition) took the
		// larger: an alert, a dashboard or an autoscaler on the scorers' lag read the builder's).
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "outlierd_consumer_lag" {
				continue
			}
			for _, s := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["group"] != group || labels["topic"] != topic {
					t.Errorf("outlierd_consumer_lag labels %v, want group %q and topic %q", labels, group, topic)
				}
			}
		}
	}
	if !m.connected.Load() {
		t.Error("brokers answered but the state says not connected")
	}
	// Run: polls at once, then stops with its context and marks the brokers disconnected.
	l, err := NewLagPoller(LagConfig{Brokers: brokers, Topic: topic, GroupID: group, Interval: 50 * time.Millisecond}, m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	m.SetLag(group, topic, nil)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(rctx) }()
	for {
		m.mu.Lock()
		n := len(m.lag)
		m.mu.Unlock()
		if n == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("Run never published the lag")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	if m.connected.Load() {
		t.Error("after Run ended the state still says connected")
	}
	m.SetBrokerConnected(true) // as before Run ended, for the caller's next checks
	return m
}

// TestLagOfAGroupWithNoCommits: a group that has committed nothing yet (every pipeline's first
// seconds, `outlierd demo`'s start) lags by the whole log under start_offset earliest, as
// OPERATIONS says. A broker that answers the offset fetch with GROUP_ID_NOT_FOUND (kfake, the
// demo's; Kafka's newer group protocol) failed the poll instead: "consumer lag poll failed"
// at every demo's start, and no lag until the first commit.
func TestLagOfAGroupWithNoCommits(t *testing.T) {
	testsupport.ForEachBroker(t, func(t *testing.T, br testsupport.Broker) {
		topic := testsupport.UniqueName("lagnone")
		testsupport.CreateTopics(t, br, map[string]int{topic: 2})
		var recs []*kgo.Record
		for p, n := range []int{3, 5} {
			for range n {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("x")})
			}
		}
		testsupport.Produce(t, br, recs...)
		l, err := NewLagPoller(LagConfig{Brokers: br.Addrs, Topic: topic, GroupID: topic + "-never", FromEarliest: true, Interval: time.Second}, New(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := l.Poll(ctx)
		if err != nil || !maps.Equal(got, map[int]int64{0: 3, 1: 5}) {
			t.Fatalf("lag %v, %v; want {0: 3, 1: 5}, no error", got, err)
		}
	})
}
