package pipeline

import (
	"errors"
	"maps"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/stages/detect"
)

// TestScanAdvanceThroughHeldWrites: the builder's writes completed before its scan ended are held
// and then taken in offset order whatever order they were heard in: a batch the scan read
// wholly is passed over, one across the scan's end moves the record past its own part only
// (the keys below the end judged by the scan stay as it found them), a failed write takes no
// offset of the record, and a gap (another writer's message) stops the partition for the run
// while the other partition goes on. Past scanPendingKeys held, nothing moves on.
func TestScanAdvanceThroughHeldWrites(t *testing.T) {
	batchOf := func(mp int, base int64, keys ...string) []kafka.Message {
		msgs := make([]kafka.Message, len(keys))
		for i, k := range keys {
			msgs[i] = kafka.Message{Partition: mp, Offset: base + int64(i), Key: []byte(keyModelPrefix + k)}
		}
		return msgs
	}
	found := map[staleRef]staleKey{{1, "a"}: {}, {1, "b"}: {}, {1, "c"}: {}, {1, "s"}: {}, {2, "x"}: {}, {2, "y"}: {}}
	p := &keyPublisher{}
	p.stale.dir = t.TempDir()
	// Heard out of order: partition 1's [12,14) before [8,12) (the scan's end is 10).
	p.noteWritten(batchOf(1, 12, "c", "d"), nil)
	p.noteWritten(batchOf(1, 8, "a", "s", "b", "e"), nil) // a and s at 8, 9: judged by the scan
	p.noteWritten(batchOf(1, 4, "q"), nil)                // wholly below the end
	p.noteWritten(batchOf(2, 20, "x"), errors.New("failed"))
	p.noteWritten(batchOf(2, 20, "x"), nil)
	p.advance.begin(3, map[int]int64{1: 10, 2: 20}, found)
	p.noteWritten(batchOf(2, 22, "y"), nil) // 21 is another writer's: partition 2 stops at 21
	p.noteWritten(batchOf(1, 14, "a"), nil)
	a := &p.advance
	if want := map[int]int64{1: 15, 2: 21}; !maps.Equal(a.ends, want) {
		t.Errorf("the record's offsets %v, want %v", a.ends, want)
	}
	if _, ok := a.found[staleRef{1, "a"}]; ok {
		t.Error("key a written at 14 after the scan's end is still stale in the record")
	}
	// s: written below the scan's end (the scan's judgment holds); y: written past a gap.
	if _, s := a.found[staleRef{1, "s"}]; !s || len(a.found) != 2 {
		t.Errorf("the record's stale keys %v, want {1 s} and {2 y}", a.found)
	}
	if _, ok := a.found[staleRef{2, "y"}]; !ok {
		t.Error("key y written past a gap was dropped from the record's stale keys")
	}

	// Past the bound on the held keys: no partition moves on this run.
	q := &keyPublisher{}
	q.stale.dir = t.TempDir()
	big := make([]string, scanPendingKeys+1)
	q.noteWritten(batchOf(1, 10, big...), nil)
	q.advance.begin(3, map[int]int64{1: 10}, found)
	q.noteWritten(batchOf(1, int64(10+len(big)), "a"), nil)
	if q.advance.ends[1] != 10 || q.advance.dirty {
		t.Errorf("past scanPendingKeys held the record moved on to %d (dirty %v), want 10", q.advance.ends[1], q.advance.dirty)
	}
}

// TestScanIdentityFollowsTheReadableFormat: a release that reads a newer keys' model format
// judges otherwise the messages an earlier one passed over as not its to judge (a newer
// builder's, ErrSnapshotFormat: otherConfiguration's ""), so its builder must not read on from
// an earlier release's record: the identity holds the newest format the release reads, not only
// scanJudgment (which a format's change could leave as it was).
func TestScanIdentityFollowsTheReadableFormat(t *testing.T) {
	p := &keyPublisher{features: []string{"x"}}
	if p.scanIdentity(3) == p.scanIdentityReading(3, detect.KeyModelFormat+1) {
		t.Errorf("the scan record's identity is the same for a release reading key model formats up to %d and one reading up to %d",
			detect.KeyModelFormat, detect.KeyModelFormat+1)
	}
}
