package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestModelTopicDialsBoundedUnderSASL: with SASL on (security.sasl), a dial's handshake is a
// request on the new connection that kafka-go bounds by nothing (Conn.saslHandshake: no
// deadline, no context), so a broker that takes the connection and never answers held
// lookupPartitions and dialLeader past brokerAttemptWait and past the caller's context. Each
// fails within brokerAttemptWait, naming the broker. Failed first: neither had returned 3 s
// after the bound (the test's wait), and would not have before the broker closed.
func TestModelTopicDialsBoundedUnderSASL(t *testing.T) {
	b := testsupport.SilentBroker(t)
	dialer := &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, SASLMechanism: plain.Mechanism{Username: "u", Password: "p"}}
	dials := map[string]func(context.Context) error{
		"partitions": func(ctx context.Context) error { _, err := lookupPartitions(ctx, dialer, b, "models"); return err },
		"leader": func(ctx context.Context) error {
			conn, err := dialLeader(ctx, dialer, b, "models", 0)
			if conn != nil {
				conn.Close()
			}
			return err
		},
	}
	for name, dial := range dials {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			done := make(chan error, 1)
			t0 := time.Now()
			go func() { done <- dial(context.Background()) }()
			select {
			case err := <-done:
				took := time.Since(t0)
				if err == nil || took > brokerAttemptWait+attemptSlack || !strings.Contains(err.Error(), b) || !strings.Contains(err.Error(), "no answer within") {
					t.Fatalf("a dial of a broker that never answers its SASL handshake: %v after %v; want a failure within %v naming the broker", err, took.Round(time.Millisecond), brokerAttemptWait+attemptSlack)
				}
			case <-time.After(brokerAttemptWait + attemptSlack):
				t.Fatalf("a dial of a broker that never answers its SASL handshake still waits after %v", brokerAttemptWait+attemptSlack)
			}
		})
	}
}
