package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
