package ingest

import (
	"context"
	"fmt"
	"slices"

	"github.com/segmentio/kafka-go"
)

// Commits only move forward.
//
// kafka-go's Reader keeps the messages it fetched before a rebalance and hands them out after
// it, those of partitions now assigned to another member included (v0.4.51, reader.go
// unsubscribe: draining them "could race with the client calling ReadMessage"), and it has no
// revocation callback to say which partitions left. Finishing such a stale batch makes a
// partition's done offset move here while its new owner is already further: committing it
// would move the group's offset back (pipeline TestBuilderAndScorersRealBroker once waited 90 s
// for a group whose idle partition stayed behind). So Commit first reads the group's committed
// offsets and leaves out every partition where the group is already at or past this member's
// offset. One OffsetFetch per Commit that has something to send (run.commit_interval, 1 s by
// default). The new owner can still commit between that read and this commit; the window is
// one round trip, and what it costs is a re-read after a restart, never a loss.

// groupCommitted returns the group's committed offset of each partition in parts (-1: none).
func (s *Source) groupCommitted(ctx context.Context, parts []int) (map[int]int64, error) {
	slices.Sort(parts)
	res, err := s.reaper.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: s.cfg.GroupID, Topics: map[string][]int{s.cfg.Topic: parts}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: reading group %s's committed offsets of %s before committing: %w", s.cfg.GroupID, s.cfg.Topic, err)
	}
	out := make(map[int]int64, len(parts))
	for _, po := range res.Topics[s.cfg.Topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("ingest: reading group %s's committed offset of %s/%d before committing: %w", s.cfg.GroupID, s.cfg.Topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.CommittedOffset
	}
	return out, nil
}
