package ingest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
)

// TestSourceMissedGeneration: a Source's assignments carry the group's generation ids (on
// kfake), from which a missed generation shows: A alone, then B joins (A's next assignment is
// of the next generation: it took part in the rebalance, though B's join made it); then A is
// removed from the group as the coordinator removes a member whose session expired (its
// LeaveGroup, sent for it), the group goes on without it (B alone: every partition B's), and A,
// told by its next heartbeat, joins again as a new member: its next assignment is of a
// generation two or more after its last, the one between B's alone. A user of the partitions
// (pipeline keyScope.stayed: the alert groups) must not take them as A's throughout.
func TestSourceMissedGeneration(t *testing.T) { testSourceMissedGeneration(t, kfakeEnv(t)) }

// TestSourceMissedGenerationRealBroker: TestSourceMissedGeneration on Apache Kafka, whose
// coordinator kfake's follows: the member removed comes back generations after its last.
func TestSourceMissedGenerationRealBroker(t *testing.T) { testSourceMissedGeneration(t, realEnv(t)) }

func testSourceMissedGeneration(t *testing.T, env kafkaEnv) {
	group := fmt.Sprintf("g-missed-%d", time.Now().UnixNano())
	hear := func(s *Source) <-chan Assignment {
		c := make(chan Assignment, 16)
		s.OnAssigned(func(a Assignment) { c <- a })
		return c
	}
	next := func(c <-chan Assignment, who string) Assignment {
		t.Helper()
		select {
		case a := <-c:
			return a
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no assignment in 20 s", who)
		}
		return Assignment{}
	}
	all := []int32{0, 1, 2}[:itPartitions]
	a := openSource(t, itConfig(env, group))
	aGens := hear(a)
	first := next(aGens, "A alone")
	if !slices.Equal(first.Partitions, all) {
		t.Fatalf("A alone: %+v, want every partition", first)
	}
	b := openSource(t, itConfig(env, group))
	bGens := hear(b)
	aJoined, bJoined := next(aGens, "A after B's join"), next(bGens, "B's join")
	if aJoined.Generation != first.Generation+1 || bJoined.Generation != aJoined.Generation {
		t.Fatalf("B joins: A's generation %d then %d, B's %d; want the next one, both", first.Generation, aJoined.Generation, bJoined.Generation)
	}
	a.reaper.mu.Lock()
	member := a.reaper.joined
	a.reaper.mu.Unlock()
	if member == "" {
		t.Fatal("setup: A's member id not known")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(env.br.Addrs...), Timeout: 5 * time.Second}
	res, err := cl.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: group, Members: []kafka.LeaveGroupRequestMember{{ID: member}}})
	if err != nil || res.Error != nil {
		t.Fatalf("removing A (%s) from the group: %v %v", member, err, res)
	}
	alone := next(bGens, "B without A")
	if alone.Generation != aJoined.Generation+1 || !slices.Equal(alone.Partitions, all) {
		t.Fatalf("B without A: %+v, want generation %d with every partition", alone, aJoined.Generation+1)
	}
	back := next(aGens, "A back")
	if back.Generation <= alone.Generation {
		t.Fatalf("A back in generation %d, B alone in %d: want a later one", back.Generation, alone.Generation)
	}
	if back.Generation == aJoined.Generation+1 {
		t.Fatalf("A back in generation %d, after its %d: no generation missed shows", back.Generation, aJoined.Generation)
	}
	t.Logf("A: generations %d %v, %d %v, missed %d (B's alone, %v), back in %d %v", first.Generation, first.Partitions,
		aJoined.Generation, aJoined.Partitions, alone.Generation, alone.Partitions, back.Generation, back.Partitions)
}

// TestSourceAssignmentOwn: each assignment carries, for each of its partitions, this member's
// committed offset of it as the previous assignment ended (Own): its last successful commit,
// else the offset that assignment started it from; -1 for a partition not in it or with none
// committed. What the alert groups compare with the new assignment's offsets at a missed
// generation (pipeline keyScope.stayed).
func TestSourceAssignmentOwn(t *testing.T) {
	s := &Source{cp: checkpoint.New(), tracked: map[int]bool{}, committed: map[int]int64{}, assigned: &assignment{}}
	var got []Assignment
	s.OnAssigned(func(a Assignment) { got = append(got, a) })
	s.newGeneration(Assignment{Generation: 3, Partitions: []int32{0, 1, 2}, Offsets: []int64{10, 20, -1}})
	s.commitMu.Lock()
	s.committed[1] = 25 // (a commit of generation 3)
	s.commitMu.Unlock()
	s.newGeneration(Assignment{Generation: 5, Partitions: []int32{0, 1, 2, 3}, Offsets: []int64{10, 30, 7, 4}})
	if len(got) != 2 {
		t.Fatalf("%d assignments heard, want 2", len(got))
	}
	if !slices.Equal(got[0].Own, []int64{-1, -1, -1}) {
		t.Errorf("the first assignment's own offsets %v, want none", got[0].Own)
	}
	if want := []int64{10, 25, -1, -1}; !slices.Equal(got[1].Own, want) {
		t.Errorf("own offsets %v, want %v (0: as it started, 1: committed, 2: none, 3: not held)", got[1].Own, want)
	}
	if c := s.Committed(); fmt.Sprint(c) != fmt.Sprint(map[int32]int64{0: 10, 1: 30, 2: 7, 3: 4}) {
		t.Errorf("committed after the second start %v, want its offsets", c)
	}
}
