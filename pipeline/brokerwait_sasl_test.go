package pipeline

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"

	"github.com/outlierd/outlierd/internal/core/kafkasec"
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

// TestModelTopicDialsSecuredRealBroker: kafkasec.CutAtEnd's dial (a copy of the dialer with its own
// DialFunc) keeps the dialer's TLS and SASL: the model topic's partitions, a leader's offsets
// and a follower's read (partitionReader) through the secured listener (SASL_SSL, SCRAM). Skips without the secured listeners of
// `KAFKA_SECURITY=1 .ci/kafka.sh start`.
func TestModelTopicDialsSecuredRealBroker(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_SASL_SSL_BOOTSTRAP")
	ca, user, pass := os.Getenv("KAFKA_TLS_CA"), os.Getenv("KAFKA_SASL_USERNAME"), os.Getenv("KAFKA_SASL_PASSWORD")
	if bootstrap == "" || ca == "" || user == "" || pass == "" {
		t.Skip("no secured broker: KAFKA_SECURITY=1 .ci/kafka.sh start, and export what it prints")
	}
	br := testsupport.RealBroker(t)
	mt := testsupport.UniqueName("sasl-models")
	createCompactedTopic(t, br, mt, 2)
	produceKeyModel(t, br, mt, 4)
	sec := kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CAFile: ca}, SASL: kafkasec.SASL{Mechanism: "scram-sha-512", Username: user, Password: kafkasec.NewSecret(pass)}}
	dialer, err := sec.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*brokerAttemptWait)
	defer cancel()
	cfg := modelTopicConfig{brokers: []string{bootstrap}, topic: mt, maxMessageBytes: 1 << 20}
	m, err := modelTopicPartitions(ctx, cfg, dialer)
	if err != nil || m != 2 {
		t.Fatalf("partitions through the secured listener: %d, %v; want 2", m, err)
	}
	first, end, err := partitionOffsets(ctx, cfg, dialer, 1)
	if err != nil || first != 0 || end != 1 {
		t.Fatalf("offsets through the secured listener: %d..%d, %v; want 0..1", first, end, err)
	}
	if v, err := lastKeyVersion(ctx, cfg, dialer, 1); err != nil || v != 4 {
		t.Fatalf("last key version through the secured listener: %d, %v; want 4", v, err)
	}
	r := newPartitionReader(cfg, dialer, 1, kafka.FirstOffset, zerolog.Nop()) // (the followers' reader: partread.go)
	defer r.Close()
	if msg, err := r.ReadMessage(ctx); err != nil || keyModelVersion(msg) != 4 {
		t.Fatalf("a follower's read through the secured listener: version %d, %v; want the key model of version 4", keyModelVersion(msg), err)
	}
}
