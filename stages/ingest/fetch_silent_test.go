package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestDialPartitionPastASilentBroker (kfake): a bootstrap broker that takes the leader's lookup
// and never answers (a request lost by a loaded broker) held a partition's dial until the
// caller's context ended (its generation's end: the partition fetched nothing until then). Each
// broker's dial is bounded by dialLeaderWait; the next one answers. Failed first: the dial
// returned only at the caller's 30 s deadline, failing.
func TestDialPartitionPastASilentBroker(t *testing.T) {
	env := kfakeEnv(t)
	f, _ := testFetcher(env, 10, 1<<20, 0)
	f.brokers = append([]string{testsupport.SilentBroker(t)}, env.br.Addrs...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*dialLeaderWait)
	defer cancel()
	t0 := time.Now()
	conn, start, err := f.dialPartition(ctx, 0, kafka.FirstOffset, false)
	took := time.Since(t0)
	if conn != nil {
		conn.Close()
	}
	// The slack: a dial to the loopback and a timer's wake-up take milliseconds; 3 s covers a
	// 2-core machine under make test's parallel packages.
	if err != nil || start != 0 || took > dialLeaderWait+3*time.Second {
		t.Fatalf("dial of partition 0 past a broker that never answers: offset %d, %v after %v: want offset 0 within %v",
			start, err, took.Round(time.Millisecond), dialLeaderWait+3*time.Second)
	}
}

// TestDialPartitionBoundedUnderSASL: with SASL on (ingest.security.sasl), a dial's handshake is
// a request on the new connection that kafka-go bounds by nothing (Conn.saslHandshake: no
// deadline, no context), so a broker that took the connection and never answered held the
// partition's dial past dialLeaderWait, and past its generation's end. It fails within
// dialLeaderWait, naming the broker. Failed first: it had not returned 3 s after the bound (the
// test's wait), and would not have before the broker closed.
func TestDialPartitionBoundedUnderSASL(t *testing.T) {
	env := kfakeEnv(t)
	f, _ := testFetcher(env, 10, 1<<20, 0)
	b := testsupport.SilentBroker(t)
	f.brokers = []string{b}
	f.dialer = &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, SASLMechanism: plain.Mechanism{Username: "u", Password: "p"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() {
		conn, _, err := f.dialPartition(ctx, 0, kafka.FirstOffset, false)
		if conn != nil {
			conn.Close()
		}
		done <- err
	}()
	wait := dialLeaderWait + 3*time.Second // (the slack as above)
	select {
	case err := <-done:
		if took := time.Since(t0); err == nil || took > wait || !strings.Contains(err.Error(), b) {
			t.Fatalf("a dial of a broker that never answers its SASL handshake: %v after %v; want a failure within %v naming the broker", err, took.Round(time.Millisecond), wait)
		}
	case <-time.After(wait):
		t.Fatalf("a dial of a broker that never answers its SASL handshake still waits after %v", wait)
	}
}
