package ingest

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

// TestCommitWithEndedGenerationKeepsNewPartitions: a commit attempt made with a generation that
// has ended while a later one runs (a Commit that took the generation before a rebalance, then
// waited for the request in flight or backed off after the rebalance's failed attempt) leaves
// alone a partition the later generation added. Before, the attempt's keepAssigned judged the
// partitions by the ended generation and revoked it from the checkpointer: the records of it
// still in flight were forgotten, so the next commit, once later records were done, went past
// them (a crash before they were written lost them: at-least-once broken).
func TestCommitWithEndedGenerationKeepsNewPartitions(t *testing.T) {
	const topic = "in"
	g1 := &kafka.Generation{ID: 1, Assignments: map[string][]kafka.PartitionAssignment{topic: {{ID: 0}}}}
	g2 := &kafka.Generation{ID: 2, Assignments: map[string][]kafka.PartitionAssignment{topic: {{ID: 0}, {ID: 2}}}}
	cp := checkpoint.New()
	s := &Source{cfg: Config{Topic: topic}, cp: cp, log: zerolog.Nop(), committed: map[int]int64{},
		sending: make(chan struct{}, 1), fetch: &groupFetcher{gen: g2}}
	// Partition 2, new in generation 2: offset 10 done, 11 in flight.
	for _, off := range []int64{10, 11} {
		if err := cp.Register(2, off); err != nil {
			t.Fatal(err)
		}
	}
	cp.Done(2, 10)
	sent, err := s.commitOnce(context.Background(), g1)
	if sent != nil {
		t.Errorf("committed %v with the ended generation", sent)
	}
	if err == nil {
		t.Errorf("no error for a commit with the ended generation %d", g1.ID)
	}
	if n := cp.Pending(2); n != 1 {
		t.Fatalf("partition 2 has %d records in flight, want 1 (offset 11): the ended generation's commit revoked it", n)
	}
	if c := cp.Committable()[2]; c != 11 {
		t.Fatalf("partition 2 committable %d, want 11", c)
	}
}
