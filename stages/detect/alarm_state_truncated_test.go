package detect

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestAlarmStateTruncated: every cut of a format-3 alarm state payload (a series in alarm, alert
// groups with their partitions, one of them not known, a scorer's key's cap) is refused with
// an error, never a panic or a state read from part of it; a group count past what the
// payload holds is refused before its groups are read; the whole payload reads back to the
// same state, the groups' partitions with it. Format 2's reading of the same bytes (no
// partitions) does not take them whole either.
func TestAlarmStateTruncated(t *testing.T) {
	const window, keysWindow = 100, 70
	a := &alarmState{cap: *newAlarmCap(window), groups: map[string]alertGroup{
		"a": {at: 1_700_000_000_000, folded: 3, partition: 7},
		"b": {at: 1_700_000_060_000, folded: 0, partition: -1},
	}}
	a.series.pos, a.series.keyless, a.series.newest = 500, 450, 490
	a.series.keyed = map[string]uint64{"s": 480}
	a.cap.next, a.cap.filled = 5, 5
	c := savedCap{partition: 2, cap: *newAlarmCap(keysWindow)}
	c.cap.at = 400
	a.keyCaps = map[string]savedCap{"k": c}
	p := a.encode(keysWindow)
	for n := range len(p) {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("payload cut at %d of %d bytes: panic %v", n, len(p), r)
				}
			}()
			if got, err := decodeAlarms(AlarmsSnapshotFormat, p[:n], window, keysWindow); err == nil {
				t.Fatalf("payload cut at %d of %d bytes read back without an error (%d groups)", n, len(p), len(got.groups))
			}
		}()
	}
	b, err := decodeAlarms(AlarmsSnapshotFormat, p, window, keysWindow)
	if err != nil {
		t.Fatal(err)
	}
	if b.groups["a"] != a.groups["a"] || b.groups["b"] != a.groups["b"] || !bytes.Equal(b.encode(keysWindow), p) {
		t.Errorf("read back: groups %v, want %v", b.groups, a.groups)
	}
	if _, err := decodeAlarms(2, p, window, keysWindow); err == nil {
		t.Error("a format-3 payload read as format 2 without an error")
	}
	// The group count: after the window, position, cap, keyless, newest, the series' count and
	// its one series.
	at := 4 + 8 + 8 + 8*((window+63)/64) + 8 + 8 + 8 + 4 + len("s") + 8
	if got := binary.LittleEndian.Uint64(p[at:]); got != 2 {
		t.Fatalf("setup: group count %d at byte %d, want 2 (the layout moved?)", got, at)
	}
	bad := bytes.Clone(p)
	binary.LittleEndian.PutUint64(bad[at:], 1<<40)
	if _, err := decodeAlarms(AlarmsSnapshotFormat, bad, window, keysWindow); err == nil {
		t.Error("a group count of 2^40 read without an error")
	}
}
