package testsupport

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// CreateTopics creates the topics (name -> partitions, replication factor 1) and waits until
// every partition has a leader, so that the first produce does not race the creation. A topic
// that already exists is fine when its partitions match.
func CreateTopics(tb testing.TB, br Broker, topics map[string]int) {
	tb.Helper()
	var cfgs []kafka.TopicConfig
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		cfgs = append(cfgs, kafka.TopicConfig{Topic: name, NumPartitions: topics[name], ReplicationFactor: 1})
	}
	CreateTopicConfigs(tb, br, cfgs...)
}

// CreateTopicConfigs is CreateTopics for topics with settings of their own (ConfigEntries,
// e.g. cleanup.policy=compact).
func CreateTopicConfigs(tb testing.TB, br Broker, cfgs ...kafka.TopicConfig) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	parts := map[string]int{}
	var names []string
	for _, c := range cfgs {
		parts[c.Topic] = c.NumPartitions
		names = append(names, c.Topic)
	}
	res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: cfgs})
	if err != nil {
		tb.Fatalf("create topics %v on %s: %v", names, br.Name, err)
	}
	for tp, err := range res.Errors {
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			tb.Fatalf("create topic %s on %s: %v", tp, br.Name, err)
		}
	}
	for {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
		ready := err == nil && len(md.Topics) == len(names)
		if ready {
			for _, tp := range md.Topics {
				ready = ready && tp.Error == nil && len(tp.Partitions) == parts[tp.Name]
				for _, p := range tp.Partitions {
					ready = ready && p.Leader.Host != ""
				}
			}
		}
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("topics %v have no leaders after 30s (last metadata error: %v)", names, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// EndOffsets returns each partition's end offset (the high watermark) of topic.
func EndOffsets(ctx context.Context, br Broker, topic string, parts int) ([]int64, error) {
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range parts {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	res, err := cl.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := make([]int64, parts)
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out, nil
}

// CommittedOffsets returns the group's committed offset of each partition of topic (-1: none).
// For a group that never committed, Apache Kafka answers -1 everywhere, kfake an error
// (GROUP_ID_NOT_FOUND): pollers retry on errors.
func CommittedOffsets(ctx context.Context, br Broker, group, topic string, parts int) ([]int64, error) {
	cl := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	ps := make([]int, parts)
	for p := range ps {
		ps[p] = p
	}
	res, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		return nil, fmt.Errorf("offset fetch for group %s: %w", group, err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("offset fetch for group %s: %w", group, res.Error)
	}
	out := make([]int64, parts)
	for p := range out {
		out[p] = -1
	}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("offset fetch for group %s, partition %d: %w", group, po.Partition, po.Error)
		}
		out[po.Partition] = po.CommittedOffset
	}
	return out, nil
}
