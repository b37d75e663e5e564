package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/sink"
)

// TestGroupNotAuthorizedNamesTheGroup: a principal without the ACL on its consumer group (Read
// on the group) is refused every join: kafka-go retries and logs it, and the pipeline stops on
// the refusal with "ingest: fetch from T: [30] Group Authorization Failed", which named the
// topic, not the group the ACL is missing for (ingest.group_id, or a builder's GROUP.builder).
// The stop must name the group.
func TestGroupNotAuthorizedNamesTheGroup(t *testing.T) {
	in, out, dlq := testsupport.UniqueName("acl-in"), testsupport.UniqueName("acl-out"), testsupport.UniqueName("acl-dlq")
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(1, in, out, dlq))
	br.Kfake.ControlKey(kmsg.JoinGroup.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		br.Kfake.KeepControl()
		resp := r.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, true
	})
	group := testsupport.UniqueName("acl-g")
	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitAll)
	_, newDone := newServed(t, cfg)
	r := <-newDone
	if r.err != nil {
		t.Fatalf("New: %v", r.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	err := r.p.Run(ctx)
	t.Logf("Run ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run with its group refused: %v (context %v), want it to stop on the refusal", err, ctx.Err())
	}
	for _, want := range []string{"Group Authorization Failed", group, "ingest.group_id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run's error %q does not say %q", err, want)
		}
	}
}

// TestTopicCheckNotAuthorizedIsFatal: a principal without Describe on a topic is answered
// TOPIC_AUTHORIZATION_FAILED in the metadata: the start fails at once naming the key and the
// topic, not retried as brokers that cannot be reached (a regression test: it held already).
func TestTopicCheckNotAuthorizedIsFatal(t *testing.T) {
	br := testsupport.KfakeBroker(t, kfake.SeedTopics(1, "in"))
	br.Kfake.ControlKey(kmsg.Metadata.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		br.Kfake.KeepControl()
		resp := r.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, "127.0.0.1", 1
		resp.Brokers = append(resp.Brokers, b)
		tp := kmsg.NewMetadataResponseTopic()
		name := "in"
		tp.Topic, tp.ErrorCode = &name, kerr.TopicAuthorizationFailed.Code
		resp.Topics = append(resp.Topics, tp)
		return resp, nil, true
	})
	ref := TopicRef{Key: "ingest.topic", Name: "in", Brokers: br.Addrs}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := ref.PartitionIDs(ctx, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "ingest.topic") || !strings.Contains(err.Error(), "Topic Authorization Failed") {
		t.Fatalf("topic check refused by an ACL: %v, want an error naming ingest.topic and the refusal", err)
	}
	if d := time.Since(start); d > 5*time.Second { // (one round trip on loopback; the retries took 30 s)
		t.Errorf("the check took %s, want it to fail at once", d)
	}
}
