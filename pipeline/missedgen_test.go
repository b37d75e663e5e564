package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestMissedGenerationAlertKfake: end to end, an instance removed from its consumer group (as
// the coordinator removes a member whose session expired: a LeaveGroup sent for it) joins again
// with the same partition, a generation missed. s1's fault is alerted, every record committed,
// the member removed; once the instance is back, s1's next far record, 5 minutes after its
// alert (alert_cooldown 10m), is folded into the alert when the partition's committed offset
// is still the one the instance committed (no member committed a record of it meanwhile:
// keyScope.stayed's offsets), as without the removal (the control); it is a new alert when
// another member committed meanwhile (the instance held out of the group by its JoinGroups
// refused; another member may have owned the partition and alerted for its keys: a franz-go member, whose JoinGroups
// alone pass, reads record 1500, commits it and leaves). Before, every missed generation
// dropped the groups: the record was a new alert after the removal with the offset unmoved.
func TestMissedGenerationAlertKfake(t *testing.T) {
	for _, c := range []struct {
		name               string
		removed, committed bool
	}{{"kept", false, false}, {"removed", true, false}, {"removed, another committed", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			br := testsupport.KfakeBroker(t)
			var hold atomic.Bool     // the instance's JoinGroups refused (retriable: it tries again)
			var refused atomic.Int32 // how many
			br.Kfake.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
				br.Kfake.KeepControl()
				if !hold.Load() {
					return nil, nil, false
				}
				for _, p := range req.(*kmsg.JoinGroupRequest).Protocols { // kafka-go's (the instance's), not franz-go's
					if p.Name == "range" || p.Name == "roundrobin" {
						refused.Add(1)
						resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
						resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
						return resp, nil, true
					}
				}
				return nil, nil, false
			})
			in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
			testsupport.CreateTopics(t, br, map[string]int{in: 1, out: 1, dlq: 1})
			t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			rng := rand.New(rand.NewPCG(20, 28))
			rec := func(i int, far bool) *kgo.Record {
				temp, hum := 20+rng.NormFloat64(), 40+rng.NormFloat64()
				if far {
					temp = 80
				}
				return &kgo.Record{Topic: in, Partition: 0, Key: fmt.Appendf(nil, "s%d", i%3), Timestamp: t0.Add(time.Duration(i) * time.Second),
					Value: fmt.Appendf(nil, `{"temp":%.3f,"hum":%.3f}`, temp, hum)}
			}
			const first, alert, again = 1500, 1201, 1501 // (records 1201 and 1501 are s1's)
			var recs []*kgo.Record
			for i := range first {
				recs = append(recs, rec(i, i == alert))
			}
			testsupport.Produce(t, br, recs...)
			cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
			cfg.Ingest.Features, cfg.Ingest.Uncertainty = []string{"temp", "hum"}, nil
			cfg.Detect.FlagBy = detect.FlagBySignificance
			cfg.Detect.Window, cfg.Detect.MinRecords, cfg.Detect.Distance.N = 1000, 500, 50
			cfg.Detect.AlarmRate, cfg.Detect.AlertCooldown = 0.003, 10*time.Minute
			cfg.Run.CommitInterval = 100 * time.Millisecond
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r := startPipeline(t, cfg, nil)
			cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 5 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// until every record of the first part is committed (none read again after the
			// removal), and the group's one member is known
			var member string
			for {
				if ctx.Err() != nil {
					t.Fatalf("the first %d records not committed in 60 s", first)
				}
				time.Sleep(50 * time.Millisecond)
				off, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{in: {0}}})
				if err != nil || len(off.Topics[in]) != 1 || off.Topics[in][0].CommittedOffset < first {
					continue
				}
				if member = groupMember(ctx, cl, group); member != "" {
					break
				}
			}
			recs = recs[:0]
			for i := first; i < first+30; i++ {
				recs = append(recs, rec(i, i == again))
			}
			if c.removed {
				hold.Store(c.committed)
				res, err := cl.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: group, Members: []kafka.LeaveGroupRequestMember{{ID: member}}})
				if err != nil || res.Error != nil {
					t.Fatalf("removing the member %s: %v %v", member, err, res)
				}
				if c.committed { // another member joins, reads record 1500 and commits it, and leaves
					for refused.Load() == 0 { // (the instance's join waits)
						if ctx.Err() != nil {
							t.Fatal("the instance's join not refused in 60 s")
						}
						time.Sleep(50 * time.Millisecond)
					}
					testsupport.Produce(t, br, recs...)
					otherMemberCommits(ctx, t, br, group, in, first)
					hold.Store(false)
				}
				for m := groupMember(ctx, cl, group); m == "" || m == member; m = groupMember(ctx, cl, group) {
					if ctx.Err() != nil {
						t.Fatal("the instance not back in the group in 60 s")
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			if !c.committed {
				testsupport.Produce(t, br, recs...)
			}
			want := int64(first + 30)
			if c.committed {
				want-- // (record 1500: the other member's)
			}
			for r.p.Stats().RecordsOut.Load() < want {
				if ctx.Err() != nil {
					t.Fatalf("%d records out in 60 s, want %d", r.p.Stats().RecordsOut.Load(), want)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
				t.Fatal(err)
			}
			_, b := alertThenFlagged(t, br, out, alert, again, "after")
			if b.Scores.Folded == c.committed {
				t.Errorf("s1's far record 5 minutes after its alert, %s: folded %v (alert_timestamp %s), want %v (%s)",
					c.name, b.Scores.Folded, b.Scores.AlertTimestamp, !c.committed, b.Explanation)
			}
		})
	}
}

// groupMember is the one member of group in a stable generation, or "".
func groupMember(ctx context.Context, cl *kafka.Client, group string) string {
	res, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil || len(res.Groups) != 1 || res.Groups[0].Error != nil || res.Groups[0].GroupState != "Stable" || len(res.Groups[0].Members) != 1 {
		return ""
	}
	return res.Groups[0].Members[0].MemberID
}

// otherMemberCommits joins group as another member (franz-go's client, its cooperative-sticky
// protocol), reads topic's partition 0 from the group's offset, commits the record at offset
// at, and leaves the group.
func otherMemberCommits(ctx context.Context, t *testing.T, br testsupport.Broker, group, topic string, at int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // (leaves the group)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the other member read no record %d: %v", at, fs.Errors())
		}
		for _, r := range fs.Records() {
			if r.Offset == at {
				if err := cl.CommitRecords(ctx, r); err != nil {
					t.Fatalf("the other member's commit of record %d: %v", at, err)
				}
				return
			}
		}
	}
}
