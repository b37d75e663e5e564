package detect

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
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

// TestAlarmStateGroupCountExact: the alert group count is checked against the bytes a group of
// the file's format takes at least (its key's length, its time, folded and, from format 3, its
// partition: 20 bytes there), not 16 (format 2's): a count that 16-byte groups would fit in the
// bytes left, 20-byte ones not, is refused with the count's error before any group is read
// or its map made. Before, it passed the check and failed later, reading groups.
func TestAlarmStateGroupCountExact(t *testing.T) {
	const window, keysWindow = 100, 70
	a := &alarmState{cap: *newAlarmCap(window), groups: map[string]alertGroup{}}
	a.series.pos = 500
	for i := range 40 {
		a.groups[string(rune('a'+i%26))+string(rune('a'+i/26))] = alertGroup{at: 1_700_000_000_000, partition: int32(i)}
	}
	p := a.encode(keysWindow)
	at := 4 + 8 + 8 + 8*((window+63)/64) + 8 + 8 + 8 // the group count's offset (no series)
	if got := binary.LittleEndian.Uint64(p[at:]); got != 40 {
		t.Fatalf("setup: group count %d at byte %d, want 40 (the layout moved?)", got, at)
	}
	left := len(p) - at - 8
	least := 20 // format 3's group: key length, time, folded, partition
	n := uint64(left / 16)
	if n*uint64(least) <= uint64(left) {
		t.Fatalf("setup: %d groups of %d bytes fit the %d bytes left", n, least, left)
	}
	bad := bytes.Clone(p)
	binary.LittleEndian.PutUint64(bad[at:], n)
	_, err := decodeAlarms(AlarmsSnapshotFormat, bad, window, keysWindow)
	if want := fmt.Sprintf("%d alert groups cannot fit in the %d bytes left", n, left); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a group count of %d (16-byte groups fit the %d bytes left, %d-byte ones not): %v, want the count's error %q", n, left, least, err, want)
	}
}
