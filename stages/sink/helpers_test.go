package sink

import (
	"testing"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// The sink's tests build batches with internal/testsupport/testbatch and run against the
// brokers of internal/testsupport (kfake, and the real one with KAFKA_BOOTSTRAP).

// testConfig returns a valid sink config for br with fresh topics (created, 3 partitions).
func testConfig(t testing.TB, br testsupport.Broker) Config {
	t.Helper()
	cfg := Default()
	cfg.Brokers = br.Addrs
	cfg.Topic = testsupport.UniqueName("out")
	cfg.DeadLetterTopic = testsupport.UniqueName("dlq")
	testsupport.CreateTopics(t, br, map[string]int{cfg.Topic: 3, cfg.DeadLetterTopic: 3})
	return cfg
}

// openSink is New(cfg), closed when the test ends.
func openSink(t *testing.T, cfg Config) *Sink {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
