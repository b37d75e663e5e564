package ingest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestFetchReconnectsBackOff (kfake): a partition whose every fetch fails in a way that makes
// the goroutine reconnect (no leader on that broker; an offset the fetch calls out of range
// while the partition's offsets say it is in range) backs off as a failing dial does, 100 ms
// growing to 1 s, and logs each reconnection with the partition and the offset. Before, a
// successful dial reset the back-off, so it reconnected every 100 ms forever (about 30
// fetches in 3 s), and the out-of-range case logged nothing.
func TestFetchReconnectsBackOff(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.NotLeaderForPartition, kerr.OffsetOutOfRange} {
		t.Run(code.Message, func(t *testing.T) {
			env := kfakeEnv(t)
			produce(t, env, makeMessages(0, 0, 3, false))
			c := env.br.Kfake
			var fetches atomic.Int64
			c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				fetches.Add(1)
				return testsupport.FailFetch(kr.(*kmsg.FetchRequest), code), nil, true
			})
			f, errs := testFetcher(env, 16, 1<<20, 16)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.fetchPartition(ctx, 1, 0, kafka.FirstOffset)
			}()
			time.Sleep(3 * time.Second)
			cancel()
			<-done
			// Backing off: fetches at about 0, 0.1, 0.5, 1.4 and 2.4 s; every 100 ms before.
			if n := fetches.Load(); n < 2 || n > 10 {
				t.Errorf("%d fetches in 3 s, want 2-10", n)
			}
			logged := errs.all()
			want := fmt.Sprintf("fetching partition 0 of %s at offset 0: %v", env.topic, kafka.Error(code.Code))
			said := 0
			for _, l := range logged {
				if strings.HasPrefix(l, want) {
					said++
				}
			}
			if said == 0 || int64(said) < fetches.Load()-1 {
				t.Errorf("%d of %d failed fetches logged %q...; logged %q", said, fetches.Load(), want, logged)
			}
		})
	}
}
