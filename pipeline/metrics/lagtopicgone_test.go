package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestReadyzInputTopicDeleted: with the input topic deleted while the pipeline runs, the source
// fetches nothing for ever (kafka-go's "Unknown Topic Or Partition", retried) and the lag poll
// fails, yet /readyz stayed 200 "ready" (the last poll before the deletion had found no lag:
// caught up) and the lag series kept their last values. /readyz says the topic is gone, and
// its lag series go with it; both come back with the topic.
func TestReadyzInputTopicDeleted(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	topic := testsupport.UniqueName("gone")
	testsupport.CreateTopics(t, br, map[string]int{topic: 2})
	m := New()
	m.SetModel(ModelInfo{Version: 1, BuiltAt: time.Now()})
	m.setSourceStaleAfter(10 * time.Second)
	l, ctx := readyLagPoller(t, br.Addrs, topic, m)

	cl := testsupport.NewProducer(t, br)
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = &topic
	req.Topics, req.TopicNames = append(req.Topics, rt), []string{topic}
	res, err := req.RequestWith(ctx, cl)
	cl.Close()
	if err != nil || res.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete topic: %v %+v", err, res)
	}
	// Polled until the metadata says so (kafka-go's transport answers from its metadata cache
	// at first, and a partition's "unknown" alone may be a leader that moved), 15 s at most:
	// the cache lives 6 s.
	var ok bool
	var why string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := l.Poll(ctx); err == nil {
			t.Fatal("the lag poll of a deleted topic did not fail")
		}
		if ok, why = m.Ready(); !ok || time.Now().After(deadline) {
			break
		}
	}
	if ok || !strings.Contains(why, topic) || !strings.Contains(why, "does not exist") {
		t.Errorf("after the input topic's deletion: ready %v (%q), want not ready saying that topic %s does not exist", ok, why, topic)
	}
	if left := lagSeries(m); left != 0 {
		t.Errorf("%d lag series left for a deleted topic, want none", left)
	}

	testsupport.CreateTopics(t, br, map[string]int{topic: 2})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) { // (the cache, as above)
		_, err := l.Poll(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lag poll with the topic back: %v", err)
		}
	}
	if ok, why := m.Ready(); !ok {
		t.Errorf("with the topic back: not ready (%s)", why)
	}
}
