package testsupport

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is a Kafka to run a test against.
type Broker struct {
	Name  string         // "kfake" or "kafka": names subtests and messages
	Addrs []string       // bootstrap addresses
	Kfake *kfake.Cluster // the in-process cluster (to install control functions); nil for the real broker
}

// RealBroker returns the broker of KAFKA_BOOTSTRAP (comma-separated addresses), or skips the
// test when it is not set.
func RealBroker(tb testing.TB) Broker {
	tb.Helper()
	bs := os.Getenv("KAFKA_BOOTSTRAP")
	if bs == "" {
		tb.Skip("KAFKA_BOOTSTRAP not set: run `.ci/kafka.sh start` and `eval \"$(.ci/kafka.sh env)\"`, or `.ci/with-kafka.sh go test ./pkg/`, to run against Apache Kafka")
	}
	return Broker{Name: "kafka", Addrs: strings.Split(bs, ",")}
}

// KfakeBroker starts an in-process kfake cluster of one broker (plus opts, e.g.
// kfake.SeedTopics) and closes it when the test ends.
func KfakeBroker(tb testing.TB, opts ...kfake.Opt) Broker {
	tb.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return Broker{Name: "kfake", Addrs: c.ListenAddrs(), Kfake: c}
}

// ForEachBroker runs f in a subtest "kfake" against an in-process cluster and in a subtest
// "kafka" against the broker of KAFKA_BOOTSTRAP (skipped when it is not set).
func ForEachBroker(t *testing.T, f func(t *testing.T, br Broker)) {
	t.Run("kfake", func(t *testing.T) { f(t, KfakeBroker(t)) })
	t.Run("kafka", func(t *testing.T) { f(t, RealBroker(t)) })
}

// nameSeq makes names unique within a run; the time makes them unique across runs against
// the same long-lived broker.
var nameSeq atomic.Int64

// UniqueName returns a topic or group name no other test of any run uses, so that tests
// against a shared real broker never read each other's messages.
func UniqueName(prefix string) string {
	return fmt.Sprintf("outlierd-%s-%d-%d", prefix, time.Now().UnixNano(), nameSeq.Add(1))
}
